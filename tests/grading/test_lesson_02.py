"""Lesson 2 (layouts): a partly right submission scores exactly its points, every check and hidden test fails on a
wrong answer, each exercise is judged on its own (a wrong 2.2 costs 2.3 and 2.4 nothing), and a submission that calls
the eager algebra or the DSL instead scores nothing for those exercises."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from cutecourse.grading import checks, grader, reports, results
from cutecourse.grading import notebook as nbio

from .forbidden_calls import assert_forbidden_calls_score_zero, assert_right_but_forbidden
from .submissions import ROOT, grade_lesson, lesson_solution, statuses

LESSON = "02_layouts"

pytestmark = pytest.mark.slow


def solution(exercise: str) -> str:
    return lesson_solution(LESSON, exercise)


def submit(tmp_path: Path, answers: dict[str, str], exercises: set[str] | None = None) -> grader.Report:
    return grade_lesson(tmp_path, LESSON, answers, exercises=exercises)


# 2.2 answered only for the check's visible cases: the check passes, the hidden test does not.
HARD_CODED_2_2 = """
def my_coalesce(shape, stride):
    return {((2, (1, 6)), (1, (6, 2))): (12, 1),
            (((2, (3, 4)), (3, 2), 1), ((4, (8, 24)), (2, 6), 12)): ((24, 6), (4, 2)),
            ((4, 8), (8, 1)): ((4, 8), (8, 1)), ((1, 1), (3, 5)): (1, 0), (8, 2): (8, 2),
            ((2, 2, 2), (1, 2, 8)): ((4, 2), (1, 8))}[(shape, stride)]
"""

# The seed document's reading of logical_divide: (tile_id, element_in_tile). Wrong.
SEED_ORDER_2_4 = """
def predict_logical_divide(shape, stride, n):
    tiles = size_of(shape) // n
    return f"({tiles},{n}):({n},1)"
"""

WRONG = {
    # the dot product alone: right for natural coordinates, wrong for 1-D and folded ones
    "2.1": """
def my_crd2idx(coord, shape, stride):
    return sum(c * d for c, d in zip(leaves(coord), leaves(stride)))
""",
    # drops size-1 modes but never merges
    "2.2": """
def my_coalesce(shape, stride):
    modes = [(s, d) for s, d in zip(leaves(shape), leaves(stride)) if s != 1]
    if not modes:
        return 1, 0
    if len(modes) == 1:
        return modes[0]
    return tuple(s for s, _ in modes), tuple(d for _, d in modes)
""",
    # scales B's strides by A's first stride: right only for a 1-D A
    "2.3": """
def my_composition(a_shape, a_stride, b_shape, b_stride):
    d0 = leaves(a_stride)[0]
    scale = lambda t: tuple(scale(x) for x in t) if isinstance(t, tuple) else t * d0
    return b_shape, scale(b_stride)
""",
    "2.4": SEED_ORDER_2_4,
    # the seed document's "concatenation"
    "2.5": """
def predict_logical_product(shape, stride, n):
    return "(" + fmt(shape) + "," + str(n) + "):(" + fmt(stride) + ",1)"
