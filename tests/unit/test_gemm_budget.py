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
from cutecourse.kernels.gemm import budget, epilogue, gemm05_swizzle, gemm06_tma, gemm07_wgmma  # noqa: E402
from cutecourse.kernels.gemm import gemm08_warpspecialized, gemm09_persistent, gemm11_pingpong  # noqa: E402
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


#: (step, Config, C's dtype): each branch of each step's model, on the arch the step compiles for. Steps 5-8 stage C
#: in their ring (the larger of the two counts: the ring, or C's tile where fp32 C outgrows a ring of tile_k 32),
#: steps 6-8 with their mbarriers after it; step 9 keeps C's tile beside the ring, whose stages=0 fills the rest.
BUDGETS = [
    ("gemm05_swizzle", gemm05_swizzle.Config(tile_m=128, warps_m=2, stages=3), torch.float32),
    ("gemm05_swizzle", gemm05_swizzle.Config(tile_m=64, tile_n=256, warps_m=1, warps_n=4), torch.float32),
    ("gemm05_swizzle", gemm05_swizzle.Config(tile_k=32), torch.float32),
    ("gemm06_tma", gemm06_tma.Config(), torch.bfloat16),
    ("gemm06_tma", gemm06_tma.Config(tile_k=32), torch.float32),
    ("gemm07_wgmma", gemm07_wgmma.Config(), torch.float16),
    ("gemm07_wgmma", gemm07_wgmma.Config(tile_k=32), torch.float32),
    ("gemm08_warpspecialized", gemm08_warpspecialized.Config(), torch.bfloat16),
    ("gemm08_warpspecialized", gemm08_warpspecialized.Config(tile_k=32), torch.float32),
    ("gemm09_persistent", gemm09_persistent.Config(), torch.bfloat16),
    ("gemm09_persistent", gemm09_persistent.Config(), torch.float32),
    ("gemm09_persistent", gemm09_persistent.Config(tile_m=64, tile_n=128, stages=2), torch.float16),
]


def test_the_budgets_cover_both_branches_of_the_ring_or_c_steps():
    """The compile test below is not vacuous: for each of steps 5-8 one case's C tile outgrows its ring and one
    case's ring outgrows its C tile."""
    for step in ("gemm05_swizzle", "gemm06_tma", "gemm07_wgmma", "gemm08_warpspecialized"):
        larger = set()
        for name, config, c_dtype in BUDGETS:
            if name == step:
                c_bytes = config.tile_m * config.tile_n * torch.empty(0, dtype=c_dtype).element_size()
                larger.add(c_bytes > config.stages * (config.tile_m + config.tile_n) * config.tile_k * 2)
        assert larger == {True, False}, step


@pytest.mark.parametrize("step, config, c_dtype", BUDGETS,
                         ids=lambda x: str(x).removeprefix("torch.") if not hasattr(x, "tile_m") else None)
def test_the_model_is_what_the_compiled_kernel_allocates(step, config, c_dtype):
    """The kernel's dynamic shared memory is a constant of the compiled host code; the model's bytes are that
    constant (and one alignment more is not)."""
    module = __import__(f"cutecourse.kernels.gemm.{step}", fromlist=["host"])
    a = torch.empty(128, 64, dtype=torch.float16)
    b = torch.empty(64, 256, dtype=torch.float16)
    c = torch.empty(128, 256, dtype=c_dtype)
    ops = operands.traits(a, b, c, step=step, vector=True)
    need = budget.smem_bytes(step, config, ops.ab, ops.c)
    arch = "sm_90a" if module.gemm.min_cc >= 90 else "sm_80"
    compiled = launcher.compile_for(module.host, config, ops, a, b, c, make_fake_stream(),
                                    options=f"--gpu-arch {arch}")
    ir = str(compiled.ir_module)
    assert f"llvm.mlir.constant({need} : i64)" in ir
    assert f"llvm.mlir.constant({need + 1024} : i64)" not in ir
