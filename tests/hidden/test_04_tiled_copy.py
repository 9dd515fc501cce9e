"""Hidden tests of lesson 4: the TV layout of 128-bit copies on random dtypes and thread/value shapes, the learner's
predicated copy kernel on random shapes (primes, ragged edges) in three dtypes with poisoned outputs, and the
thread/value split of random tiles, judged by its properties (several answers are right).

References: the eager algebra (cutecourse.layout.make_layout_tv) for the TV layouts, torch for the copy.
"""

import random

import numpy as np
import pytest

from cutecourse.grading import sandbox
from cutecourse.grading.checks import exact_hint, rounded
from cutecourse.grading.checks import l04_tiled_copy as L

CASES = 40
TV_CASES = 12  # each call traces and JIT-compiles a @cute.jit function: a few hundred ms and some memory


@pytest.mark.exercise("4.1", points=2)
def test_tv_for_on_random_dtypes_and_shapes(learner):
    rng = random.Random(401)
    for _ in range(TV_CASES):
        case = L.random_tv_case(rng)
        got, _ = learner.call("tv_for", *case)
        hint = L.tv_hint(case, got)
        assert hint is None, f"tv_for{case!r} gave {got!r}: {hint}"


SHAPES = [(1, 1), (1, 97), (7, 13), (8, 128), (31, 129), (97, 131), (257, 63), (1000, 8), (3, 1009)]
_rng = random.Random(402)
SHAPES += [(_rng.randint(1, 700), _rng.randint(1, 700)) for _ in range(4)]


@pytest.mark.exercise("4.2", points=3)
@pytest.mark.gpu(80)
def test_predicated_copy_on_random_shapes_and_dtypes(learner):
    rng = np.random.default_rng(403)
    for dtype in ("float32", "float16", "bfloat16"):
        for m, n in SHAPES:
            x = rng.standard_normal((m, n)).astype(np.float32)
            _, (out,) = learner.call("copy_predicated", sandbox.tensor(x, dtype), sandbox.poisoned((m, n), dtype),
                                     timeout=120)
            want = rounded(x, dtype)  # torch's cast: a copy moves exactly these values
            hint = exact_hint(want, out)  # exact, and NaN (the poison) counts as never written
            assert hint is None, f"{dtype} {(m, n)}: {hint}"


@pytest.mark.exercise("4.3", points=2)
def test_split_has_the_properties_on_random_tiles(learner):
    rng = random.Random(404)
    for _ in range(CASES):
        case = L.random_split_case(rng)
        got, _ = learner.call("split", *case)
        hint = L.split_hint(*case, got)
        assert hint is None, f"split{case!r} gave {got!r}: {hint}"
