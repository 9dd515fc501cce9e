"""Shared memory per CTA against every arch in `hw.ARCH_LIMITS`, on a CPU: the Config `cutecourse.gemm` picks for
each arch fits that arch's limit (sm_86, sm_89 and sm_120 allow 99 KiB, where step 5's default takes 144), a Config
given or launched that does not fit is refused naming the bytes, the limit and the way out, and the model's bytes
are what the compiled kernel allocates (compile-only)."""

import pytest

pytest.importorskip("cutlass")
torch = pytest.importorskip("torch")

from cutlass.cute.runtime import make_fake_stream  # noqa: E402

import cutecourse  # noqa: E402
from cutecourse import hw  # noqa: E402
from cutecourse.kernels.gemm import budget, epilogue, gemm05_swizzle, gemm11_pingpong  # noqa: E402
from cutecourse.kernels.gemm import launcher, operands  # noqa: E402

explain = cutecourse.gemm.explain


def problems(fp8):
    """(a, b, out, epilogue) of the shapes and dtypes that change the choice: a full wave, a small problem, fp32
    and 16-bit C, a fused epilogue, fp8 where the arch has it."""
    h, bf = torch.float16, torch.bfloat16
    yield torch.empty(4096, 4096, dtype=bf), torch.empty(4096, 4096, dtype=bf), torch.empty(4096, 4096, dtype=bf), None
    yield torch.empty(1000, 520, dtype=h), torch.empty(520, 1000, dtype=h), torch.empty(1000, 1000), None
    yield (torch.empty(256, 4096, dtype=bf), torch.empty(4096, 512, dtype=bf), torch.empty(256, 512),
           epilogue.Epilogue("gelu_tanh"))
    if fp8:
        e4 = torch.float8_e4m3fn
        yield (torch.empty(4096, 4096, dtype=e4), torch.empty(4096, 4096, dtype=e4).t(),
               torch.empty(4096, 4096, dtype=bf), None)


@pytest.mark.parametrize("arch", sorted(hw.ARCH_LIMITS, key=lambda name: int(name[3:])))
def test_every_arch_gets_configs_that_fit_its_shared_memory(arch):
    cc = int(arch[3:])
    a, b = torch.empty(64, 64, dtype=torch.float16), torch.empty(64, 64, dtype=torch.float16)
    if cc < 80:
        with pytest.raises(ValueError, match=rf"sm_{cc}; every GEMM step needs sm_80 or newer"):
            explain(a, b, arch=cc)
        return
    limit = hw.ARCH_LIMITS[arch].smem_per_block_max
    for a, b, out, epi in problems(cc == 90):
        choice = explain(a, b, out, epilogue=epi, arch=cc)
        ops = operands.traits(a, b, out, step=choice.step, vector=True, fp8=cc == 90)
        need = budget.smem_bytes(choice.step, choice.config, ops.ab, ops.c)
        assert need <= limit, f"{arch}: {choice}\nneeds {need} bytes, the arch allows {limit}"
        if choice.step == "gemm05_swizzle" and limit >= 144 * 1024:
            assert choice.config == gemm05_swizzle.Config()  # the fastest, wherever it fits


def test_the_unfitted_default_is_what_the_small_arches_would_have_got():
    """The check can fail: step 5's default on sm_86 is over the limit."""
    assert not budget.fits("gemm05_swizzle", gemm05_swizzle.Config(), "bfloat16", "bfloat16", 86)
    assert budget.fits("gemm05_swizzle", gemm05_swizzle.Config(), "bfloat16", "bfloat16", 80)


def test_a_config_that_does_not_fit_is_refused_naming_bytes_limit_and_fix():
    a, b = torch.empty(512, 512, dtype=torch.float16), torch.empty(512, 512, dtype=torch.float16)
    with pytest.raises(ValueError, match=r"gemm05_swizzle.Config\(tile_m=256.*\) needs 147456 bytes of shared memory "
                                         r"per CTA \(144 KiB\); sm_89 allows 101376 \(99 KiB\): lower stages"):
        explain(a, b, arch=89, config=gemm05_swizzle.Config())
    assert explain(a, b, arch=80, config=gemm05_swizzle.Config()).step == "gemm05_swizzle"


def test_a_launcher_refuses_a_config_its_gpu_cannot_launch(monkeypatch):
    monkeypatch.setattr(operands, "check", lambda a, b, c, **kw: operands.traits(a, b, c, step="x", vector=True))
    monkeypatch.setattr(operands, "capability", lambda device: 120)  # an RTX 5090
    a, b = torch.empty(256, 256, dtype=torch.float16), torch.empty(256, 256, dtype=torch.float16)
    with pytest.raises(ValueError, match=r"needs 147456 bytes .* sm_120 allows 101376"):
        gemm05_swizzle.gemm(a, b)
    monkeypatch.setattr(gemm11_pingpong.gemm, "for_device", None)  # no GPU to ask for its SM count
    with pytest.raises(ValueError, match=r"gemm11_pingpong.Config\(.*\) needs 2\d{5} bytes .* sm_120 allows"):
        gemm11_pingpong.gemm(a, b)


@pytest.mark.parametrize("cc, arch", [(86, "sm_86"), (87, "sm_86"), (103, "sm_100"), (121, "sm_120"), (75, "sm_75")])
def test_an_arch_not_listed_takes_the_nearest_older_of_its_major(cc, arch):
    assert budget.arch_limits(cc)[0] == arch


def test_an_arch_with_no_entry_of_its_major_is_refused_naming_the_table():
    with pytest.raises(ValueError, match=r"sm_110 has no entry in cutecourse.hw.ARCH_LIMITS .* add its limits"):
        budget.arch_limits(110)


@pytest.mark.parametrize("config, c_dtype", [(gemm05_swizzle.Config(tile_m=128, warps_m=2, stages=3), torch.float32),
                                             (gemm05_swizzle.Config(tile_m=64, tile_n=256, warps_m=1, warps_n=4),
                                              torch.float32)])
def test_the_model_is_what_the_compiled_kernel_allocates(config, c_dtype):
    """The kernel's dynamic shared memory is a constant of the compiled host code; the model's bytes are that
    constant (and one alignment more is not)."""
    a = torch.empty(128, 64, dtype=torch.float16)
    b = torch.empty(64, 256, dtype=torch.float16)
    c = torch.empty(128, 256, dtype=c_dtype)
    ops = operands.traits(a, b, c, step="gemm05_swizzle", vector=True)
    need = budget.smem_bytes("gemm05_swizzle", config, ops.ab, ops.c)
    compiled = launcher.compile_for(gemm05_swizzle.host, config, ops, a, b, c, make_fake_stream(),
                                    options="--gpu-arch sm_80")
    ir = str(compiled.ir_module)
    assert f"llvm.mlir.constant({need} : i64)" in ir
    assert f"llvm.mlir.constant({need + 1024} : i64)" not in ir
