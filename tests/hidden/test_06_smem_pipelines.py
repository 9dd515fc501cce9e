"""Hidden tests of lesson 6: the swizzle for every row length and element width on tiles of 8 and 16 rows; the ring
schedule for random k-tile and stage counts (more k-tiles than twice the stages, odd stage counts, one stage, fewer
k-tiles than stages); the deepest pipeline for random tiles, widths, epilogues and CTA counts on every arch; and the two
kernels: their PTX for both 16-bit dtypes (and both archs for the cp.async one), then on a GPU real GEMMs on random
ragged shapes (M any, N and K multiples of 8 but not of the tile, K below one tile, K over 2·STAGES tiles), fp16 and
bf16, poisoned C, against float64. A GPU test checks the kernel's PTX first, so that a kernel the exercise did not ask
for (the package's own step) earns nothing. The TMA + wgmma GEMM (a producer warp and two consumer warpgroups sharing
every slot, the mbarrier hand-off by hand, a 288-thread CTA) also runs rings that wrap many times (up to 128 k-tiles on
one CTA), M inside the first warpgroup's rows and past it; a kernel that deadlocks is stopped at the call's timeout and
scores 0 there. The RS-form consumer mainloop (6.6: A reloaded into one set of registers every k-tile, one batch in
flight) also runs long K on one CTA and on many (128 and 520 k-tiles); the TMA-store epilogue (6.7) runs tiles whose
slabs TMA clips (M inside the first slab, ragged N).

References: cutecourse.hw.banks (wavefronts), a model of mbarrier phases, cutecourse.hw.occupancy, and float64 products
of the inputs as the learner's process held them, within the course launcher's bounds.
"""

import random

import pytest

from cutecourse.grading import sandbox
from cutecourse.grading.checks import l06_cp_async as L4
from cutecourse.grading.checks import l06_tma_pipeline as TMA
from cutecourse.grading.checks import l06_tma_store as STORE
from cutecourse.grading.checks import l06_wgmma_rs as RS
from cutecourse.grading.checks import l06_smem_pipelines as L


@pytest.mark.exercise("6.1", points=2)
def test_choose_swizzle_for_every_row_length_and_element_width(learner):
    for row_bytes in L.ROW_BYTES:
        for bits in L.ELEMENT_BITS:
            row_elements = row_bytes * 8 // bits
            got, _ = learner.call("choose_swizzle", row_elements, bits)
            hint = L.swizzle_hint(row_elements, bits, got)
            assert hint is None, f"choose_swizzle({row_elements}, {bits}) gave {got!r}: {hint}"


@pytest.mark.exercise("6.2", points=2)
def test_ring_schedule_for_random_rings(learner):
    rng = random.Random(602)
    cases = [([9], 4), ([23], 5), ([3, 0, 8, 1], 2), ([0, 0], 3), ([1] * 7, 2), ([2, 2], 8), ([5, 0, 11], 7),
             ([0, 4, 4, 4], 4)] + [L.random_ring_case(rng) for _ in range(16)]
    for tile_k_tiles, stages in cases:
        got, _ = learner.call("ring_schedule", tile_k_tiles, stages)
        hint = L.ring_hint(tile_k_tiles, stages, got)
        assert hint is None, f"ring_schedule({tile_k_tiles}, {stages}): {hint}"


@pytest.mark.exercise("6.3", points=2)
def test_max_stages_for_random_tiles_on_every_arch(learner):
    rng = random.Random(603)
    cases = [(128, 256, 64, 16, arch, 0, 1) for arch in L.ARCHS] + [(256, 256, 128, 16, "sm_86", 0, 1)]
    cases += [L.random_stages_case(rng) for _ in range(24)]
    for case in cases:
        got, _ = learner.call("max_stages", *case)
        hint = L.stages_hint(case, got)
        assert hint is None, f"max_stages{case!r} gave {got!r}: {hint}"


def assert_ptx(learner, host: str, checks, dtype: str, arch: str) -> None:
    """`host`'s PTX for `dtype` on `arch`, judged by the hint of its exercise's checks module."""
    code, _ = learner.call(host, *checks.ptx_case(dtype, arch), via="ptx", options={"vector": checks.VECTOR},
                           timeout=300)
    problem = checks.ptx_hint(code)
    assert problem is None, f"{host} for {dtype} on {arch}: {problem}"


@pytest.mark.exercise("6.4", points=1)
def test_multistage_mainloop_ptx_for_both_dtypes_and_archs(learner):
    for dtype, arch in L4.PTX_CASES:
        assert_ptx(learner, "multistage_host", L4, dtype, arch)


@pytest.mark.exercise("6.4", points=3)
@pytest.mark.gpu(80)
def test_multistage_gemm_on_random_ragged_shapes(learner):
    for dtype in ("float16", "bfloat16"):
        assert_ptx(learner, "multistage_host", L4, dtype, "sm_80")  # the pipeline asked for, not the package's
    for dtype in ("float16", "bfloat16"):
        for case in L4.cases(6040 + len(dtype), L4.SHAPES, dtype):
            _, (out,) = learner.call("multistage_host", *case, via="launch", options={"vector": L4.VECTOR},
                                     timeout=300)
            problem = L4.gemm_result_hint(case, out)
            assert problem is None, f"multistage_host {dtype} C {tuple(out.shape)}: {problem}"


