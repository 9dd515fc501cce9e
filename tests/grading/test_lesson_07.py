"""Lesson 7 (mixed precision, accumulators and the epilogue), the CPU exercises 7.1 and 7.2: a partly right submission
scores exactly its points; every check and hidden test fails a wrong answer, with a hint that points at the mistake
without printing the answer; an answer that calls what its exercise forbids scores 0 there; and the code the lesson
prints nearest to each answer (section 3's emulation, section 1's broadcast layouts), or the package's own bias
strides, submitted as the answers, fail the hidden tests.

(The kernel exercises 7.3 and 7.4 have tests of their own.) Each grade here is of 7.1 and 7.2 alone."""

from __future__ import annotations

import inspect
import re
from pathlib import Path

import pytest

from cutecourse.grading import checks, grader, reports, results
from cutecourse.grading.checks import l07_epilogue as L

from .forbidden_calls import assert_forbidden_calls_score_zero, assert_right_but_forbidden
from .submissions import (answer_from_file, assert_failed, edited, grade_lesson, hard_coded, lesson_solution, outputs,
                          statuses)
from .test_no_copies import PRINTED, occurs, tokens

LESSON = "07_epilogue"
CPU = {"7.1", "7.2"}

pytestmark = pytest.mark.slow


def solution(exercise: str) -> str:
    return lesson_solution(LESSON, exercise)


def submit(tmp_path: Path, answers: dict[str, str]) -> grader.Report:
    return grade_lesson(tmp_path, LESSON, answers, timeout=300, exercises=CPU)


# Each wrong answer makes one classic mistake; the check's hint points at it.
WRONG = {
    # fp16 offered for every input type: no Tensor Core sums bf16 products in fp16
    "7.1": edited(solution("7.1"), ('["float32"] if dtype == "bfloat16" else ["float16", "float32"]',
                                    '["float16", "float32"]')),
    # the broadcast strides swapped: "n" keeps the row, "m" the column
    "7.2": edited(solution("7.2"),
                  ('(0, 1) if bias_mode == "n" else (1, 0)', '(1, 0) if bias_mode == "n" else (0, 1)')),
}
#: What each wrong answer's check says (the hidden tests use the same hints).
HINTS = {"7.1": "no Tensor Core accumulates bfloat16 products in float16", "7.2": "not the one of its"}
CPU_HIDDEN = {"7.1": "choose_accumulator_for_other_k_dtypes_and_tolerances",
              "7.2": "bias_fragment_for_other_tiled_mmas_and_wgmma"}
CHECKS = {"7.1": "choose_accumulator", "7.2": "bias_fragment"}
FUNCTIONS = {"7.1": "choose_accumulator", "7.2": "bias_fragment"}


@pytest.fixture(scope="module")
def wrong_report(tmp_path_factory) -> grader.Report:
    return submit(tmp_path_factory.mktemp("wrong"), WRONG)


def test_every_check_and_hidden_test_fails_on_a_wrong_answer(wrong_report):
    assert wrong_report.exercises()["7.1"][0] == 0 and wrong_report.exercises()["7.2"][0] == 0, \
        reports.summary(wrong_report)
    assert_failed(wrong_report, list(CPU_HIDDEN.values()), list(CHECKS.values()))


def test_each_failure_says_what_is_wrong(wrong_report):
    output = outputs(wrong_report)
    for exercise, hint in HINTS.items():
        for test in (f"check {CHECKS[exercise]}", f"hidden test_{CPU_HIDDEN[exercise]}"):
            assert hint in output[test], (test, output[test])


def test_the_checks_hints_do_not_print_the_answer(capsys, tmp_path):
    """Each check fails its wrong answer in one line that names the mistake, and the line holds none of the right
    values it was compared with: 7.1's right accumulator, 7.2's right layout and bias element for the failing case."""
    import numpy as np

    wrong = {e: answer_from_file(tmp_path, WRONG[e], FUNCTIONS[e]) for e in WRONG}
    failing = next(case for case in checks.choose_accumulator.cases()
                   if L.accumulator_hint(*case, wrong["7.1"](*case)) is not None)
    case = next(c for c in checks.bias_fragment.cases() if L.bias_hint(c, wrong["7.2"](*c)) is not None)
    layout, _ = wrong["7.2"](*case)
    got = np.array([[layout((t, v)) for v in range(layout[1].size())] for t in range(layout[0].size())])
    want = L.reference_bias(*case)
    t, v = np.argwhere(got != want)[0]
    right = answer_from_file(tmp_path, solution("7.2"), "bias_fragment")
    secrets = {
        "7.1": ["float32"] if L.accepted(*failing) == {"float32"} else [repr(a) for a in L.accepted(*failing)],
        "7.2": [str(right(*case)[0]), rf"\bnot {want[t, v]}\b", rf"element {want[t, v]}\b"],
    }
    assert L.accepted(*failing) == {"float32"}, "the wrong 7.1 should fail on bf16, whose answer is float32"
    for exercise in WRONG:
        assert getattr(checks, CHECKS[exercise])(wrong[exercise]) is False
        line = capsys.readouterr().out
        assert line.startswith(f"✗ {CHECKS[exercise]}: ") and line.count("\n") == 1 and HINTS[exercise] in line, line
        hint = line.split(": ", 2)[2]
        leaked = [s for s in secrets[exercise] if (re.search(s, hint) if "\\b" in s else s in hint)]
        assert not leaked, (exercise, leaked, hint)


