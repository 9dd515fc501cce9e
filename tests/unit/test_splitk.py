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


def stream_units_of(cta, ctas, tiles, k_tiles):
    """CTA `cta`'s stream-K work units, as the kernel's persistent loop walks them."""
    return [splitk.stream_share(work, ctas, tiles, k_tiles)
            for work in range(cta, splitk.stream_units(cta, ctas, tiles, k_tiles), ctas)]


@pytest.mark.parametrize("tiles, k_tiles, fit", [(1, 1, 66), (1, 7, 66), (3, 5, 4), (2, 16, 66), (5, 64, 66),
                                                 (48, 64, 66), (130, 3, 132), (7, 1000, 57), (64, 256, 132)])
def test_stream_k_shares_cover_every_k_tile_once_in_equal_shares_with_each_tiles_pieces_in_k_order(tiles, k_tiles,
                                                                                                    fit):
    ctas = splitk.stream_ctas(tiles, k_tiles, fit)
    assert ctas == min(fit, tiles * k_tiles, tiles * (splitk.MAX_SPLITS - 1))
    covered = {}  # (tile, k-tile) -> (CTA, slice)
    for cta in range(ctas):
        units = stream_units_of(cta, ctas, tiles, k_tiles)
        assert all(count >= 1 for _, _, _, count in units), units
        assert sum(count for _, _, _, count in units) in (tiles * k_tiles // ctas, -(-tiles * k_tiles // ctas))
        for tile, piece, first, count in units:
            for kt in range(first, first + count):
                assert (tile, kt) not in covered
                covered[tile, kt] = (cta, piece)
    assert len(covered) == tiles * k_tiles
    for tile in range(tiles):
        first, pieces = splitk.stream_pieces(tile, ctas, tiles, k_tiles)
        order = [covered[tile, kt] for kt in range(k_tiles)]
        assert order == sorted(order) and {p for _, p in order} == set(range(pieces)), order
        assert order[0][0] == first
    assert splitk.stream_slices(tiles, k_tiles, ctas) <= splitk.MAX_SPLITS
    # past a CTA's last unit there is nothing: the consumer's skip over the other warpgroup's unit is 0
    assert splitk.stream_share(splitk.stream_units(0, ctas, tiles, k_tiles), ctas, tiles, k_tiles)[3] == 0


@pytest.mark.parametrize("m, n, config", [(200, 136, Config()), (2048, 384, Config()), (5000, 700, Config(group_m=3)),
                                          (1000, 1000, Config(tile_m=64, tile_n=64, cluster_m=1, cluster_n=2))])
def test_the_reductions_work_unit_of_an_element_inverts_the_gemms_raster(m, n, config):
    """`splitk.work_at` against step 11's raster as its docstring states it (`gemm11_pingpong._tile_coord`): work
    unit w fills a group of group_m cluster rows column by column, the last group shorter; every element of the
    cluster tile it computes maps back to w."""
    rows_of = config.tile_m * config.cluster_m
    cols_of = config.tile_n * config.cluster_n
    clusters = (-(-m // rows_of), -(-n // cols_of))
    per_group = config.group_m * clusters[1]
    for work in range(clusters[0] * clusters[1]):
        first_row = work // per_group * config.group_m
        rows = min(clusters[0] - first_row, config.group_m)
        row, col = first_row + work % per_group % rows, work % per_group // rows
        corners = [(row * rows_of + dr, col * cols_of + dc) for dr in (0, rows_of - 1) for dc in (0, cols_of - 1)]
        assert {splitk.work_at(c, config, clusters) for c in corners} == {work}, (work, row, col)


def test_a_tile_is_cut_into_at_most_max_splits_pieces():
    """The grid's cap of MAX_SPLITS - 1 clusters a tile bounds the workspace's slices, on every small problem."""
    worst = max(splitk.stream_slices(tiles, k_tiles, splitk.stream_ctas(tiles, k_tiles, fit))
                for tiles in range(1, 9) for k_tiles in range(1, 130) for fit in (57, 66, 132))
    assert splitk.MAX_SPLITS - 1 <= worst <= splitk.MAX_SPLITS  # one tile of 31 or more k-tiles: 31 pieces


def test_the_stream_k_config_and_launcher_refuse_what_they_cannot_run():
    with pytest.raises(ValueError, match=r"^stream_k=1: True \(equal shares of all k-tiles, `splitk`\) or False"):
        Config(stream_k=1)
    a, b, d = operands_of(64, 64, 136, torch.float16, torch.float32)
    with pytest.raises(ValueError, match=r"^Config\(stream_k=True, splits=2\): stream-K sets the splits itself, "
                                         r"from the problem's shape; pass splits=1"):
        gemm11_pingpong.gemm(a, b, d, Config(stream_k=True, splits=2))
    with pytest.raises(ValueError, match=r"a is on cpu"):  # a stream-K Config passes on to the usual checks
        gemm11_pingpong.gemm(a, b, d, Config(stream_k=True))
    a, b = torch.empty(2**15, 2**16, device="meta"), torch.empty(2**16, 2**15, device="meta")
    with pytest.raises(ValueError, match=r"^stream_k=True: 32768 tiles of 1024 k-tiles on 66 clusters overflow the "
                                         r"kernels' 32-bit share arithmetic; pass stream_k=False"):
        gemm11_pingpong.gemm(a, b, torch.empty(2**15, 2**15, device="meta"), Config(stream_k=True))


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
    """The split GEMM (3 splits), the default Config and stream-K (3 slices, as the launcher sets them), compiled for
    a ragged bf16 problem: (compiled, PTX) each."""
    a, b, _ = operands_of(200, 136, 1000)
    kept = {}
    for name, config, c_dtype in (("split", Config(splits=3), torch.float32), ("default", Config(), torch.bfloat16),
                                  ("stream", Config(stream_k=True, splits=3), torch.float32)):
        kept[name] = ptx.compiled_with_ptx(lambda options, config=config, c_dtype=c_dtype: compile_gemm(
            config, a, b, c_dtype, options), ARCH)
    return kept


STORE_3D = "cp.async.bulk.tensor.3d.global.shared::cta"
STORE_2D = "cp.async.bulk.tensor.2d.global.shared::cta"


def test_the_split_gemm_stores_its_partial_tiles_into_the_workspace_by_a_3d_tma_store(split_gemm):
    split, default = split_gemm["split"][1], split_gemm["default"][1]
    stream = split_gemm["stream"][1]
    for partial in (split, stream):  # (M, N, slice) slices of the workspace
        assert ptx.count(partial, STORE_3D) > 0 and ptx.count(partial, STORE_2D) == 0
    assert ptx.count(default, STORE_2D) > 0 and ptx.count(default, STORE_3D) == 0
    for code in (split, default, stream):  # the rest of the step: wgmma fed by multicast TMA, the pingpong turns
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


def reduction_ptx(d_dtype, fused, splits, options="", stream_k=None):
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
        ops, splits, fused, d, make_fake_stream(), options=f"{opts} {options}", stream_k=stream_k, **tensors), ARCH)


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
        for stream_k in (None, Config(stream_k=True, splits=splits)):  # stream-K adds a zero for a missing piece
            code = reduction_ptx(torch.float32, epilogue.PLAIN, splits, stream_k=stream_k)[1]
            assert ptx.census(code)["add.f32"] == (splits - 1) * 16  # 16 values a thread
            assert ptx.count(code, "ld.global.v4") == splits * 4
            assert not any(op.startswith(("atom", "red.")) for op in ptx.census(code))
    for name in ("split", "stream"):
        assert not any(op.startswith(("atom", "red.")) for op in ptx.census(split_gemm[name][1]))


def test_the_reduction_launches_while_the_split_gemm_runs_and_waits_before_it_reads_a_partial(split_gemm):
    """Programmatic dependent launch: the split GEMM signals its dependents (the reduction) at its start, the unsplit
    step does not; the reduction waits for the GEMM's end before its first global load. (That the launch is early
    and the wait needed is the GPU test's broken reduction, which leaves the wait out and reads stale partials.)"""
    split, default = split_gemm["split"][1], split_gemm["default"][1]
    assert ptx.count(split, "griddepcontrol.launch_dependents") == 1
    assert ptx.count(split_gemm["stream"][1], "griddepcontrol.launch_dependents") == 1
    assert "griddepcontrol" not in default
    for stream_k in (None, Config(stream_k=True, splits=3)):
        code = reduction_ptx(torch.bfloat16, epilogue.PLAIN, 3, stream_k=stream_k)[1]
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
    assert "host(pW: DataPointer, pD: DataPointer, m: int32, n: int32, k: int32, ldd: int32, stream: Stream" in \
        signatures[1]
    again = gemm.plan(a, b, d, Config(splits=3), epilogue.Epilogue("silu"))  # another epilogue: the same split GEMM
    assert len(gemm.partials) == 1 and again.fn.args[0].reduce is not kernels.reduce


def test_the_stream_k_plan_sets_the_slices_from_the_shape(monkeypatch):
    """200 × 136 in 128 × 128 tiles, 2 × 1 clusters: 2 cluster tiles of 16 k-tiles, 32 iterations on the 32 clusters
    they can use (of the 66 a 132-SM GPU holds), one each: 16 pieces a tile."""
    monkeypatch.setattr(operands, "check", lambda a, b, c, **kw: operands.traits(a, b, c, step="x", vector=True))
    monkeypatch.setattr(operands, "capability", lambda device: 90)
    monkeypatch.setattr(launch, "current_stream", lambda *args: make_fake_stream())
    gemm = splitk.Launcher(gemm11_pingpong.host, Config, vector=True, min_cc=90, epilogue=True, fp8=True)
    a, b, d = operands_of(200, 136, 1000)
    plan = gemm.plan(a, b, d, Config(stream_k=True, sms=132))
    assert plan.fn.args[0].splits == splitk.stream_slices(2, 16, 32) == 16
    assert [config for _, config in gemm.partials] == [Config(stream_k=True, sms=132, splits=16)]


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
