"""Step 11's split-K on a CPU (`cutecourse.kernels.gemm.splitk`): how K is shared out, the Config's and the launcher's
refusals, and, compiled for sm_90a without a GPU, the split GEMM's PTX (a 3-D TMA store into the workspace, which the
default Config does not have), the reduction's for every D dtype and epilogue kind (16-byte loads of the partial
sums, one per split and row of a thread), the shared memory the budget counts, and the plan the launcher makes (both
kernels' TVM FFI functions behind the base launcher's call). tests/gpu/test_splitk_gpu.py runs them."""

import inspect
import sys
from pathlib import Path

import pytest

pytest.importorskip("cutlass")
torch = pytest.importorskip("torch")

from cutlass.cute.runtime import make_fake_stream  # noqa: E402

from cutecourse.kernels import launch, ptx  # noqa: E402
from cutecourse.kernels.gemm import budget, epilogue, gemm11_pingpong, launcher, operands, splitk  # noqa: E402

ARCH = "sm_90a"
Config = gemm11_pingpong.Config


def operands_of(m, n, k, ab=torch.bfloat16, d=torch.bfloat16, a_major="k", b_major="n"):
    a = torch.empty(m, k, dtype=ab) if a_major == "k" else torch.empty(k, m, dtype=ab).t()
    b = torch.empty(k, n, dtype=ab) if b_major == "n" else torch.empty(n, k, dtype=ab).t()
    return a, b, torch.empty(m, n, dtype=d)


def test_k_share_gives_each_split_a_contiguous_share_differing_by_at_most_one():
    for k_tiles in (1, 2, 7, 16, 64, 65):
        for splits in range(1, min(k_tiles, 8) + 1):
            tiles = 5
            shares = [splitk.k_share(split * tiles + 3, tiles, k_tiles, splits) for split in range(splits)]
            assert [tile for tile, _, _, _ in shares] == [3] * splits
            assert [split for _, split, _, _ in shares] == list(range(splits))
            ends = [first + count for _, _, first, count in shares]
            assert [first for _, _, first, _ in shares] == [0, *ends[:-1]] and ends[-1] == k_tiles
            counts = {count for _, _, _, count in shares}
            assert min(counts) >= 1 and max(counts) - min(counts) <= 1, (k_tiles, splits, shares)
    assert splitk.k_share(17, 40, 64, 1) == (17, 0, 0, 64)  # no split: the unit is the tile, all of K


@pytest.mark.parametrize("splits", [0, -1, 1.5, True, "2", splitk.MAX_SPLITS + 1])
def test_the_config_refuses_splits_that_are_no_count_of_k_shares(splits):
    with pytest.raises(ValueError, match=rf"^splits={splits!r}: give the number of K shares, an int from 1"):
        Config(splits=splits)


def test_more_splits_than_k_tiles_are_refused_naming_the_count():
    a, b, d = operands_of(64, 64, 136, torch.float16, torch.float32)
    with pytest.raises(ValueError, match=r"^splits=4: K=136 is 3 k-tiles of 64, and every split needs one: pass "
                                         r"splits at most 3, or splits=1"):
        gemm11_pingpong.gemm(a, b, d, Config(splits=4))
    with pytest.raises(ValueError, match=r"a is on cpu"):  # 3 splits of 3 k-tiles pass it, on to the usual checks
        gemm11_pingpong.gemm(a, b, d, Config(splits=3))
    wide = torch.empty(2**16, 2**14, device="meta")  # 2**30 outputs: 2 splits are 2**31 partial sums
    a, b = torch.empty(2**16, 256, device="meta"), torch.empty(256, 2**14, device="meta")
    with pytest.raises(ValueError, match=r"^splits=2: the workspace would hold 2 × 1073741824 = 2147483648 partial "
                                         r"sums, 2\*\*31 or more .* pass splits at most 1, or splits=1"):
        gemm11_pingpong.gemm(a, b, wide, Config(splits=2))


def compile_gemm(config, a, b, c_dtype, options=""):
    """Step 11's host for `config`, compiled on CPU tensors with C of `c_dtype` (float32: the workspace)."""
    c = torch.empty(a.shape[0], b.shape[1], dtype=c_dtype)
    ops = operands.traits(a, b, c, step="gemm11_pingpong", vector=True)
    return launcher.compile_for(gemm11_pingpong.host, config, ops, a, b, c, make_fake_stream(),
                                options=f"--gpu-arch {ARCH} {options}")


@pytest.fixture(scope="module")
def split_gemm():
    """The split GEMM (3 splits) and the default Config, compiled for a ragged bf16 problem: (compiled, PTX) each."""
    a, b, _ = operands_of(200, 136, 1000)
    kept = {}
    for name, config, c_dtype in (("split", Config(splits=3), torch.float32), ("default", Config(), torch.bfloat16)):
        kept[name] = ptx.compiled_with_ptx(lambda options, config=config, c_dtype=c_dtype: compile_gemm(
            config, a, b, c_dtype, options), ARCH)
    return kept


