"""Lesson 7 (mixed precision, accumulators and the epilogue) through the grader: a wrong answer to each exercise fails
every check and hidden test this machine runs, each with a hint that points at the mistake without printing the
answer; a partly right submission (7.1 right on the visible cases only, 7.2 and 7.3 right, 7.4 untouched) scores
exactly its points; an answer that calls what its exercise forbids scores 0 there; the code the lesson shows nearest
to 7.1 (section 3's model) fails it; and the kernels the lesson and the package print, submitted as 7.3 and 7.4, earn
no kernel points. On a GPU the kernels' solutions earn every point and a wrong activation loses the GEMMs.

(Every lesson's whole solution scoring every point, and its untouched exercise notebook scoring 0, are
tests/grading/test_every_exercise.py's, `-k 07_epilogue`; the kernel exercises' mistakes, one by one, are
test_l07_fused_epilogue.py's.)"""

from __future__ import annotations

import inspect
import re
from pathlib import Path

import pytest

from cutecourse.grading import checks, grader, reports, results
from cutecourse.grading.checks import l07_epilogue as L

from .forbidden_calls import assert_forbidden_calls_score_zero, assert_right_but_forbidden
from .submissions import answer_from_file, assert_failed, edited, grade_lesson, lesson_solution, outputs, statuses
from .test_l07_fused_epilogue import FUSED_PTX_MISTAKES, VECTOR_PTX_MISTAKES
from .test_no_copies import PRINTED, occurs, tokens

LESSON = "07_epilogue"
EXERCISES = {"7.1", "7.2", "7.3", "7.4"}

pytestmark = pytest.mark.slow


def solution(exercise: str) -> str:
    return lesson_solution(LESSON, exercise)


def submit(tmp_path: Path, answers: dict[str, str], exercises: set[str] = EXERCISES) -> grader.Report:
    return grade_lesson(tmp_path, LESSON, answers, timeout=300, exercises=exercises)


def called(fn, case: tuple) -> object:
    """`fn` (a learner's 7.1) on a check case, its inputs as the learner gets them: float64 CPU tensors."""
    import torch

    x, y, block, align_bits = L.case_arrays(case)
    return fn(torch.from_numpy(x), torch.from_numpy(y), block, align_bits)


TRUNCATED = "total = torch.ldexp(torch.trunc(torch.ldexp(mantissa, torch.tensor(24))), exponent - 24)"
# Each wrong answer makes one classic mistake; the check's hint points at it.
WRONG = {
    # the block's sum rounded to nearest, as IEEE arithmetic would: the Tensor Core cuts it toward zero
    "7.1": edited(solution("7.1"), (TRUNCATED, TRUNCATED.replace("torch.trunc", "torch.round"))),
    # the broadcast strides swapped: "n" keeps the row, "m" the column
    "7.2": edited(solution("7.2"),
                  ('(0, 1) if bias_mode == "n" else (1, 0)', '(1, 0) if bias_mode == "n" else (0, 1)')),
    # each accumulator's scale read at its row, worked out from its coordinate: no broadcast layout
    "7.3": FUSED_PTX_MISTAKES["row_scale by index arithmetic"][0](),
    # step 5's staging: every thread reads back rows other warps wrote, behind a barrier of its own warp only
    "7.4": VECTOR_PTX_MISTAKES["step 5's CTA-wide read-back behind a warp barrier"][0](),
}
#: What each wrong answer's check says (the hidden tests use the same hints).
HINTS = {"7.1": "the block's sum rounded to nearest", "7.2": "not the one of its", "7.3": "loaded 32 times a thread",
         "7.4": "that warp 1 wrote"}
CPU_HIDDEN = {"7.1": "block_fma_dot_on_ragged_k_every_format_and_spread_magnitudes",
              "7.2": "bias_fragment_for_other_tiled_mmas_and_wgmma",
              "7.3": "fused_epilogue_ptx_for_both_dtypes_and_archs",
              "7.4": "vector_store_ptx_for_both_dtypes_and_archs"}
