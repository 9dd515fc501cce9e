"""The fused epilogue of every step from 5 (`dispatch.FUSING`) on the GPU against float64 torch (`epilogue.reference`):
D = act(alpha · A·B + beta · C + bias) on 525 random ragged shapes and 105 edge cases over 105 compiled epilogues
(every activation with every bias kind, the bias in D's dtype or float32, aux on and off, both operand dtypes, every
D dtype, both majors of A and B, beta = 0 with a NaN-filled C, which must not be read, and beta ≠ 0, alpha ≠ 1 and
alpha = 1), every output poisoned with NaN first, judged with bounds scaled by each activation's Lipschitz constant
(`tolerances.within_epilogue_bounds`). fp8 (e4m3 and e5m2, steps 10 and 11, both K-major) against float64 of the
dequantized inputs, and once against torch._scaled_mm. The launcher's refusals of bad epilogue arguments, by name.
A compile is cached per (operands, config, epilogue, bias dtype, beta ≠ 0, alpha ≠ 1): about 115 here, 2-4 s each,
so the file takes about 7 minutes on an H200."""

import importlib.util
import random
import zlib
from pathlib import Path
from typing import Any, NamedTuple

import pytest

torch = pytest.importorskip("torch")

from cutecourse.dispatch import FUSING  # noqa: E402
from cutecourse.kernels.gemm import fp8, tolerances  # noqa: E402
from cutecourse.kernels.gemm.epilogue import ACTIVATIONS, Epilogue, reference  # noqa: E402

pytestmark = pytest.mark.gpu(80)


