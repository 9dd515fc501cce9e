"""Lesson 4 (tiled copy, vectorization, predication): a partly right submission scores exactly its points, and every
check and hidden test fails on a wrong answer. (The kernel exercise 4.2 has its own tests, in
test_kernel_exercises.py.)"""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from cutecourse.grading import checks, grader, reports

from .conftest import assert_failed, grade_lesson, lesson_solution

LESSON = "04_tiled_copy"

pytestmark = pytest.mark.slow


def solution(exercise: str) -> str:
    return lesson_solution(LESSON, exercise)


def submit(tmp_path: Path, answers: dict[str, str]) -> grader.Report:
    return grade_lesson(tmp_path, LESSON, answers, timeout=120)


def with_body(exercise: str, body: str) -> str:
    """The solution's answer cell of `exercise` with its solution region replaced by `body`."""
    source = solution(exercise)
    start, end = source.index("    ### BEGIN SOLUTION"), source.index("    ### END SOLUTION")
    return source[:start] + textwrap.indent(textwrap.dedent(body).strip("\n"), "    ") + "\n" + source[end:]


# Each wrong answer makes one classic mistake; the check's hint points at it.
WRONG = {
    # four values per thread whatever the dtype: right for fp32 only
    "4.1": with_body("4.1", """
        thr_layout = cute.make_ordered_layout((threads_m, threads_n), order=(1, 0))
        val_layout = cute.make_ordered_layout((values_m, 4), order=(1, 0))
        tiler_mn, layout_tv = cute.make_layout_tv(thr_layout, val_layout)
        out.append((str(tiler_mn), str(layout_tv)))
    """),
    # one scalar per thread, warps along rows
    "4.3": """
def split(tile_m, tile_n, dtype_bits, threads):
    return (threads // 32, 32), (1, 1)
""",
}
# 4.3 answered only for the check's visible cases: the check passes, the hidden test does not.
HARD_CODED_4_3 = """
def split(tile_m, tile_n, dtype_bits, threads):
    return {(32, 128, 32, 256): ((8, 32), (1, 4)), (64, 64, 16, 128): ((16, 8), (1, 8)),
            (16, 256, 8, 64): ((4, 16), (1, 16)), (96, 48, 64, 256): ((32, 8), (1, 2)),
            (8, 512, 16, 512): ((8, 64), (1, 8))}.get((tile_m, tile_n, dtype_bits, threads), ((1, threads), (1, 1)))
"""


def _function(source: str, name: str, tmp_path: Path):
    import importlib.util

    path = tmp_path / f"answer_{name}.py"  # the DSL reads a jit function's source: it must live in a file
    path.write_text(textwrap.dedent(source))
    spec = importlib.util.spec_from_file_location(f"answer_{name}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return getattr(module, name)


def test_the_hard_coded_answer_really_passes_only_the_visible_cases(tmp_path):
    from cutecourse.grading.checks import l04_tiled_copy as L

    fn = _function(HARD_CODED_4_3, "split", tmp_path)
    assert checks.split.run(fn).startswith(checks.PASS)
    assert L.split_hint(64, 128, 32, 256, fn(64, 128, 32, 256)) is not None


@pytest.mark.parametrize("exercise, check, hint", [
    ("4.1", "tv_for", "128 // 16"), ("4.3", "split", "128-bit vector"),
])
def test_every_cpu_check_fails_a_wrong_answer_with_a_hint(capsys, tmp_path, exercise, check, hint):
    assert getattr(checks, check)(_function(WRONG[exercise], check, tmp_path)) is False
    line = capsys.readouterr().out
    assert line.startswith(f"✗ {check}: ") and line.count("\n") == 1 and hint in line, line


def test_partly_right_submission_scores_exactly_its_points(tmp_path):
    # 4.1 right (check + hidden), 4.3 hard-coded (check only).
    report = submit(tmp_path, {"4.1": solution("4.1"), "4.3": HARD_CODED_4_3})
    got = {e: report.exercises()[e][0] for e in ("4.1", "4.3")}
    assert got == {"4.1": 3.0, "4.3": 1.0}, reports.summary(report)


def test_every_check_and_hidden_test_fails_on_a_wrong_answer(tmp_path):
    report = submit(tmp_path, WRONG)
    assert report.score == 0, reports.summary(report)
    assert_failed(report, ["tv_for_on_random_dtypes_and_shapes", "split_has_the_properties_on_random_tiles"],
                  ["tv_for", "split"])