CHECKS = {"7.1": "block_fma_dot", "7.2": "bias_fragment", "7.3": "fused_epilogue_ptx", "7.4": "vector_store_ptx"}
GPU_CHECKS = {"7.3": "fused_epilogue_gemm", "7.4": "vector_store_gemm"}
GPU_HIDDEN = {"7.3": "fused_epilogue_on_random_ragged_shapes_betas_and_slopes",
              "7.4": "vector_store_on_random_ragged_shapes"}
FUNCTIONS = {"7.1": "block_fma_dot", "7.2": "bias_fragment"}


@pytest.fixture(scope="module")
def wrong_report(tmp_path_factory) -> grader.Report:
    return submit(tmp_path_factory.mktemp("wrong"), WRONG)


def test_every_check_and_hidden_test_fails_on_a_wrong_answer(wrong_report):
    assert {e: wrong_report.exercises()[e][0] for e in EXERCISES} == dict.fromkeys(EXERCISES, 0.0), \
        reports.summary(wrong_report)
    assert_failed(wrong_report, list(CPU_HIDDEN.values()), list(CHECKS.values()))


def test_each_failure_says_what_is_wrong(wrong_report):
    output = outputs(wrong_report)
    for exercise, hint in HINTS.items():
        for test in (f"check {CHECKS[exercise]}", f"hidden test_{CPU_HIDDEN[exercise]}"):
            assert hint in output[test], (test, output[test])


def test_the_cpu_checks_hints_do_not_print_the_answer(capsys, tmp_path):
    """Each CPU check fails its wrong answer in one line that names the mistake, and the line holds none of the right
    values it was compared with: 7.1's right dot products, 7.2's right layout and bias element for the failing case."""
    import numpy as np

    wrong = {e: answer_from_file(tmp_path, WRONG[e], FUNCTIONS[e]) for e in FUNCTIONS}
    failing = next(case for case in checks.block_fma_dot.cases() if L.block_fma_hint(case, called(wrong["7.1"], case)))
    want = L.block_fma(*L.case_arrays(failing))
    case = next(c for c in checks.bias_fragment.cases() if L.bias_hint(c, wrong["7.2"](*c)) is not None)
    layout, _ = wrong["7.2"](*case)
    got = np.array([[layout((t, v)) for v in range(layout[1].size())] for t in range(layout[0].size())])
    bias = L.reference_bias(*case)
    t, v = np.argwhere(got != bias)[0]
    right = answer_from_file(tmp_path, solution("7.2"), "bias_fragment")
    secrets = {
        "7.1": [f"{w:.6g}" for w in want if w not in (0.0, 1.0)][:8],
        "7.2": [str(right(*case)[0]), rf"\bnot {bias[t, v]}\b", rf"element {bias[t, v]}\b"],
    }
    for exercise in FUNCTIONS:
        assert getattr(checks, CHECKS[exercise])(wrong[exercise]) is False
        line = capsys.readouterr().out
        assert line.startswith(f"✗ {CHECKS[exercise]}: ") and line.count("\n") == 1 and HINTS[exercise] in line, line
        hint = line.split(": ", 2)[2]
        leaked = [s for s in secrets[exercise] if (re.search(s, hint) if "\\b" in s else s in hint)]
        assert not leaked, (exercise, leaked, hint)


def test_the_judges_catch_each_way_of_getting_it_wrong():
    """7.1: each variant of the model (rounding to nearest, no alignment, the accumulator outside the block, one
    product a step, a bit too many or too few, section 3's model, one rounding at the end) is named on some visible
    case, a result of the wrong kind or shape is refused, and a near miss says how far and which way; 7.2: the row's
    bias where the column's is asked for, the tile's layout instead of the fragment's, a wrong load count, a bare
    layout."""
    import numpy as np

    from cutecourse.layout import Layout, composition, parse_layout

    cases = checks.block_fma_dot.cases()
    for mistake in L.block_fma_variants(*L.case_arrays(cases[0])):
        named = [c for c in cases if mistake in (L.block_fma_hint(c, L.block_fma_variants(*L.case_arrays(c))[mistake])
                                                 or "")]
        assert named, f"no visible case names {mistake!r}"
    want = L.block_fma(*L.case_arrays(cases[2]))
    assert L.block_fma_hint(cases[2], want) is None and L.block_fma_hint(cases[2], want.astype(np.float32)) is None
    assert "got shape (3,)" in L.block_fma_hint(cases[2], want[:3])
    assert "expected an array" in L.block_fma_hint(cases[2], "float32")
    assert "not finite" in L.block_fma_hint(cases[2], np.where(want > 0, np.nan, want))
    nudged = want.copy()
    nudged[5] = np.nextafter(np.float32(want[5]), np.float32(2 * want[5]))
    assert "row 5, is 1 units of fp32's last place larger" in L.block_fma_hint(cases[2], nudged)

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