_rng65 = random.Random(6505)
# (M, N, K): single elements of a tile; ragged M, N and K below one tile; K = 320 and 520, the first rings that wrap
# (5 and 9 k-tiles: a refill waits on empty); M inside the first warpgroup's rows and just past them; long K (33 and
# 128 k-tiles, the ring wraps 8 and 32 times, both parities many times); several CTAs in both directions; then random
# ones.
TMA_SHAPES = [(1, 8, 8), (65, 72, 40), (127, 8, 520), (256, 128, 256), (129, 128, 320), (200, 136, 2056),
              (300, 128, 8192), (3, 264, 16), (513, 392, 264)]
TMA_SHAPES += [(_rng65.randint(1, 400), 8 * _rng65.randint(1, 50), 8 * _rng65.randint(1, 160)) for _ in range(4)]
#: Seconds a launch may take, its compile included (about 2 s on an H200), before it counts as a deadlock.
TMA_TIMEOUT_S = 30
DEADLOCK_HINT = ("the kernel never finished: a deadlock, some mbarrier wait whose phase never completes. Which phase "
                 "parity does each wait expect on its first pass over the ring, and does each barrier receive as many "
                 "arrivals as its count asks for?")


@pytest.mark.exercise("6.5", points=1)
def test_tma_pipeline_ptx_for_both_dtypes(learner):
    for dtype, arch in TMA.PTX_CASES:
        assert_ptx(learner, "tma_host", TMA, dtype, arch)


@pytest.mark.exercise("6.5", points=3)
@pytest.mark.gpu(90)
def test_tma_pipeline_gemm_on_random_ragged_shapes(learner):
    for dtype, arch in TMA.PTX_CASES:
        assert_ptx(learner, "tma_host", TMA, dtype, arch)  # a producer warp, two warpgroups and the hand-off
    launch_gemms(learner, "tma_host", TMA, TMA_SHAPES, 6550)


def launch_gemms(learner, host: str, checks, shapes, seed: int) -> None:
    """`host` on every shape in fp16 and bf16, each C judged against float64; a launch past the timeout fails as a
    deadlock."""
    for dtype in ("float16", "bfloat16"):
        for shape, case in zip(shapes, checks.cases(seed + len(dtype), shapes, dtype)):
            try:
                _, (out,) = learner.call(host, *case, via="launch", options={"vector": checks.VECTOR},
                                         timeout=TMA_TIMEOUT_S)
            except sandbox.LearnerError as exc:
                if "timed out" in str(exc):
                    pytest.fail(f"{host} {dtype} (M, N, K) = {shape}: {DEADLOCK_HINT} ({exc})")
                raise
            problem = checks.gemm_result_hint(case, out)
            assert problem is None, f"{host} {dtype} (M, N, K) = {shape}: {problem}"


_rng66 = random.Random(6606)
# (M, N, K): one element; K of one and two k-tiles (the first release, the last batch); ragged tiles; rings that wrap;
# long K on one CTA and on a grid of them (128 and 520 k-tiles); then random ones.
RS_SHAPES = [(1, 8, 8), (33, 16, 64), (65, 72, 104), (127, 8, 520), (128, 128, 8192), (250, 392, 33280),
             (3, 264, 16), (513, 136, 264)]
RS_SHAPES += [(_rng66.randint(1, 400), 8 * _rng66.randint(1, 50), 8 * _rng66.randint(1, 400)) for _ in range(4)]


@pytest.mark.exercise("6.6", points=1)
def test_wgmma_rs_ptx_for_both_dtypes(learner):
    for dtype, arch in RS.PTX_CASES:
        assert_ptx(learner, "rs_host", RS, dtype, arch)


@pytest.mark.exercise("6.6", points=3)
@pytest.mark.gpu(90)
def test_wgmma_rs_gemm_on_random_ragged_and_long_shapes(learner):
    for dtype, arch in RS.PTX_CASES:
        assert_ptx(learner, "rs_host", RS, dtype, arch)  # RS wgmma, waits, release, fence in their order
    launch_gemms(learner, "rs_host", RS, RS_SHAPES, 6660)


_rng67 = random.Random(6707)
# (M, N, K): one element; M inside the first slab (the second is all outside C, clipped); ragged M and N; a tile
# whose second slab is partial; several tiles each way; then random ones.
STORE_SHAPES = [(1, 8, 8), (64, 128, 64), (40, 72, 200), (100, 136, 24), (129, 8, 72), (385, 392, 264)]
STORE_SHAPES += [(_rng67.randint(1, 400), 8 * _rng67.randint(1, 50), 8 * _rng67.randint(1, 80)) for _ in range(4)]


@pytest.mark.exercise("6.7", points=1)
def test_tma_store_epilogue_ptx_for_both_dtypes(learner):
    for dtype, arch in STORE.PTX_CASES:
        assert_ptx(learner, "store_host", STORE, dtype, arch)


@pytest.mark.exercise("6.7", points=3)
@pytest.mark.gpu(90)
def test_tma_store_epilogue_gemm_on_random_ragged_shapes(learner):
    for dtype, arch in STORE.PTX_CASES:
        assert_ptx(learner, "store_host", STORE, dtype, arch)  # slabs through one buffer, fenced, waited for
    launch_gemms(learner, "store_host", STORE, STORE_SHAPES, 6770)