def test_the_judges_catch_each_way_of_getting_it_wrong():
    """7.1: an accumulator the hardware does not offer, one too coarse, one wider than needed, None where one
    suffices, a value of the wrong kind; 7.2: the row's bias where the column's is asked for, the tile's layout
    instead of the fragment's, a wrong load count, a bare layout. Both sides of the band pass where the sample cannot
    tell."""
    from cutecourse.layout import Layout, composition, parse_layout

    assert "hardware offers" in L.accumulator_hint(1024, 0.05, "bfloat16", "float16")
    assert "above the tolerance" in L.accumulator_hint(4096, 0.002, "float16", "float16")
    assert "not the cheapest" in L.accumulator_hint(64, 0.01, "float16", "float32")
    assert "one of those offered" in L.accumulator_hint(64, 0.01, "float16", None)
    assert "expected 'float16', 'float32' or None" in L.accumulator_hint(64, 0.01, "float16", "fp16")
    error = L.accumulation_error(1024, "float16", "float16")
    assert L.accepted(1024, error * 1.1, "float16") == {"float16", "float32"}
    assert L.accepted(256, 1e-4, "float8_e4m3fn") == {None}

    tv, tile_m, tile_n, mode = checks.bias_fragment.cases()[2]
    broadcast = Layout((tile_m, tile_n), (0, 1))
    right = composition(broadcast, parse_layout(tv))
    assert L.bias_hint((tv, tile_m, tile_n, mode), (right, 4)) is None
    assert "loads=2" in L.bias_hint((tv, tile_m, tile_n, mode), (right, 2))
    assert "threads" in L.bias_hint((tv, tile_m, tile_n, mode), (broadcast, 4))
    swapped = composition(Layout((tile_m, tile_n), (1, 0)), parse_layout(tv))  # the row's bias, for "n"
    assert "not the one of its column" in L.bias_hint((tv, tile_m, tile_n, mode), (swapped, 4))
    assert "expected (layout, loads)" in L.bias_hint((tv, tile_m, tile_n, mode), right)


# --------------------------------------------------------------------------- a partly right submission

#: 7.1 answered only for the check's visible cases: the check passes, the hidden test does not.
HARD_CODED_7_1 = hard_coded("choose_accumulator", "k, tolerance, dtype",
                            {case: next(iter(L.accepted(*case))) for case in checks.choose_accumulator.cases()},
                            "float32")


def test_the_hard_coded_answer_really_passes_only_the_visible_cases(tmp_path):
    fn = answer_from_file(tmp_path, HARD_CODED_7_1, "choose_accumulator")
    assert checks.choose_accumulator.run(fn).startswith(checks.PASS)
    assert L.accumulator_hint(100, 0.01, "float8_e5m2", fn(100, 0.01, "float8_e5m2")) is not None


@pytest.fixture(scope="module")
def partial_report(tmp_path_factory) -> grader.Report:
    """7.1 hard-coded (check only), 7.2 right."""
    return submit(tmp_path_factory.mktemp("partial"), {"7.1": HARD_CODED_7_1, "7.2": solution("7.2")})


def test_partly_right_submission_scores_exactly_its_points(partial_report):
    got = {e: partial_report.exercises()[e][0] for e in sorted(CPU)}
    assert got == {"7.1": 1.0, "7.2": 3.0}, reports.summary(partial_report)
    state = statuses(partial_report)
    assert state[f"check {CHECKS['7.1']}"] == results.PASSED, reports.summary(partial_report)
    assert state[f"hidden test_{CPU_HIDDEN['7.1']}"] == results.FAILED, reports.summary(partial_report)


# --------------------------------------------------------------------------- what the exercise forbids