#: 7.1 without the last, shorter block: right whenever k is a multiple of the block (every visible case), wrong on the
#: hidden test's ragged k.
WHOLE_BLOCKS_7_1 = edited(solution("7.1"), ("range(0, products.shape[1], block)",
                                            "range(0, products.shape[1] - block + 1, block)"))


def test_the_whole_blocks_answer_really_passes_only_the_visible_cases(tmp_path):
    import numpy as np

    fn = answer_from_file(tmp_path, WHOLE_BLOCKS_7_1, "block_fma_dot")
    assert checks.block_fma_dot.run(fn).startswith(checks.PASS)
    ragged = L.block_fma_case(np.random.default_rng(1), 4, 17, "H100 fp16", "float16")
    assert "is the last, shorter block added?" in L.block_fma_hint(ragged, called(fn, ragged))


@pytest.fixture(scope="module")
def partial_report(tmp_path_factory) -> grader.Report:
    """7.1 for whole blocks only (check only), 7.2 and 7.3 right, 7.4 untouched (its stub)."""
    return submit(tmp_path_factory.mktemp("partial"),
                  {"7.1": WHOLE_BLOCKS_7_1, "7.2": solution("7.2"), "7.3": solution("7.3")})


def test_partly_right_submission_scores_exactly_its_points(partial_report):
    """On this machine 7.3's GPU check and GPU test are not run: they count in its maximum, not in its score."""
    got = {e: partial_report.exercises()[e] for e in sorted(EXERCISES)}
    assert got == {"7.1": (1.0, 3.0), "7.2": (3.0, 3.0), "7.3": (2.0, 6.0), "7.4": (0.0, 6.0)}, \
        reports.summary(partial_report)
    state = statuses(partial_report)
    assert state[f"check {CHECKS['7.1']}"] == results.PASSED, reports.summary(partial_report)
    assert state[f"hidden test_{CPU_HIDDEN['7.1']}"] == results.FAILED, reports.summary(partial_report)
    for exercise in ("7.3", "7.4"):
        for name in (f"check {GPU_CHECKS[exercise]}", f"hidden test_{GPU_HIDDEN[exercise]}"):
            assert state[name] == results.NOT_RUN, (name, reports.summary(partial_report))


# --------------------------------------------------------------------------- what the exercise forbids

