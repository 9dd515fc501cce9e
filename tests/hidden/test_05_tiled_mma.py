"""Hidden tests of lesson 5: every lane of both mma.sync shapes, wgmma's register A for both input widths and one to
four warpgroups, the ldmatrix simulator on random rows of every count and .trans, TiledMMAs over random warp grids
(both sides two warps or more, where row- and column-major grids differ), and the two Tensor Core GEMM kernels: their
PTX for both 16-bit dtypes and both archs (with the k-block each MMA reads), then on a GPU real GEMMs on random ragged
shapes (extents not multiples of the tile, K below one tile, K tails), fp16 and bf16, poisoned C, against float64.
Each kernel exercise fixes its operands' majors (5.5: an M-major A and a K-major B; 5.6: a K-major A and an N-major
B), so between them both majors of both operands run.

References: cutecourse.fragments (derived from CuTe's TV layouts; checked against the DSL and the hardware) and
float64 products of the inputs as the learner's process held them, within the course launcher's bounds.
"""

import random

import pytest

from cutecourse import fragments as F
from cutecourse.grading.checks import l05_mainloop as M
from cutecourse.grading.checks import l05_tiled_mma as L

TILED_CASES = 8  # each call traces a @cute.jit function: a few hundred ms


@pytest.mark.exercise("5.1", points=2)
def test_mma_coords_for_every_lane_of_both_shapes(learner):
    for k in F.MMA_KS:
        for lane in range(32):
            got, _ = learner.call("mma_coords", k, lane)
            hint = L.coords_hint(k, lane, got)
            assert hint is None, f"mma_coords({k}, {lane}) gave {got!r}: {hint}"


@pytest.mark.exercise("5.2", points=2)
def test_wgmma_a_layout_for_both_widths_and_every_warpgroup_count(learner):
    for bits in L.WGMMA_A_BITS:
        for warpgroups in L.WGMMA_A_GROUPS:
            got, _ = learner.call("wgmma_a_layout", bits, warpgroups)
            hint = L.wgmma_a_hint(bits, warpgroups, got)
            assert hint is None, f"wgmma_a_layout({bits}, {warpgroups}): {hint}"


@pytest.mark.exercise("5.3", points=2)
def test_ldmatrix_sim_on_random_rows(learner):
    rng = random.Random(5030)
    for x in F.LDMATRIX_COUNTS:
        for transpose in (False, True):
            for _ in range(3):
                case = (L.random_rows(rng), x, transpose)
                got, _ = learner.call("ldmatrix_sim", *case)
                hint = L.ldmatrix_hint(case, got)
                assert hint is None, f"ldmatrix_sim(rows, {x}, {transpose}): {hint}"


@pytest.mark.exercise("5.4", points=2)
def test_tiled_mma_for_random_warp_grids(learner):
    rng = random.Random(504)
    cases = {(4, 4, 16), (1, 1, 8), (8, 2, 8)} | {L.random_tiled_case(rng) for _ in range(TILED_CASES)}
    for case in sorted(cases):
        got, _ = learner.call("tiled_mma_for", *case)
        hint = L.tiled_hint(case, got)
        assert hint is None, f"tiled_mma_for{case!r}: {hint}"


PTX = [(dtype, arch) for dtype in ("float16", "bfloat16") for arch in ("sm_80", "sm_90a")]
_rng = random.Random(505)
# (L, M, N, K). 5.5: M, N and K multiples of 8 (A's contiguous extent is M) that are not of the 64 x 64 x 24 tile;
# K = 8 (one k-block, less than a K tile) and K tails of one and two k-blocks; single rows and columns of tiles.
SHAPES = [(1, 8, 8, 8), (1, 72, 72, 40), (1, 128, 8, 16), (1, 64, 64, 24), (1, 200, 136, 520), (1, 8, 264, 48)]
SHAPES += [(1, 8 * _rng.randint(1, 40), 8 * _rng.randint(1, 40), 8 * _rng.randint(1, 80)) for _ in range(4)]
# 5.6: M any; N and K multiples of 8, not of the 64 x 64 x 32 tile.
BATCHED = [(3, 65, 72, 40), (1, 1, 8, 8), (5, 33, 16, 24), (2, 130, 200, 264)]
BATCHED += [(_rng.randint(1, 6), _rng.randint(1, 200), 8 * _rng.randint(1, 30), 8 * _rng.randint(1, 40))
            for _ in range(3)]
K8 = {"a_transposed": True}  # 5.5's A arrives as Aᵀ (K, M)


def assert_ptx(learner, host: str, hint, dtype: str, arch: str, batched: bool, **a) -> None:
    code, _ = learner.call(host, *L.gemm_ptx_case(dtype, arch, batched, **a), via="ptx", options={"vector": L.VECTOR},
                           timeout=300)
    problem = hint(code)
    assert problem is None, f"{host} for {dtype} on {arch}: {problem}"


def assert_gemms(learner, host: str, shapes, batched: bool, seed: int, **a) -> None:
    for dtype in ("float16", "bfloat16"):
        for case in L.gemm_cases(seed + len(dtype), shapes, dtype, batched, **a):
            _, (out,) = learner.call(host, *case, via="launch", options={"vector": L.VECTOR}, timeout=300)
            problem = L.gemm_hint(case, out, batched, **a)
            assert problem is None, f"{host} {dtype} C {tuple(out.shape)}: {problem}"


@pytest.mark.exercise("5.5", points=1)
def test_k8_mainloop_ptx_for_both_dtypes_and_archs(learner):
    for dtype, arch in PTX:
        assert_ptx(learner, "tc_host", M.k8_ptx_hint, dtype, arch, False, **K8)


@pytest.mark.exercise("5.5", points=3)
@pytest.mark.gpu(80)
def test_k8_gemm_on_random_ragged_shapes(learner):
    for dtype in ("float16", "bfloat16"):
        assert_ptx(learner, "tc_host", M.k8_ptx_hint, dtype, "sm_80", False, **K8)  # the kernel the exercise asks for
    assert_gemms(learner, "tc_host", SHAPES, False, 5050, **K8)


@pytest.mark.exercise("5.6", points=1)
def test_batched_gemm_ptx_for_both_dtypes_and_archs(learner):
    for dtype, arch in PTX:
        assert_ptx(learner, "batched_host", M.batched_ptx_hint, dtype, arch, True)


@pytest.mark.exercise("5.6", points=3)
@pytest.mark.gpu(80)
def test_batched_gemm_on_random_ragged_batches(learner):
    for dtype in ("float16", "bfloat16"):
        assert_ptx(learner, "batched_host", M.batched_ptx_hint, dtype, "sm_80", True)
    assert_gemms(learner, "batched_host", BATCHED, True, 5060)