STORE_3D = "cp.async.bulk.tensor.3d.global.shared::cta"
STORE_2D = "cp.async.bulk.tensor.2d.global.shared::cta"


def test_the_split_gemm_stores_its_partial_tiles_into_the_workspace_by_a_3d_tma_store(split_gemm):
    split, default = split_gemm["split"][1], split_gemm["default"][1]
    assert ptx.count(split, STORE_3D) > 0 and ptx.count(split, STORE_2D) == 0  # (M, N, split) slices of the workspace
    assert ptx.count(default, STORE_2D) > 0 and ptx.count(default, STORE_3D) == 0
    for code in (split, default):  # the rest of the step: wgmma fed by multicast TMA, the pingpong turns
        assert ptx.count(code, "wgmma.mma_async") > 0 and "multicast::cluster" in code and ptx.count(code, "bar.arrive")


def test_the_budget_counts_the_float32_partials_the_split_gemm_allocates(split_gemm):
    need = budget.smem_bytes("gemm11_pingpong", Config(splits=3), "bfloat16", "bfloat16")
    assert need == budget.smem_bytes("gemm11_pingpong", Config(), "bfloat16", "float32")
    ir = str(split_gemm["split"][0].ir_module)
    assert f"llvm.mlir.constant({need} : i64)" in ir
    assert f"llvm.mlir.constant({need + 1024} : i64)" not in ir
    assert not budget.fits("gemm11_pingpong", Config(splits=2, stages=6), "bfloat16", "bfloat16", 90)
    assert budget.fits("gemm11_pingpong", Config(stages=6), "bfloat16", "bfloat16", 90)  # bf16 C: 6 stages fit


def test_a_split_config_with_16_bit_c_or_an_epilogue_is_refused_by_the_host():
    a, b, _ = operands_of(64, 64, 256)
    with pytest.raises(ValueError, match=r"Config\(splits=2\) stores float32 partial sums with no epilogue, not "
                                         r"bfloat16"):
        compile_gemm(Config(splits=2), a, b, torch.bfloat16)


#: (D dtype, Fused): every D dtype, every activation, each bias kind, aux, beta and alpha, in seven reductions.
REDUCTIONS = [
    (torch.bfloat16, epilogue.PLAIN),
    (torch.float16, epilogue.Fused(epilogue.Epilogue("relu", bias="m"), scaled=True, bias_dtype="float16")),
    (torch.float32, epilogue.Fused(epilogue.Epilogue("gelu_tanh", bias="n"), source=True, bias_dtype="float32")),
    (torch.bfloat16, epilogue.Fused(epilogue.Epilogue("gelu_tanh", bias="n", aux=True), source=True, scaled=True,
                                    bias_dtype="bfloat16")),
    (torch.float16, epilogue.Fused(epilogue.Epilogue("gelu_erf", aux=True))),
    (torch.bfloat16, epilogue.Fused(epilogue.Epilogue("silu", bias="m"), source=True, bias_dtype="float32")),
    (torch.float32, epilogue.Fused(epilogue.Epilogue("none"), scaled=True)),
]


def reduction_ptx(d_dtype, fused, splits, options=""):
    m, n = 200, 136
    d = torch.empty(m, n, dtype=d_dtype)
    ops = operands.traits(torch.empty(m, 64, dtype=torch.bfloat16), torch.empty(64, n, dtype=torch.bfloat16), d,
                          step="gemm11_pingpong", vector=True)
    bias = None
    if fused.bias_dtype:
        bias = torch.empty(m if fused.epilogue.bias == "m" else n, dtype=getattr(torch, fused.bias_dtype))
    tensors = {"source": torch.empty(m, n, dtype=d_dtype) if fused.source else None, "bias": bias,
               "aux": torch.empty(m, n, dtype=d_dtype) if fused.epilogue.aux else None}
    return ptx.compiled_with_ptx(lambda opts: splitk.compile_reduction(
        ops, splits, fused, d, make_fake_stream(), options=f"{opts} {options}", **tensors), ARCH)


@pytest.mark.parametrize("d_dtype, fused", REDUCTIONS, ids=lambda x: str(x).removeprefix("torch.")[:60])
def test_the_reduction_compiles_with_16_byte_loads_for_every_d_dtype_and_epilogue(d_dtype, fused):
    splits = 3
    code = reduction_ptx(d_dtype, fused, splits)[1]
    census = ptx.census(code)
    loads = sum(count for op, count in census.items() if op.startswith("ld.global.v4"))
    assert loads == splits * 4, census  # a thread's 4 rows of one 16-byte vector, from every slice
    stores = {op: count for op, count in census.items() if op.startswith("st.global")}
    vector_store = "st.global.v4" if d_dtype == torch.float32 else "st.global.v2"  # 4 values of D a row
    assert sum(count for op, count in stores.items() if op.startswith(vector_store)) == 4, stores
    assert ("tanh.approx" in code) == (fused.epilogue.activation == "gelu_tanh")
    reads_c = any(op.startswith("ld.global") and not op.startswith("ld.global.v4") for op in census)
    assert reads_c == bool(fused.source or fused.bias_dtype)  # C and the bias are read only when the epilogue uses them