# Right answers that call the judges' own references: 7.1's block FMA, 7.2's lane table.
CALLS_PACKAGE = {
    "7.1": """
from cutecourse.grading.checks.l07_epilogue import block_fma
def block_fma_dot(x, y, block, align_bits):
    return block_fma(x.numpy(), y.numpy(), block, align_bits)
""",
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

#: Section 3's emulation (its running_sums: one rounding to nearest per addition), as 7.1's answer.
#: Section 3's model (one rounding per addition), as test_no_copies.PRINTED submits it for 7.1.
LESSON_MODEL_7_1 = PRINTED["7.1"][1]
#: The package's epilogue builds its bias tensor with these strides: 7.2's printed answer is that layout too.
PACKAGE_BIAS = 'bias_stride = (0, 1) if fused.epilogue.bias == "n" else (1, 0)'


def test_the_lessons_model_as_7_1_fails_and_is_named(tmp_path):
    """The lesson prints section 3's model; submitted as the block FMA it fails the check, which names it."""
    from .test_no_copies import notebook_texts

    shown = [tokens(text) for text in notebook_texts(LESSON)]
    assert any(occurs(tokens("s = (s + row).astype(acc).astype(np.float64)"), t) for t in shown)
    line = checks.block_fma_dot.run(answer_from_file(tmp_path, LESSON_MODEL_7_1, "block_fma_dot"))
    assert line.startswith(checks.FAIL) and "section 3's model" in line, line


def test_the_packages_bias_strides_are_7_2s_printed_answer():
    """test_no_copies grades the printed answers (PRINTED, by exercise) and finds them failing; 7.2's is also the
    package's own broadcast."""
    from cutecourse.kernels.gemm import epilogue

    assert "(0, 1) if bias_mode == \"n\" else (1, 0)" in PRINTED["7.2"][1]
    assert occurs(tokens(PACKAGE_BIAS), tokens(inspect.getsource(epilogue))), "the package's bias strides moved"


#: The lesson's worked example (section 8) and the package's step-5 epilogue, each submitted as 7.3 and as 7.4.
PRINTED_KERNELS = {
    "worked example as 7.3, step 5 as 7.4": ("the worked example's epilogue", "the package's step-5 epilogue"),
    "step 5 as 7.3, worked example as 7.4": ("the package's step-5 epilogue", "the worked example's epilogue"),
}


@pytest.mark.parametrize("pairing", PRINTED_KERNELS)
def test_the_worked_example_and_the_packages_epilogue_as_the_kernel_answers_score_nothing(tmp_path, pairing):
    """Each fails the PTX check and the hidden PTX test, on any machine; on a GPU the GEMM tests then fail too (a GPU
    test checks the PTX first)."""
    fused_as, vector_as = PRINTED_KERNELS[pairing]
    answers = {"7.3": FUSED_PTX_MISTAKES[fused_as][0](), "7.4": VECTOR_PTX_MISTAKES[vector_as][0]()}
    report = submit(tmp_path, answers, exercises=set(answers))
    assert report.exercises()["7.3"][0] == 0.0 and report.exercises()["7.4"][0] == 0.0, reports.summary(report)
    state = statuses(report)
    for exercise in answers:
        for name in (f"check {CHECKS[exercise]}", f"hidden test_{CPU_HIDDEN[exercise]}"):
            assert state[name] == results.FAILED, (name, reports.summary(report))


# --------------------------------------------------------------------------- on a GPU


@pytest.mark.gpu(80)
def test_on_a_gpu_the_kernels_earn_every_point_and_a_wrong_activation_loses_the_gemms(tmp_path):
    """Through the grader, the solutions of 7.3 and 7.4 earn all 6 points each (two checks, the hidden PTX test and
    the hidden GEMMs). A 7.3 with a plain ReLU for the leaky one keeps its 2 PTX points and loses the GEMMs."""
    from .test_l07_fused_epilogue import FUSED_GPU_MISTAKES

    kernels = {"7.3", "7.4"}
    report = submit(tmp_path, {e: solution(e) for e in kernels}, exercises=kernels)
    assert {e: report.exercises()[e] for e in kernels} == {"7.3": (6.0, 6.0), "7.4": (6.0, 6.0)}, \
        reports.summary(report)
    state = statuses(report)
    for name in [f"hidden test_{t}" for t in GPU_HIDDEN.values()] + [f"check {c}" for c in GPU_CHECKS.values()]:
        assert state[name] == results.PASSED, (name, reports.summary(report))
    (tmp_path / "relu").mkdir()
    variant, hint = FUSED_GPU_MISTAKES["a plain ReLU"]
    wrong = submit(tmp_path / "relu", {"7.3": variant()}, exercises={"7.3"})
    assert wrong.exercises()["7.3"] == (2.0, 6.0), reports.summary(wrong)
    assert statuses(wrong)[f"hidden test_{GPU_HIDDEN['7.3']}"] == results.FAILED, reports.summary(wrong)
    assert hint in outputs(wrong)[f"hidden test_{GPU_HIDDEN['7.3']}"], reports.summary(wrong)
