"""Hidden tests of the grading demo: the learner's functions on inputs the notebook never showed."""

import random

import numpy as np
import pytest

from cutecourse.grading import checks, wire


@pytest.mark.exercise("0.1", points=2)
def test_row_major_strides_on_random_shapes(learner):
    rng = random.Random(7)
    for _ in range(50):
        shape = tuple(rng.randint(1, 9) for _ in range(rng.randint(1, 5)))
        value, _ = learner.call("row_major_strides", shape)
        expected = tuple(int(np.prod(shape[i + 1:])) for i in range(len(shape)))
        assert value == expected, f"row_major_strides{shape!r} gave {value!r}"


@pytest.mark.exercise("0.2", points=3)
@pytest.mark.gpu(80)
def test_scale_kernel_on_random_lengths_and_alphas(learner):
    rng = np.random.default_rng(11)
    for n in (1, 127, 129, 4097, 65_537, 1_000_003):
        x = rng.standard_normal(n).astype(np.float32)
        alpha = float(rng.uniform(-4, 4))
        _, (out,) = learner.call("scale_host", wire.tensor(x), wire.poisoned((n,)), alpha, via="launch",
                                 timeout=120)
        assert not np.isnan(out).any(), f"n={n}: {int(np.isnan(out).sum())} outputs never written"
        assert checks.relative_error(out, alpha * x.astype(np.float64)) < 1e-6, f"n={n}: wrong values"
