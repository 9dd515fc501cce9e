"""The fused epilogue's description, checks and reference on the CPU, and what its PTX shows: beta = 0 reads no C,
a bias is one load per value (per column where the store clips), each activation is its instructions; fp8 operands
reach the fp8 wgmma. The numbers on a GPU: tests/gpu/test_epilogue_gpu.py."""

import importlib
import math

import pytest
import torch
from cutlass.cute.runtime import make_fake_stream

from cutecourse.dispatch import FUSING
from cutecourse.kernels import ptx
from cutecourse.kernels.gemm import epilogue, fp8, gemm04_multistage, gemm11_pingpong, launcher, operands
from cutecourse.kernels.gemm.epilogue import ACTIVATIONS, Epilogue, Fused, plan, reference


def test_an_epilogue_names_what_it_fuses_and_refuses_what_it_does_not_know():
    assert Epilogue("gelu_tanh", bias="n").activation == "gelu_tanh"
    with pytest.raises(ValueError, match=r"activation='gelu2'.*'gelu_tanh'.*add an Activation"):
        Epilogue("gelu2")
    with pytest.raises(ValueError, match=r"bias='col'.*'n'.*'m'"):
        Epilogue(bias="col")
    with pytest.raises(ValueError, match=r"aux=1"):
        Epilogue(aux=1)


def test_every_activation_has_a_device_function_and_a_reference():
    x = torch.linspace(-4, 4, 81, dtype=torch.float64)
    want = {"none": x, "relu": x.clamp(min=0),
            "gelu_tanh": 0.5 * x * (1 + torch.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3))),
            "gelu_erf": 0.5 * x * (1 + torch.erf(x / math.sqrt(2))), "silu": x / (1 + torch.exp(-x))}
    assert set(ACTIVATIONS) == set(want)
    for name, activation in ACTIVATIONS.items():
        assert callable(activation.device)
        torch.testing.assert_close(activation.reference(x), want[name], rtol=1e-12, atol=1e-12)


def test_the_reference_broadcasts_the_bias_and_never_reads_c_when_beta_is_zero():
    acc = torch.arange(6.0).view(2, 3)
    nan = torch.full((2, 3), float("nan"))
    d, x = reference(acc, Epilogue("relu", bias="n"), alpha=2.0, beta=0.0, c=nan, bias=torch.tensor([-1.0, 0, -20]))
    assert x.tolist() == [[-1, 2, -16], [5, 8, -10]] and d.tolist() == [[0, 2, 0], [5, 8, 0]]
    d, _ = reference(acc, Epilogue(bias="m"), beta=0.5, c=torch.ones(2, 3), bias=torch.tensor([10.0, 20.0]))
    assert d.tolist() == [[10.5, 11.5, 12.5], [23.5, 24.5, 25.5]] and d.dtype == torch.float64


D = torch.empty(4, 6, dtype=torch.bfloat16)


@pytest.mark.parametrize("kwargs, match", [
    ({"epilogue": Epilogue(bias="n"), "bias": torch.zeros(4)}, r"bias has shape \(4,\); .* \(6,\), one per column"),
    ({"epilogue": Epilogue(bias="m"), "bias": torch.zeros(6)}, r"bias has shape \(6,\); .* \(4,\), one per row"),
    ({"epilogue": Epilogue(bias="n"), "bias": torch.zeros(6, dtype=torch.float64)}, r"bias has dtype torch.float64"),
    ({"epilogue": Epilogue(bias="n"), "bias": torch.zeros(12)[::2]}, r"bias has stride 2.*contiguous"),
    ({"epilogue": Epilogue(bias="n"), "bias": [0.0] * 6}, r"bias must be a torch.Tensor"),
    ({"bias": torch.zeros(6)}, r"bias is given but the epilogue has bias='none'"),
    ({"beta": 0.5}, r"c must be a torch.Tensor \(beta=0.5 reads it"),
    ({"beta": 1.0, "c": torch.empty(4, 6)}, r"c is \(4, 6\) torch.float32; it must match D, \(4, 6\) torch.bfloat16"),
    ({"beta": 1.0, "c": torch.empty(6, 4, dtype=torch.bfloat16).t()}, r"c has strides \(1, 4\)"),
    ({"epilogue": Epilogue(aux=True)}, r"aux must be a torch.Tensor \(Epilogue\(aux=True\) stores"),
    ({"aux": torch.empty_like(D)}, r"aux is given but the epilogue has aux=False"),
    ({"alpha": float("nan")}, r"alpha=nan: pass a finite Python float"),
    ({"beta": True}, r"beta=True"),
    ({"epilogue": "gelu"}, r"epilogue is a str; pass an Epilogue"),
    ({"epilogue": Epilogue(bias="n"), "bias": torch.zeros(6, device="meta")}, r"bias is on meta but D is on cpu"),
])
def test_bad_epilogue_arguments_are_named_with_their_fix(kwargs, match):
    args = {"epilogue": None, "alpha": 1.0, "beta": 0.0, "c": None, "bias": None, "aux": None, **kwargs}
    with pytest.raises(ValueError, match=match):
        plan(**args, d=D)


def test_what_the_call_fixes_goes_into_the_compiled_kernel():
    assert plan(None, 1.0, 0.0, None, None, None, D) == epilogue.PLAIN and epilogue.PLAIN.identity
    fused = plan(Epilogue("silu", bias="m"), 2.0, 0.0, torch.full((4, 6), float("nan")), torch.zeros(4), None, D)
    assert fused == Fused(Epilogue("silu", bias="m"), source=False, scaled=True, bias_dtype="float32")
    assert not fused.identity


