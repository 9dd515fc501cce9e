"""Hidden tests of lesson 3: local_partition by hand on random tiles and thread layouts, the learner's naive
transpose kernel on random shapes (primes, ragged edges) in three dtypes with poisoned outputs, and the bank
arithmetic of the padded shared-memory tile on random inputs.

References: the eager algebra (cutecourse.layout) for the partition, the input as torch casts it, transposed and
compared exactly, for the kernel, the bank model of cutecourse.viz for banks and wavefronts.
"""

import random

import numpy as np
import pytest

from cutecourse.grading import sandbox
from cutecourse.grading.checks import l03_tensors as L
from cutecourse.grading.checks import rounded

CASES = 60


@pytest.mark.exercise("3.1", points=2)
def test_thread_coords_on_random_tiles_and_thread_layouts(learner):
    rng = random.Random(301)
    for _ in range(CASES):
        tile, thr_shape, thr_stride, tid = L.random_partition_case(rng)
        got, _ = learner.call("thread_coords", tile, thr_shape, thr_stride, tid)
        want = L.reference_thread_coords(tile, thr_shape, thr_stride, tid)
        assert list(got) == want, f"thread_coords{(tile, thr_shape, thr_stride, tid)!r} gave {got!r}"


SHAPES = [(1, 1), (1, 97), (31, 33), (32, 32), (97, 131), (257, 63), (1000, 8), (8, 1009)]
_rng = random.Random(302)
SHAPES += [(_rng.randint(1, 700), _rng.randint(1, 700)) for _ in range(4)]


@pytest.mark.exercise("3.2", points=3)
@pytest.mark.gpu(80)
def test_naive_transpose_on_random_shapes_and_dtypes(learner):
    rng = np.random.default_rng(303)
    for dtype in ("float32", "float16", "bfloat16"):
        for m, n in SHAPES:
            x = rng.standard_normal((m, n)).astype(np.float32)
            _, (out,) = learner.call("transpose_naive", sandbox.tensor(x, dtype), sandbox.poisoned((n, m), dtype),
                                     timeout=120)
            hint = L.transpose_hint(rounded(x, dtype), out)  # exactly Sᵀ; NaN (the poison) = never written
            assert hint is None, f"{dtype} {(m, n)}: {hint}"


@pytest.mark.exercise("3.3", points=2)
def test_smem_bank_on_random_elements(learner):
    rng = random.Random(304)
    for _ in range(CASES):
        case = L.random_bank_case(rng)
        got, _ = learner.call("smem_bank", *case)
        assert got == L.reference_bank(*case), f"smem_bank{case!r} gave {got!r}"


@pytest.mark.exercise("3.4", points=2)
def test_row_wavefronts_on_random_tiles_and_paddings(learner):
    rng = random.Random(305)
    for _ in range(CASES):
        case = L.random_wavefront_case(rng)
        got, _ = learner.call("row_wavefronts", *case)
        assert got == L.reference_row_wavefronts(*case), f"row_wavefronts{case!r} gave {got!r}"