def _load(name, path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# The ladder's GPU helpers (shapes, operands, runnable), imported, not copied.
gemm_gpu = _load("gemm_gpu_helpers", Path(__file__).with_name("test_gemm_gpu.py"))
within_epilogue_bounds = tolerances.within_epilogue_bounds

STEPS = list(FUSING)
BIASES = ("none", "n", "m")
D_DTYPES = (torch.float32, torch.float16, torch.bfloat16)
MAJORS = (("k", "n"), ("k", "k"), ("m", "n"), ("m", "k"))
SHAPES_PER_EPILOGUE = 6  # one of test_gemm_gpu's edge cases, then 5 random shapes


class Variant(NamedTuple):
    """One compiled epilogue: the compile key is (operands, config, epilogue, bias dtype, whether C is read, whether
    alpha scales), so each variant is one compile, whatever shapes and scalars it then runs on."""

    epilogue: Epilogue
    combo: tuple  # test_gemm_gpu's (A/B dtype, D dtype, A major, B major)
    bias_dtype: Any  # "d" (D's dtype) or torch.float32
    reads_c: bool  # beta != 0 (else beta = 0 and C is NaN-filled)
    scaled: bool  # alpha != 1 (else alpha = 1)


def variants(step):
    """15 variants of `step`: every (activation, bias) pair once, the operand dtype, D dtype, majors, bias dtype,
    aux, beta and alpha spread evenly over them in a shuffled order (alpha ≠ 1 in two thirds)."""
    rng = random.Random(zlib.crc32(step.encode()))
    pairs = [(activation, bias) for activation in ACTIVATIONS for bias in BIASES]

    def spread(options):
        picks = (list(options) * len(pairs))[:len(pairs)]
        rng.shuffle(picks)
        return picks

    return [Variant(Epilogue(activation, bias=bias, aux=aux), (ab, d, *majors), bias_dtype, reads_c, scaled)
            for (activation, bias), ab, d, majors, bias_dtype, aux, reads_c, scaled in zip(
                pairs, spread((torch.float16, torch.bfloat16)), spread(D_DTYPES), spread(MAJORS),
                spread(("d", torch.float32)), spread((False, True)), spread((False, True)),
                spread((True, True, False)))]


def variant_id(v):
    ab, d, a_major, b_major = v.combo
    bias = "nobias" if v.epilogue.bias == "none" else f"bias_{v.epilogue.bias}_{'d' if v.bias_dtype == 'd' else 'f32'}"
    return (f"{v.epilogue.activation}-{bias}-{'aux' if v.epilogue.aux else 'noaux'}-{str(ab)[6:]}-{str(d)[6:]}-"
            f"{a_major}{b_major}-{'beta' if v.reads_c else 'beta0'}-{'alpha' if v.scaled else 'alpha1'}")


CASES = [(step, variant) for step in STEPS for variant in variants(step)]


def test_the_epilogues_cover_every_activation_bias_dtype_major_aux_and_scalar():
    both = {False, True}
    pairs = {(a, b) for a in ACTIVATIONS for b in BIASES}
    for step in STEPS:
        found = variants(step)
        assert {(v.epilogue.activation, v.epilogue.bias) for v in found} == pairs
        assert {v.combo[0] for v in found} == {torch.float16, torch.bfloat16}
        assert {v.combo[1] for v in found} == set(D_DTYPES)
        assert {v.combo[2:] for v in found} == set(MAJORS)
        assert {v.epilogue.aux for v in found} == {v.reads_c for v in found} == {v.scaled for v in found} == both
    every = [v for _, v in CASES]
    biased = [v for v in every if v.epilogue.bias != "none"]
    assert {(v.epilogue.bias, v.bias_dtype) for v in biased} == {
        (b, t) for b in ("n", "m") for t in ("d", torch.float32)}
    assert {v.combo[1] for v in biased if v.bias_dtype == torch.float32} == set(D_DTYPES)
    assert {(v.epilogue.activation, v.epilogue.aux) for v in every} == {(a, x) for a in ACTIVATIONS for x in both}
    assert {(v.epilogue.activation, v.reads_c) for v in every} == {(a, x) for a in ACTIVATIONS for x in both}
    assert len(CASES) * (SHAPES_PER_EPILOGUE - 1) >= 200  # random shapes


def epilogue_shapes(step, variant, vector):
    """One of test_gemm_gpu's edge cases (rotating over the epilogues), then log-uniform ragged shapes, each
    dimension rounded to the launcher's vectors where the step needs them."""
    edges = 6  # test_gemm_gpu.shapes starts with its 6 edge cases
    picked = gemm_gpu.shapes(zlib.crc32(f"{step} {variant_id(variant)}".encode()), edges + SHAPES_PER_EPILOGUE - 1,
                             vector, variant.combo)
    return [picked[CASES.index((step, variant)) % edges], *picked[edges:]]


def run_case(module, m, n, k, v, rng):
    """One call on fresh, NaN-poisoned outputs with random scalars of the variant's kind; what is wrong with D or
    aux, or None."""
    epi, d_dtype = v.epilogue, v.combo[1]
    a, b, d = gemm_gpu.operands(m, n, k, v.combo)
    alpha = rng.choice([0.5, -1.25, 2.0, 0.75]) if v.scaled else 1.0
    beta = rng.choice([0.5, -1.5, 1.0]) if v.reads_c else 0.0
    c = (torch.randn(m, n, device="cuda").to(d_dtype) if v.reads_c else
         torch.full((m, n), float("nan"), device="cuda", dtype=d_dtype))  # beta = 0 must never read C
    bias = None if epi.bias == "none" else torch.randn(n if epi.bias == "n" else m, device="cuda").to(
        d_dtype if v.bias_dtype == "d" else v.bias_dtype)
    aux = torch.full((m, n), float("nan"), device="cuda", dtype=d_dtype) if epi.aux else None
    module.gemm(a, b, d, epilogue=epi, alpha=alpha, beta=beta, c=c, bias=bias, aux=aux)
    torch.cuda.synchronize()
    d_ref, x_ref = reference(a.double() @ b.double(), epi, alpha=alpha, beta=beta, c=c, bias=bias)
    problems = [f"d: {p}" for p in [within_epilogue_bounds(d, d_ref, x_ref, epi.activation)] if p]
    if epi.aux:
        problems += [f"aux: {p}" for p in [within_epilogue_bounds(aux, x_ref, x_ref)] if p]
    return f"alpha={alpha} beta={beta}: " + "; ".join(problems) if problems else None


def fused_problems(gemm, a, b, d, buffer, epi, bias_dtype=None):
    """``gemm(a, b, d, epilogue=epi, alpha=0.5, beta=-1.5, c=C, bias=..., aux=...)`` with random C and bias (of
    `bias_dtype`, by default D's) and a NaN-poisoned aux; what is wrong with D or aux against float64 torch, or a
    write outside D in its padded `buffer` (NaN)."""
    m, n = d.shape
    c = torch.randn(m, n, device="cuda").to(d.dtype)
    bias = torch.randn(n if epi.bias == "n" else m, device="cuda").to(bias_dtype or d.dtype)
    aux = torch.full((m, n), float("nan"), device="cuda", dtype=d.dtype)
    gemm(a, b, d, epilogue=epi, alpha=0.5, beta=-1.5, c=c, bias=bias, aux=aux)
    torch.cuda.synchronize()
    d_ref, x_ref = reference(a.double() @ b.double(), epi, 0.5, -1.5, c, bias)
    problems = [f"d: {p}" for p in [within_epilogue_bounds(d, d_ref, x_ref, epi.activation)] if p]
    problems += [f"aux: {p}" for p in [within_epilogue_bounds(aux, x_ref, x_ref)] if p]
    if int((~buffer.isnan()).sum()) != d.numel():
        problems.append("a write outside D")
    return problems


@pytest.mark.parametrize("step, variant", CASES, ids=[f"{s}-{variant_id(v)}" for s, v in CASES])
def test_the_epilogue_matches_float64_torch_on_random_shapes(step, variant):
    module = gemm_gpu.runnable(step)
    rng = random.Random(zlib.crc32(f"{step} {variant_id(variant)} scalars".encode()))
    cases = epilogue_shapes(step, variant, module.gemm.vector)
    wrong = [f"{shape}: {problem}" for shape in cases
             if (problem := run_case(module, *shape, variant, rng))]
    assert not wrong, f"{step} {variant_id(variant)}: {len(wrong)} of {len(cases)} shapes wrong:\n" + "\n".join(wrong)


#: step -> (fp8 dtype, D dtype) pairs: both fp8 formats, every D dtype, bf16 D on both steps.
FP8_CASES = {"gemm10_multicast": [(torch.float8_e4m3fn, torch.bfloat16), (torch.float8_e4m3fn, torch.float16),
                                  (torch.float8_e5m2, torch.bfloat16), (torch.float8_e5m2, torch.float32)],
             "gemm11_pingpong": [(torch.float8_e4m3fn, torch.bfloat16), (torch.float8_e4m3fn, torch.float32),
                                 (torch.float8_e5m2, torch.bfloat16), (torch.float8_e5m2, torch.float16)]}


def quantized(m, n, k, dtype):
    """fp8 A (M, K) and B (K, N), both K-major, their per-tensor scales, and float64 A·B of the dequantized values."""
    a8, sa = fp8.quantize(torch.randn(m, k, device="cuda"), dtype)
    b8t, sb = fp8.quantize(torch.randn(n, k, device="cuda"), dtype)
    return a8, b8t.t(), sa, sb, fp8.dequantize(a8, sa) @ fp8.dequantize(b8t, sb).t()


@pytest.mark.parametrize("step, dtypes", [(s, p) for s, pairs in FP8_CASES.items() for p in pairs],
                         ids=lambda x: x if isinstance(x, str) else f"{str(x[0])[6:]}-{str(x[1])[6:]}")
def test_fp8_matches_float64_of_the_dequantized_inputs_on_random_shapes(step, dtypes):
    module = gemm_gpu.runnable(step)
    dtype, d_dtype = dtypes
    picked = gemm_gpu.shapes(zlib.crc32(f"{step} {dtypes}".encode()), 12, True, (torch.bfloat16, d_dtype, "k", "k"))
    cases = [(m, n, -(-k // 16) * 16) for m, n, k in picked]  # fp8 K-major: K whole 16-byte vectors
    wrong = []
    for m, n, k in cases:
        a8, b8, sa, sb, ref = quantized(m, n, k, dtype)
        d = torch.full((m, n), float("nan"), device="cuda", dtype=d_dtype)
        module.gemm(a8, b8, d, module.FP8_CONFIG, alpha=sa * sb)
        torch.cuda.synchronize()
        problem = within_epilogue_bounds(d, ref, ref, precision=tolerances.FP8_PRECISION)
        if problem:
            wrong.append(f"{(m, n, k)}: {problem}")
    assert not wrong, f"{step} {dtype} -> {d_dtype}: {len(wrong)} of {len(cases)} shapes wrong:\n" + "\n".join(wrong)


def test_fp8_agrees_with_torch_scaled_mm():
    gemm11_pingpong = gemm_gpu.runnable("gemm11_pingpong")
    m = 1008  # torch._scaled_mm wants multiples of 16; none is of a 128-tile
    n = 2032
    k = 1536
    a8, b8, sa, sb, ref = quantized(m, n, k, torch.float8_e4m3fn)
    d = torch.full((m, n), float("nan"), device="cuda", dtype=torch.bfloat16)
    gemm11_pingpong.gemm(a8, b8, d, gemm11_pingpong.FP8_CONFIG, alpha=sa * sb)
    theirs = torch._scaled_mm(a8, b8, scale_a=torch.tensor(sa, device="cuda"), scale_b=torch.tensor(sb, device="cuda"),
                              out_dtype=torch.bfloat16)
    torch.cuda.synchronize()
    # the judge holds for them
    assert within_epilogue_bounds(theirs, ref, ref, precision=tolerances.FP8_PRECISION) is None
    assert within_epilogue_bounds(d, ref, ref, precision=tolerances.FP8_PRECISION) is None
    assert float((d.double() - theirs.double()).norm() / ref.norm()) < tolerances.BOUNDS[tolerances.FP8_PRECISION][0]


def bad_arguments(m, n):
    """(what is wrong, gemm keyword arguments, the regex the ValueError must match): each names the argument and
    the value it got."""
    bias = torch.randn(n, device="cuda")  # float32: right for any D
    relu_n = Epilogue("relu", bias="n")
    return [
        ("bias on the CPU", dict(epilogue=relu_n, bias=bias.cpu()), r"bias is on cpu"),
        ("bias of the wrong length", dict(epilogue=relu_n, bias=torch.randn(77, device="cuda")), r"(?s)bias.*77"),
        ("an M bias of N's length", dict(epilogue=Epilogue("relu", bias="m"), bias=bias), rf"(?s)bias.*\({n},\)"),
        ("bias in float64", dict(epilogue=relu_n, bias=bias.double()), r"(?s)bias.*float64"),
        ("bias in float16 for a bfloat16 D", dict(epilogue=relu_n, bias=bias.half()), r"(?s)bias.*float16"),
        ("beta != 0 without c", dict(epilogue=Epilogue(), beta=0.5), r"(?s)(?=.*\bc\b)(?=.*beta)(?=.*0\.5)"),
        ("Epilogue(aux=True) without aux", dict(epilogue=Epilogue(aux=True)), r"aux"),
    ]


@pytest.mark.parametrize("step", ["gemm05_swizzle", "gemm11_pingpong"])
def test_the_launcher_refuses_bad_epilogue_arguments_by_name(step):
    module = gemm_gpu.runnable(step)
    m = 128
    n = 64
    k = 64
    combo = (torch.bfloat16, torch.bfloat16, "k", "n")
    a, b, d = gemm_gpu.operands(m, n, k, combo)
    for what, kwargs, match in bad_arguments(m, n):
        with pytest.raises(ValueError, match=match):
            module.gemm(a, b, d, **kwargs)
            pytest.fail(f"{step} took {what}")
    # Nothing of the refusals stays behind: the right call is computed right.
    variant = Variant(Epilogue("relu", bias="n"), combo, "d", reads_c=True, scaled=True)
    assert run_case(module, m, n, k, variant, random.Random(0)) is None
