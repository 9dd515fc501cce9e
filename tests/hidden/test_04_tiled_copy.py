"""Hidden tests of lesson 4: who holds an element of a 128-bit copy's TV layout, on random dtypes, thread grids and
elements; the learner's predicated copy kernel on random shapes (primes, ragged edges) in three dtypes with poisoned
outputs; and the thread/value split of random tiles, judged by its properties (several answers are right).

References: the eager algebra (cutecourse.layout.make_layout_tv) for the TV layouts, torch for the copy.
"""

import random

import numpy as np
import pytest

from cutecourse.grading import sandbox
from cutecourse.grading.checks import exact_hint, rounded
from cutecourse.grading.checks import l04_tiled_copy as L

CASES = 40


@pytest.mark.exercise("4.1", points=2)
def test_tv_owner_on_random_dtypes_threads_and_elements(learner):
    rng = random.Random(401)
    for _ in range(CASES):
        case = L.random_owner_case(rng)
        got, _ = learner.call("tv_owner", *case)
        hint = L.owner_hint(case, got)
        assert hint is None, f"tv_owner{case!r} gave {got!r}: {hint}"


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
