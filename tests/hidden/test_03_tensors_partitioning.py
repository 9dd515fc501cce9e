"""Hidden tests of lesson 3: local_partition by hand on random tiles and thread layouts, the learner's batched
transpose kernel (its PTX for every dtype and arch; on a GPU random batches with ragged edges, primes, in three
dtypes with poisoned outputs), and the bank arithmetic of the padded shared-memory tile on random inputs.

References: the eager algebra (cutecourse.layout) for the partition, the input as torch casts it, transposed and
compared exactly, for the kernel, the bank model of cutecourse.hw.banks for banks and wavefronts.
"""

import random

import numpy as np
import pytest

from cutecourse.grading import wire
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


BATCHES = [(1, 1, 1), (3, 1, 97), (2, 31, 33), (1, 32, 32), (2, 97, 131), (1, 257, 63), (5, 1000, 8), (2, 8, 1009)]
_rng = random.Random(302)
BATCHES += [(_rng.randint(1, 4), _rng.randint(1, 500), _rng.randint(1, 500)) for _ in range(4)]
PTX = [(dtype, arch) for dtype in ("float32", "float16", "bfloat16") for arch in ("sm_80", "sm_90a")]


def assert_ptx(learner, dtype: str, arch: str) -> None:
    code, _ = learner.call("batched_host", *L.ptx_case(dtype, arch), via="ptx", timeout=300)
    hint = L.ptx_hint(code, dtype)
    assert hint is None, f"{dtype} on {arch}: {hint}"


@pytest.mark.exercise("3.2", points=1)
def test_batched_transpose_ptx_for_every_dtype_and_arch(learner):
    for dtype, arch in PTX:
        assert_ptx(learner, dtype, arch)


@pytest.mark.exercise("3.2", points=3)
@pytest.mark.gpu(80)
def test_batched_transpose_on_random_batches_and_dtypes(learner):
    rng = np.random.default_rng(303)
    for dtype in ("float32", "float16", "bfloat16"):
        assert_ptx(learner, dtype, "sm_80")  # through shared memory, as asked: a copy of the 2-D kernel is not it
        for b, m, n in BATCHES:
            x = rng.standard_normal((b, m, n)).astype(np.float32)
            _, (out,) = learner.call("batched_host", wire.tensor(x, dtype), wire.poisoned((b, n, m), dtype),
                                     via="launch", timeout=120)
            hint = L.transpose_hint(rounded(x, dtype), out)  # exactly Sᵀ; NaN (the poison) = never written
            assert hint is None, f"{dtype} {(b, m, n)}: {hint}"


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
