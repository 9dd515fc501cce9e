"""Hidden tests of lesson 4: who holds an element of a 128-bit copy's TV layout, on random dtypes, thread grids and
elements; the learner's predicated, vectorized cast kernel (its PTX for both 16-bit dtypes and both archs; on a GPU
random ragged shapes with poisoned outputs); the thread/value split of random tiles, judged by its properties
(several answers are right); and the 32-byte sectors and 128-byte lines a warp's copy touches, on random thread grids,
orders, pitches (often not 32- or 128-byte aligned) and warps.

References: the eager algebra (cutecourse.layout.make_layout_tv) for the TV layouts, torch for the copy.
"""

import random

import pytest

from cutecourse.grading.checks import l04_tiled_copy as L

CASES = 40


def assert_random_cases(learner, function: str, make_case, hint, seed: int) -> None:
    """`function` on CASES random cases from `make_case`, each judged by `hint(case, value)`."""
    rng = random.Random(seed)
    for _ in range(CASES):
        case = make_case(rng)
        got, _ = learner.call(function, *case)
        problem = hint(case, got)
        assert problem is None, f"{function}{case!r} gave {got!r}: {problem}"


@pytest.mark.exercise("4.1", points=2)
def test_tv_owner_on_random_dtypes_threads_and_elements(learner):
    assert_random_cases(learner, "tv_owner", L.random_owner_case, L.owner_hint, 401)


SHAPES = [(1, 4), (1, 96), (7, 12), (8, 128), (31, 132), (97, 136), (257, 64), (1000, 8), (3, 1012)]
_rng = random.Random(402)
SHAPES += [(_rng.randint(1, 700), 4 * _rng.randint(1, 175)) for _ in range(4)]
PTX = [(dtype, arch) for dtype in ("bfloat16", "float16") for arch in ("sm_80", "sm_90a")]


def assert_ptx(learner, dtype: str, arch: str) -> None:
    code, _ = learner.call("cast_host", *L.cast_ptx_case(dtype, arch), via="ptx", options={"vector": L.VECTOR},
                           timeout=300)
    hint = L.cast_ptx_hint(code)
    assert hint is None, f"to {dtype} on {arch}: {hint}"


@pytest.mark.exercise("4.2", points=1)
def test_cast_ptx_for_both_dtypes_and_archs(learner):
    for dtype, arch in PTX:
        assert_ptx(learner, dtype, arch)


@pytest.mark.exercise("4.2", points=3)
@pytest.mark.gpu(80)
def test_cast_on_random_shapes_and_dtypes(learner):
    for dtype in ("bfloat16", "float16"):
        assert_ptx(learner, dtype, "sm_80")  # vectorized and predicated, as asked
        for case in L.cast_cases(403 + len(dtype), [(shape, dtype) for shape in SHAPES]):
            _, (out,) = learner.call("cast_host", *case, via="launch", options={"vector": L.VECTOR}, timeout=120)
            hint = L.cast_hint(case, out)  # torch's rounding, exactly; NaN (the poison) counts as never written
            assert hint is None, f"{dtype} {tuple(out.shape)}: {hint}"


@pytest.mark.exercise("4.3", points=2)
def test_split_has_the_properties_on_random_tiles(learner):
    assert_random_cases(learner, "split", L.random_split_case, lambda case, got: L.split_hint(*case, got), 404)


@pytest.mark.exercise("4.4", points=2)
def test_warp_sectors_on_random_grids_pitches_and_warps(learner):
    assert_random_cases(learner, "warp_sectors", L.random_sectors_case, L.sectors_hint, 405)