def test_a_step_without_an_epilogue_says_which_steps_fuse():
    a, b = torch.randn(64, 64, dtype=torch.float16), torch.randn(64, 64, dtype=torch.float16)
    with pytest.raises(ValueError, match=r"gemm04_multistage stores the plain product, so it takes no epilogue, "
                                         r"alpha: fused epilogues are in every step from gemm05_swizzle on"):
        gemm04_multistage.gemm(a, b, torch.empty(64, 64, dtype=torch.float16), epilogue=Epilogue("relu"), alpha=2.0)


def test_fp8_operands_are_hoppers_and_k_major():
    a8 = torch.randn(64, 32).to(torch.float8_e4m3fn)
    bt8 = torch.randn(48, 32).to(torch.float8_e4m3fn)
    d = torch.empty(64, 48, dtype=torch.bfloat16)
    ops = operands.traits(a8, bt8.t(), d, step="gemm11_pingpong", vector=True, fp8=True)
    assert (ops.ab, ops.a_major, ops.b_major, ops.vector) == ("float8_e4m3fn", "k", "k", 16)
    with pytest.raises(ValueError, match=r"a is K-major and b N-major; wgmma reads fp8 operands K-major only"):
        operands.traits(a8, bt8.t().contiguous(), d, step="gemm11_pingpong", vector=True, fp8=True)
    with pytest.raises(ValueError, match=r"gemm05_swizzle takes float16 or bfloat16 operands, and fp8 .* gemm11"):
        operands.traits(a8, bt8.t(), d, step="gemm05_swizzle", vector=True)


def test_quantize_scales_the_largest_value_to_the_formats_largest():
    x = torch.randn(64, 64) * 1000
    for dtype in fp8.DTYPES:
        q, scale = fp8.quantize(x, dtype)
        assert q.dtype == dtype and float(q.float().abs().max()) == torch.finfo(dtype).max
        rel = float((fp8.dequantize(q, scale) - x.double()).norm() / x.double().norm())
        assert rel < (0.04 if dtype == torch.float8_e4m3fn else 0.08), rel
    with pytest.raises(ValueError, match=r"max\|x\| = 0.0"):
        fp8.quantize(torch.zeros(3))
    with pytest.raises(ValueError, match=r"dtype=torch.float16: pick torch.float8_e4m3fn"):
        fp8.quantize(x, torch.float16)


def _ptx(module, fused, arch, m=200, n=136, k=72, ab=torch.bfloat16, b_major="n"):
    a = torch.randn(m, k).to(ab)
    b = torch.randn(k, n).to(ab) if b_major == "n" else torch.randn(n, k).to(ab).t()
    d = torch.empty(m, n, dtype=torch.bfloat16)
    ops = operands.traits(a, b, d, step=module.__name__.rpartition(".")[2], vector=True,
                             fp8=ab in fp8.DTYPES)
    bias = torch.zeros(n if fused.epilogue.bias == "n" else m, dtype=getattr(torch, fused.bias_dtype or "bfloat16"))
    config = module.FP8_CONFIG if ab in fp8.DTYPES else module.Config()
    return ptx.ptx_of(lambda options: launcher.compile_for(
        module.host, config, ops, a, b, d, make_fake_stream(), options=options, fused=fused, source=d.clone(),
        bias=bias, aux=d.clone()), arch)


C_LOADS, BIAS_LOADS = "ld.global.b16", "ld.global.b32"  # C is bf16 here, the bias fp32


#: The steps whose TMA store clips D at the matrix's edge, so that their epilogue reads C and the bias at clamped
#: coordinates with no compare and branch a value (`epilogue.element`'s ``clipped``).
CLIPPED = ("gemm10_multicast", "gemm11_pingpong")


@pytest.mark.parametrize("step", FUSING)
def test_the_ptx_reads_c_only_when_beta_is_nonzero_and_the_bias_once_per_value(step):
    """Every step from 5 fuses the epilogue; each default tile gives a thread 128 accumulators. In the clipped steps
    a thread holds two of every eight columns of its tile (a wgmma fragment: rows r and r + 8 of each 64-row slab),
    so it reads the bias once per such column, tile_n / 4 loads, and the epilogue adds no branch to the plain
    kernel's."""
    module = importlib.import_module(f"cutecourse.kernels.gemm.{step}")
    arch = "sm_90a" if module.gemm.min_cc >= 90 else "sm_80"
    gelu = _ptx(module, Fused(Epilogue("gelu_tanh", bias="n"), bias_dtype="float32"), arch)
    assert ptx.count(gelu, C_LOADS) == 0, "beta = 0 must not read C"
    assert ptx.count(gelu, "tanh.approx.f32") == 128  # a thread's values
    assert ptx.count(gelu, BIAS_LOADS) == (module.Config().tile_n // 4 if step in CLIPPED else 128)
    if step in CLIPPED:
        assert ptx.count(gelu, "bra") == ptx.count(_ptx(module, Fused(), arch), "bra")
    full = _ptx(module, Fused(Epilogue("relu", bias="m", aux=True), source=True, scaled=True, bias_dtype="float32"),
                arch)
    assert ptx.count(full, C_LOADS) == 128 and ptx.count(full, "max.f32") == 128
    assert ptx.count(full, "st.global.b16") == 128  # the aux output, one value at a time


def test_fp8_operands_compile_to_the_fp8_wgmma():
    code = _ptx(gemm11_pingpong, Fused(scaled=True), "sm_90a", k=256, ab=torch.float8_e4m3fn, b_major="k")
    assert ptx.count(code, "wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3") > 0
    assert ptx.count(code, "wgmma.mma_async.sync.aligned.m64n128k16") == 0
