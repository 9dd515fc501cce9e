"""Hidden tests of lesson 7. The CPU exercises: the block-FMA model's dot products on k that is not a multiple of the
block (down to k = 1), every input format (fp16, bf16, both fp8), every preset, rows of zeros and terms whose
magnitudes lie up to 2^12 apart, compared bit for bit; the bias fragment of TiledMMAs over other warp grids (row- and
column-major), with and without N permuted, both mma.sync shapes, and wgmma accumulators of every width, bias along N
and along M. The two kernels: their PTX for both 16-bit dtypes and both archs, then on a GPU the fused epilogue (row
scale, beta · C, leaky ReLU) and the warp-staged 16-byte store on random ragged shapes (M any, N and K multiples of 8
but not of the tile, M cutting a tile's bands), fp16 and bf16, beta = 0 with C all NaN, nonzero betas of both signs,
slopes from 0 up, poisoned D, against float64. A GPU test checks the kernel's PTX first, so that the lesson's worked
example or the package's step 5 earns nothing there. Both kernels take A and B K-major, as the given mainloop reads
them (16-byte cp.async vectors along K, ldmatrix without .trans), and C and D row-major: no other major is allowed,
so none is tested.

References: the judge's block-FMA model on integer significands (cutecourse.grading.checks.l07_epilogue) and
each (thread, value)'s (m, n), read off the C TV layout with cutecourse.fragments; for the kernels,
l07_fused_epilogue's PTX hints (7.3: row_scale loaded once per distinct row; 7.4: every staged address each warp
reads back simulated against what that warp wrote), fused_hint (float64 leaky_relu(row_scale · A Bᵀ + beta · C,
slope) from the inputs as the learner's process held them) and vector_hint (float64 A Bᵀ).
"""

import random

import pytest

from cutecourse import fragments as F
from cutecourse.grading.checks import l07_epilogue as L
from cutecourse.grading.checks import l07_fused_epilogue as L7

# --------------------------------------------------------------------------- 7.1 and 7.2 (CPU)


@pytest.mark.exercise("7.1", points=2)
def test_block_fma_dot_on_ragged_k_every_format_and_spread_magnitudes(learner):
    import numpy as np

    rng = np.random.default_rng(701)
    # k = 1 (one short block), k one past a block, a block of fp8 products with magnitudes 2^±12 apart, then random
    cases = [L.block_fma_case(rng, 5, 1, "H100 fp16", "float16"),
             L.block_fma_case(rng, 9, 17, "H100 fp16", "bfloat16"),
             L.block_fma_case(rng, 16, 33, "H100 fp8", "float8_e5m2", 12),
             L.block_fma_case(rng, 3, 4099, "A100 fp16", "float16", 4)]
    cases += [L.random_block_fma_case(rng) for _ in range(12)]
    for case in cases:
        got, _ = learner.call("block_fma_dot", *case)
        hint = L.block_fma_hint(case, got)
        x, _, block, align_bits = L.case_arrays(case)
        assert hint is None, f"block_fma_dot(x, y, {block}, {align_bits}) with x, y of shape {x.shape}: {hint}"


@pytest.mark.exercise("7.2", points=2)
def test_bias_fragment_for_other_tiled_mmas_and_wgmma(learner):
    rng = random.Random(702)
    cases = [(str(F.mma_atom(8).layout_c), 16, 8, "m"), (*L.tiled_c(4, 4, 16, False, False), "n"),
             (*L.tiled_c(1, 4, 8, True, True), "m"), (*L.tiled_c(4, 1, 16, True, False), "n"),
             (str(F.wgmma_atom(8).layout_c), 64, 8, "n"), (str(F.wgmma_atom(256).layout_c), 64, 256, "m"),
             (str(F.wgmma_atom(256).layout_c), 64, 256, "n")]
    cases += [L.random_bias_case(rng) for _ in range(10)]
    for case in cases:
        got, _ = learner.call("bias_fragment", *case)
        hint = L.bias_hint(case, got)
        assert hint is None, f"bias_fragment{case!r}: {hint}"


# --------------------------------------------------------------------------- 7.3 and 7.4 (kernels)


def assert_ptx(learner, host: str, case, hint) -> None:
    code, _ = learner.call(host, *case, via="ptx", options={"vector": L7.VECTOR}, timeout=300)
    problem = hint(code)
    assert problem is None, f"{host} for {case[0]}: {problem}"


@pytest.mark.exercise("7.3", points=1)
def test_fused_epilogue_ptx_for_both_dtypes_and_archs(learner):
    for dtype, arch in L7.PTX_CASES:
        assert_ptx(learner, "fused_host", L7.fused_ptx_case(dtype, arch), L7.fused_ptx_hint)


def assert_gemms(learner, host: str, ptx_case, ptx_hint, shapes, make_cases, seed: int, hint, what: str) -> None:
    """The kernel's sm_80 PTX first (the worked example or the package's step 5 earn nothing here), then its GEMMs on
    `shapes` in both 16-bit dtypes, each judged by `hint` in float64."""
    for dtype in L7.DTYPES:
        assert_ptx(learner, host, ptx_case(dtype, "sm_80"), ptx_hint)
    for dtype in L7.DTYPES:
        for shape, case in zip(shapes, make_cases(seed + len(dtype), shapes, dtype)):
            _, (out,) = learner.call(host, *case, via="launch", options={"vector": L7.VECTOR}, timeout=300)
            problem = hint(case, out)
            assert problem is None, f"{host} {dtype} {what} = {shape}: {problem}"


@pytest.mark.exercise("7.3", points=3)
@pytest.mark.gpu(80)
def test_fused_epilogue_on_random_ragged_shapes_betas_and_slopes(learner):
    assert_gemms(learner, "fused_host", L7.fused_ptx_case, L7.fused_ptx_hint, L7.FUSED_SHAPES, L7.fused_cases, 7030,
                 L7.fused_hint, "(M, N, K, beta, slope)")


@pytest.mark.exercise("7.4", points=1)
def test_vector_store_ptx_for_both_dtypes_and_archs(learner):
    for dtype, arch in L7.PTX_CASES:
        assert_ptx(learner, "vector_host", L7.vector_ptx_case(dtype, arch), L7.vector_ptx_hint)


@pytest.mark.exercise("7.4", points=3)
@pytest.mark.gpu(80)
def test_vector_store_on_random_ragged_shapes(learner):
    assert_gemms(learner, "vector_host", L7.vector_ptx_case, L7.vector_ptx_hint, L7.VECTOR_SHAPES, L7.vector_cases,
                 7040, L7.vector_hint, "(M, N, K)")
