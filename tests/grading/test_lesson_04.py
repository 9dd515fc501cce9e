"""Lesson 4 (tiled copy, vectorization, predication, sectors): a partly right submission scores exactly its points,
every check and hidden test fails on a wrong answer with a hint, and an answer calling what its exercise forbids
scores 0 there. (The kernel exercise 4.2 has its own tests, in test_kernel_exercises.py.)"""

from __future__ import annotations

from pathlib import Path

import pytest

from cutecourse.grading import checks, grader, reports

from .forbidden_calls import assert_forbidden_calls_score_zero, assert_right_but_forbidden
from .submissions import answer_from_file, assert_failed, grade_lesson, lesson_solution

LESSON = "04_tiled_copy"

pytestmark = pytest.mark.slow


def solution(exercise: str) -> str:
    return lesson_solution(LESSON, exercise)


def submit(tmp_path: Path, answers: dict[str, str], exercises: set[str] | None = None) -> grader.Report:
    return grade_lesson(tmp_path, LESSON, answers, timeout=120, exercises=exercises)


# Each wrong answer makes one classic mistake; the check's hint points at it.
WRONG = {
    # four values per row whatever the dtype: right for fp32 only
    "4.1": """
def tv_owner(dtype_bits, thr_shape, thr_order, values_m, m, n):
    (rows, cols), (row, col) = thr_shape, (m // values_m, n // 4)
    thread = row * cols + col if thr_order == (1, 0) else row + col * rows
    return thread, (m % values_m) * 4 + n % 4
""",
    # one scalar per thread, warps along rows
    "4.3": """
def split(tile_m, tile_n, dtype_bits, threads):
    return (threads // 32, 32), (1, 1)
""",
    # the thread grid read row-major whatever thr_order says
    "4.4": """
def warp_sectors(dtype_bits, thr_shape, thr_order, values_m, pitch, warp):
    sectors, lines = set(), set()
    for thread in range(32 * warp, 32 * warp + 32):
        row, col = divmod(thread, thr_shape[1])
        first = row * values_m * pitch * dtype_bits // 8 + col * 16
        sectors |= {first // 32, (first + 15) // 32}
        lines |= {first // 128, (first + 15) // 128}
    return len(sectors), len(lines)
""",
}
# 4.3 answered only for the check's visible cases: the check passes, the hidden test does not.
HARD_CODED_4_3 = """
def split(tile_m, tile_n, dtype_bits, threads):
    return {(32, 128, 32, 256): ((8, 32), (1, 4)), (64, 64, 16, 128): ((16, 8), (1, 8)),
            (16, 256, 8, 64): ((4, 16), (1, 16)), (96, 48, 64, 256): ((32, 8), (1, 2)),
            (8, 512, 16, 512): ((8, 64), (1, 8))}.get((tile_m, tile_n, dtype_bits, threads), ((1, threads), (1, 1)))
"""


def test_the_hard_coded_answer_really_passes_only_the_visible_cases(tmp_path):
    from cutecourse.grading.checks import l04_tiled_copy as L

    fn = answer_from_file(tmp_path, HARD_CODED_4_3, "split")
    assert checks.split.run(fn).startswith(checks.PASS)
    assert L.split_hint(64, 128, 32, 256, fn(64, 128, 32, 256)) is not None


@pytest.mark.parametrize("exercise, check, hint", [
    ("4.1", "tv_owner", "128 // 16 = 8"), ("4.3", "split", "128-bit vector"),
    ("4.4", "warp_sectors", "that is the warp of a thread layout ordered (1, 0)"),
])
def test_every_cpu_check_fails_a_wrong_answer_with_a_hint(capsys, tmp_path, exercise, check, hint):
    assert getattr(checks, check)(answer_from_file(tmp_path, WRONG[exercise], check)) is False
    line = capsys.readouterr().out
    assert line.startswith(f"✗ {check}: ") and line.count("\n") == 1 and hint in line, line


def test_partly_right_submission_scores_exactly_its_points(tmp_path):
    # 4.1 and 4.4 right (check + hidden), 4.3 hard-coded (check only). (4.2: test_kernel_exercises.py)
    answers = {"4.1": solution("4.1"), "4.3": HARD_CODED_4_3, "4.4": solution("4.4")}
    report = submit(tmp_path, answers, exercises=set(answers))  # 4.2, the kernel, untouched: not graded here
    got = {e: report.exercises()[e][0] for e in ("4.1", "4.3", "4.4")}
    assert got == {"4.1": 3.0, "4.3": 1.0, "4.4": 3.0}, reports.summary(report)


def test_every_check_and_hidden_test_fails_on_a_wrong_answer(tmp_path):
    report = submit(tmp_path, WRONG)
    assert report.score == 0, reports.summary(report)
    hidden = ["tv_owner_on_random_dtypes_threads_and_elements", "split_has_the_properties_on_random_tiles",
              "warp_sectors_on_random_grids_pitches_and_warps"]
    assert_failed(report, hidden, ["tv_owner", "split", "warp_sectors"])


def test_the_owner_hint_names_a_column_major_thread_layout(tmp_path):
    row_major_only = """
def tv_owner(dtype_bits, thr_shape, thr_order, values_m, m, n):
    v = 128 // dtype_bits
    return (m // values_m) * thr_shape[1] + n // v, (m % values_m) * v + n % v
"""
    line = checks.tv_owner.run(answer_from_file(tmp_path, row_major_only, "tv_owner"))
    assert line.startswith(checks.FAIL) and "column-major" in line, line


# Right answers through what 4.1 and 4.4 forbid: the eager TV layout, inverted, and evaluated.
CALLS_PACKAGE = {"4.1": """
import cutecourse.layout as L
def tv_owner(dtype_bits, thr_shape, thr_order, values_m, m, n):
    tiler, tv = L.make_layout_tv(L.make_ordered_layout(thr_shape, order=thr_order),
                                 L.make_ordered_layout((values_m, 128 // dtype_bits), order=(1, 0)))
    i = L.right_inverse(tv)(m + n * tiler[0])  # (thread, value) in colexicographic order: thread fastest
    threads = thr_shape[0] * thr_shape[1]
    return i % threads, i // threads
""", "4.4": """
import cutecourse.layout as L
def warp_sectors(dtype_bits, thr_shape, thr_order, values_m, pitch, warp):
    tiler, tv = L.make_layout_tv(L.make_ordered_layout(thr_shape, order=thr_order),
                                 L.make_ordered_layout((values_m, 128 // dtype_bits), order=(1, 0)))
    firsts = [((tv((t, 0)) % tiler[0]) * pitch + tv((t, 0)) // tiler[0]) * dtype_bits // 8
              for t in range(32 * warp, 32 * warp + 32)]
    return len({b // 32 for f in firsts for b in (f, f + 15)}), len({b // 128 for f in firsts for b in (f, f + 15)})
"""}


@pytest.mark.parametrize("exercise", sorted(CALLS_PACKAGE))
def test_calling_the_package_would_be_right_and_calls_what_the_exercise_forbids(tmp_path, exercise):
    assert_right_but_forbidden(tmp_path, LESSON, exercise, CALLS_PACKAGE[exercise])


def test_a_submission_that_calls_the_package_scores_zero(tmp_path):
    assert_forbidden_calls_score_zero(tmp_path, LESSON, CALLS_PACKAGE)