# A right 7.2 that counts a thread's bias elements with the course's lane table, which the judge uses.
CALLS_PACKAGE = {
    "7.2": """
from cutecourse import fragments
from cutecourse.layout import Layout, composition, parse_layout
def bias_fragment(tv_layout_c, tile_m, tile_n, bias_mode):
    tv = parse_layout(tv_layout_c)
    at = fragments.coords(tv, (tile_m, tile_n))[..., 1 if bias_mode == "n" else 0]
    fragment = composition(Layout((tile_m, tile_n), (0, 1) if bias_mode == "n" else (1, 0)), tv)
    return fragment, max(len(set(row.tolist())) for row in at)
""",
}


@pytest.mark.parametrize("exercise", sorted(CALLS_PACKAGE))
def test_calling_the_package_would_be_right_and_calls_what_the_exercise_forbids(tmp_path, exercise):
    assert_right_but_forbidden(tmp_path, LESSON, exercise, CALLS_PACKAGE[exercise])


def test_a_submission_that_calls_the_package_scores_zero(tmp_path):
    assert_forbidden_calls_score_zero(tmp_path, LESSON, CALLS_PACKAGE)


# --------------------------------------------------------------------------- the lesson's and the package's code

#: The package's epilogue builds its bias tensor with these strides: 7.2's PRINTED answer is that layout too.
PACKAGE_BIAS = 'bias_stride = (0, 1) if fused.epilogue.bias == "n" else (1, 0)'


def test_the_packages_bias_strides_are_7_2s_printed_answer():
    """test_no_copies grades the printed answers (PRINTED, by exercise) and finds them failing; 7.2's is also the
    package's own broadcast."""
    from cutecourse.kernels.gemm import epilogue

    assert "(0, 1) if bias_mode == \"n\" else (1, 0)" in PRINTED["7.2"][1]
    assert occurs(tokens(PACKAGE_BIAS), tokens(inspect.getsource(epilogue))), "the package's bias strides moved"


# --------------------------------------------------------------------------- on a GPU

GPU_HIDDEN = {"7.3": "fused_epilogue_on_random_ragged_shapes_betas_and_slopes",
              "7.4": "vector_store_on_random_ragged_shapes"}


@pytest.mark.gpu(80)
def test_on_a_gpu_the_kernels_earn_every_point_and_a_wrong_activation_loses_the_gemms(tmp_path):
    """Through the grader, the solutions of 7.3 and 7.4 earn all 6 points each (two checks, the hidden PTX test and
    the hidden GEMMs). A 7.3 with a plain ReLU for the leaky one keeps its 2 PTX points and loses the GEMMs."""
    from .test_l07_fused_epilogue import FUSED_GPU_MISTAKES

    kernels = {"7.3", "7.4"}
    report = grade_lesson(tmp_path, LESSON, {e: solution(e) for e in kernels}, timeout=300, exercises=kernels)
    assert {e: report.exercises()[e] for e in kernels} == {"7.3": (6.0, 6.0), "7.4": (6.0, 6.0)}, \
        reports.summary(report)
    (tmp_path / "relu").mkdir()
    variant, hint = FUSED_GPU_MISTAKES["a plain ReLU"]
    wrong = grade_lesson(tmp_path / "relu", LESSON, {"7.3": variant()}, timeout=300, exercises={"7.3"})
    assert wrong.exercises()["7.3"] == (2.0, 6.0), reports.summary(wrong)
    assert statuses(wrong)[f"hidden test_{GPU_HIDDEN['7.3']}"] == results.FAILED, reports.summary(wrong)
    assert hint in outputs(wrong)[f"hidden test_{GPU_HIDDEN['7.3']}"], reports.summary(wrong)


def test_the_worked_example_and_the_packages_epilogue_as_the_kernel_answers_score_nothing(tmp_path):
    """The lesson prints the worked example's scalar epilogue and the package ships step 5's staged one: submitted as
    7.3 (step 5's) and 7.4 (the worked example's), they fail the PTX checks and the hidden PTX tests, on any machine."""
    from .test_l07_fused_epilogue import FUSED_PTX_MISTAKES, VECTOR_PTX_MISTAKES

    answers = {"7.3": FUSED_PTX_MISTAKES["the package's step-5 epilogue"][0](),
               "7.4": VECTOR_PTX_MISTAKES["the worked example's epilogue"][0]()}
    report = grade_lesson(tmp_path, LESSON, answers, timeout=300, exercises=set(answers))
    assert report.exercises()["7.3"][0] == 0.0 and report.exercises()["7.4"][0] == 0.0, reports.summary(report)
    state = statuses(report)
    for hidden in ("fused_epilogue_ptx_for_both_dtypes_and_archs", "vector_store_ptx_for_both_dtypes_and_archs"):
        assert state[f"hidden test_{hidden}"] == results.FAILED, reports.summary(report)