""",
}


def test_partly_right_submission_scores_exactly_its_points(tmp_path):
    report = submit(tmp_path, {"2.1": solution("2.1"), "2.2": HARD_CODED_2_2, "2.3": solution("2.3"),
                               "2.4": SEED_ORDER_2_4})  # 2.5 left untouched
    got = {e: report.exercises()[e][0] for e in ("2.1", "2.2", "2.3", "2.4", "2.5")}
    check = 1.0  # the check's point counts with or without jupyter
    assert got == {"2.1": 2 + check, "2.2": check, "2.3": 3 + check, "2.4": 0.0, "2.5": 0.0}, reports.summary(report)
    assert report.score == 5 + 3 * check


def test_every_check_and_hidden_test_fails_on_a_wrong_answer(tmp_path):
    report = submit(tmp_path, WRONG)
    assert report.score == 0 and report.max_score == 16, reports.summary(report)
    names = statuses(report)
    expected = {f"check {c}" for c in ("my_crd2idx", "my_coalesce", "my_composition", "predict_logical_divide",
                                       "predict_logical_product")}
    expected |= {f"hidden test_{t}" for t in ("crd2idx_on_random_hierarchical_layouts", "coalesce_on_random_layouts",
                                              "composition_on_random_layouts",
                                              "predict_logical_divide_on_random_layouts",
                                              "predict_logical_product_on_random_layouts")}
    assert set(names) == expected and set(names.values()) == {results.FAILED}, names


def _wrong_function(exercise: str):
    helpers = nbio.source(next(c for c in nbio.load(ROOT / "solutions" / f"{LESSON}.ipynb")["cells"]
                               if "def layout_str" in nbio.source(c)))
    ns: dict = {}
    exec(helpers + "\n" + textwrap.dedent(WRONG[exercise]), ns)  # noqa: S102 - our own test code
    return next(v for k, v in ns.items() if k.startswith(("my_", "predict_")))


@pytest.mark.parametrize("exercise, check, leak", [
    ("2.1", "my_crd2idx", "10"), ("2.2", "my_coalesce", "12:1"), ("2.3", "my_composition", "(8,4):(1,8)"),
    ("2.4", "predict_logical_divide", "(128,8):(1,128)"), ("2.5", "predict_logical_product", "((4,8),2):((8,1),32)"),
])
def test_checks_explain_a_wrong_answer_without_giving_it_away(capsys, exercise, check, leak):
    assert getattr(checks, check)(_wrong_function(exercise)) is False
    line = capsys.readouterr().out
    assert line.startswith(f"✗ {check}: ") and line.count("\n") == 1
    assert leak not in line, line  # the right answer of the first failing case


def test_a_wrong_coalesce_costs_the_later_exercises_nothing(tmp_path):
    """2.3-2.5 take their inputs ready (A coalesced where it matters): judged against the reference, never through
    the learner's 2.2."""
    answers = {"2.2": WRONG["2.2"], "2.3": solution("2.3"), "2.4": solution("2.4"), "2.5": solution("2.5")}
    report = submit(tmp_path, answers, exercises=set(answers))  # 2.1, untouched, is not what this is about
    check = 1.0  # the check's point counts with or without jupyter
    got = {e: report.exercises()[e][0] for e in ("2.2", "2.3", "2.4", "2.5")}
    assert got == {"2.2": 0.0, "2.3": 3 + check, "2.4": 2 + check, "2.5": 2 + check}, reports.summary(report)


# Right answers, each through a function its exercise forbids (the eager algebra, or the DSL inside @cute.jit).
CALLS_PACKAGE = {
    "2.1": """
from cutecourse.layout import crd2idx, make_layout
def my_crd2idx(coord, shape, stride):
    return crd2idx(coord, make_layout(shape, stride=stride))
""",
    "2.2": """
import cutlass
import cutlass.cute as cute

@cute.jit
def _coalesce(shape: cutlass.Constexpr, stride: cutlass.Constexpr, out: cutlass.Constexpr):
    c = cute.coalesce(cute.make_layout(shape, stride=stride))
    out.append((c.shape, c.stride))

def my_coalesce(shape, stride):
    out = []
    _coalesce(shape, stride, out)
    return out[0]
""",
    "2.3": """
import cutecourse.layout as L
def my_composition(a_shape, a_stride, b_shape, b_stride):
    r = L.composition(L.make_layout(a_shape, stride=a_stride), L.make_layout(b_shape, stride=b_stride))
    return r.shape, r.stride
""",
    "2.4": """
import cutecourse.layout as L
def predict_logical_divide(shape, stride, n):
    tile = L.make_layout(n)  # A / B = A o (B, complement(B, size(A)))
    a = L.make_layout(shape, stride=stride)
    return str(L.composition(a, L.make_layout((tile, L.complement(tile, L.size(a))))))
""",
    "2.5": """
from cutecourse.layout import algebra, make_layout
def predict_logical_product(shape, stride, n):
    return str(algebra.logical_product(make_layout(shape, stride=stride), make_layout(n)))
""",
}


@pytest.mark.parametrize("exercise", sorted(CALLS_PACKAGE))
def test_calling_the_package_would_be_right_and_calls_what_the_exercise_forbids(exercise, tmp_path):
    assert_right_but_forbidden(tmp_path, LESSON, exercise, CALLS_PACKAGE[exercise])


def test_a_submission_that_calls_the_package_scores_zero(tmp_path):
    assert_forbidden_calls_score_zero(tmp_path, LESSON, CALLS_PACKAGE)
