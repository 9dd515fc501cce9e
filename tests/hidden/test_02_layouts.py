"""Hidden tests of lesson 2: the learner's layout functions on random layouts the notebook never showed.

The expected values come from the eager algebra (cutecourse.layout), which prints exactly what the CuTe DSL 4.8.1
prints (tests/unit/test_layout_vs_dsl.py compares them on thousands of cases). Every input is valid: the exercise's
spec defines its result.
"""

import random

import pytest

import cutecourse.layout as eager
from cutecourse.grading.checks import l02_layouts as L

CASES = 60


def draw(rng, make, count=CASES):
    out = []
    while len(out) < count:
        case = make(rng)
        if case is not None:
            out.append(case)
    return out


@pytest.mark.exercise("2.1", points=2)
def test_crd2idx_on_random_hierarchical_layouts(learner):
    for coord, shape, stride in draw(random.Random(201), L.random_crd2idx_case):
        got, _ = learner.call("my_crd2idx", coord, shape, stride)
        want = eager.crd2idx(coord, L.layout_of(shape, stride))
        assert got == want, f"my_crd2idx{(coord, shape, stride)!r} gave {got!r}"


@pytest.mark.exercise("2.2", points=2)
def test_coalesce_on_random_layouts(learner):
    for shape, stride in draw(random.Random(202), L.random_coalesce_case):
        got, _ = learner.call("my_coalesce", shape, stride)
        want = eager.coalesce(L.layout_of(shape, stride))
        assert got == (want.shape, want.stride), f"my_coalesce{(shape, stride)!r} gave {got!r}"


@pytest.mark.exercise("2.3", points=3)
def test_composition_on_random_layouts(learner):
    for a_shape, a_stride, b_shape, b_stride in draw(random.Random(203), L.random_composition_case):
        got, _ = learner.call("my_composition", a_shape, a_stride, b_shape, b_stride)
        want = eager.composition(L.layout_of(a_shape, a_stride), L.layout_of(b_shape, b_stride))
        assert got == (want.shape, want.stride), (
            f"my_composition{(a_shape, a_stride, b_shape, b_stride)!r} gave {got!r}")


@pytest.mark.exercise("2.4", points=2)
def test_predict_logical_divide_on_random_layouts(learner):
    for shape, stride, n in draw(random.Random(204), L.random_divide_case):
        got, _ = learner.call("predict_logical_divide", shape, stride, n)
        want = str(eager.logical_divide(L.layout_of(shape, stride), eager.make_layout(n)))
        assert isinstance(got, str) and got.replace(" ", "") == want, (
            f"predict_logical_divide{(shape, stride, n)!r} gave {got!r}")


@pytest.mark.exercise("2.5", points=2)
def test_predict_logical_product_on_random_layouts(learner):
    for shape, stride, n in draw(random.Random(205), L.random_product_case):
        got, _ = learner.call("predict_logical_product", shape, stride, n)
        want = str(eager.logical_product(L.layout_of(shape, stride), eager.make_layout(n)))
        assert isinstance(got, str) and got.replace(" ", "") == want, (
            f"predict_logical_product{(shape, stride, n)!r} gave {got!r}")