def test_the_reduction_adds_each_further_slice_once_per_value_and_nothing_is_atomic(split_gemm):
    """S - 1 fp32 adds per value, in registers, and no atomic anywhere (a float atomic's sum depends on arrival
    order, so its result is not bitwise reproducible)."""
    for splits in (3, 5):
        code = reduction_ptx(torch.float32, epilogue.PLAIN, splits)[1]
        assert ptx.census(code)["add.f32"] == (splits - 1) * 16  # 16 values a thread
        assert not any(op.startswith(("atom", "red.")) for op in ptx.census(code))
    assert not any(op.startswith(("atom", "red.")) for op in ptx.census(split_gemm["split"][1]))


def test_the_reduction_launches_while_the_split_gemm_runs_and_waits_before_it_reads_a_partial(split_gemm):
    """Programmatic dependent launch: the split GEMM signals its dependents (the reduction) at its start, the unsplit
    step does not; the reduction waits for the GEMM's end before its first global load. (That the launch is early
    and the wait needed is the GPU test's broken reduction, which leaves the wait out and reads stale partials.)"""
    split, default = split_gemm["split"][1], split_gemm["default"][1]
    assert ptx.count(split, "griddepcontrol.launch_dependents") == 1
    assert "griddepcontrol" not in default
    code = reduction_ptx(torch.bfloat16, epilogue.PLAIN, 3)[1]
    assert ptx.count(code, "griddepcontrol.wait") == 1 and "launch_dependents" not in code
    assert code.index("griddepcontrol.wait") < code.index("ld.global")


def test_the_split_plan_calls_both_kernels_tvm_ffi_functions_with_the_base_calls_arguments(monkeypatch):
    """On CPU tensors (the GPU's checks stubbed): a split Config's plan compiles the GEMM into the workspace and the
    reduction, and its function is `run` on them, taking what the base launcher calls a fused step with."""
    monkeypatch.setattr(operands, "check", lambda a, b, c, **kw: operands.traits(a, b, c, step="x", vector=True))
    monkeypatch.setattr(operands, "capability", lambda device: 90)
    monkeypatch.setattr(launch, "current_stream", lambda *args: make_fake_stream())
    gemm = splitk.Launcher(gemm11_pingpong.host, Config, vector=True, min_cc=90, epilogue=True, fp8=True)
    a, b, d = operands_of(200, 136, 1000)
    plan = gemm.plan(a, b, d, Config(splits=3), epilogue.Epilogue("relu"))
    kernels = plan.fn.args[0]
    assert plan.fn.func == gemm.run and plan.fn.args[1] == d.device and kernels.splits == 3
    base = inspect.signature(launcher.Launcher.plan)
    assert list(inspect.signature(splitk.Launcher.plan).parameters) == list(base.parameters)
    called = list(inspect.signature(gemm.run).parameters)[2:]
    assert called == ["pa", "pb", "pd", "m", "n", "k", "lda", "ldb", "ldd", "stream", "src", "bias", "aux", "alpha",
                      "beta"]
    signatures = []
    for fn in (kernels.gemm, kernels.reduce):
        with pytest.raises(TypeError) as asked:
            fn()
        signatures.append(str(asked.value))
    assert "host(pA: DataPointer, pB: DataPointer, pC: DataPointer, m: int32" in signatures[0]
    assert "host(pW: DataPointer, pD: DataPointer, m: int32, n: int32, ldd: int32, stream: Stream" in signatures[1]
    again = gemm.plan(a, b, d, Config(splits=3), epilogue.Epilogue("silu"))  # another epilogue: the same split GEMM
    assert len(gemm.partials) == 1 and again.fn.args[0].reduce is not kernels.reduce


def test_the_launch_benchmarks_serial_copy_is_the_reduction_without_pdl():
    """benchmarks/splitk_launch.py times the package's split-K against a copy of splitk.py without the programmatic
    launch: the copy must still be made (its edits found) and differ from the package in those lines alone."""
    from . import benchmarks

    bench_module = benchmarks.load("splitk_launch")
    serial = bench_module.serial_launcher()
    copied = Path(sys.modules["serial.splitk"].__file__).read_text()
    assert "cute.arch.griddepcontrol_wait()" not in copied and "use_pdl=True)" not in copied
    original = Path(splitk.__file__).read_text()
    for old, new in bench_module.EDITS:
        original = original.replace(old, new)
    assert copied == original and serial.host is gemm11_pingpong.host
