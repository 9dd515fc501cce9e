"""Lesson 3 (tensors, views, thread partitioning): a partly right submission scores exactly its points, and every
check and hidden test fails on a wrong answer. (The kernel exercise 3.2 has its own tests, in
test_kernel_exercises.py.)"""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from cutecourse.grading import checks, grader, reports

from .forbidden_calls import assert_forbidden_calls_score_zero, assert_right_but_forbidden
from .submissions import assert_failed, grade_lesson, lesson_solution

LESSON = "03_tensors_partitioning"

pytestmark = pytest.mark.slow


def solution(exercise: str) -> str:
    return lesson_solution(LESSON, exercise)


def submit(tmp_path: Path, answers: dict[str, str], exercises: set[str] | None = None) -> grader.Report:
    return grade_lesson(tmp_path, LESSON, answers, timeout=120, exercises=exercises)


# Each wrong answer makes one classic mistake; the check's hint points at it.
WRONG = {
    # the thread's coordinate as if the thread layout were always row-major
    "3.1": """
def thread_coords(tile_shape, thr_shape, thr_stride, tid):
    (M, N), (a, b) = tile_shape, thr_shape
    r, c = divmod(tid, b)
    return [(r + a * i, c + b * j) for j in range(N // b) for i in range(M // a)]
""",
    # counts elements as if each were one 4-byte word
    "3.3": """
def smem_bank(m, n, col_stride, element_bits):
    return (m + n * col_stride) % 32
""",
    # the same mistake in the wavefront count: every element its own word, whatever its width
    "3.4": """
from collections import Counter
def row_wavefronts(tile_m, pad, element_bits):
    return max(Counter((t * (tile_m + pad)) % 32 for t in range(32)).values())
""",
}
# 3.3 answered only for the check's visible cases: the check passes, the hidden test does not.
HARD_CODED_3_3 = """
def smem_bank(m, n, col_stride, element_bits):
    return {(0, 1, 64, 32): 0, (3, 5, 65, 32): 8, (7, 2, 66, 16): 5, (1, 3, 64, 16): 0, (5, 9, 33, 64): 28,
            (6, 4, 65, 8): 2}.get((m, n, col_stride, element_bits), 0)
"""


def _function(source: str, name: str):
    ns: dict = {}
    exec(textwrap.dedent(source), ns)  # noqa: S102 - our own test code
    return ns[name]


def test_the_hard_coded_answer_really_passes_only_the_visible_cases():
    fn = _function(HARD_CODED_3_3, "smem_bank")
    assert checks.smem_bank.run(fn).startswith(checks.PASS)
    assert fn(1, 1, 65, 32) != 2  # the right bank of (1, 1) in a 65-word column


@pytest.mark.parametrize("exercise, check, hint", [
    ("3.1", "thread_coords", "thr_layout(c) =="), ("3.3", "smem_bank", "4-byte word"),
    ("3.4", "row_wavefronts", "distinct 4-byte words"),
])
def test_every_cpu_check_fails_a_wrong_answer_with_a_hint(capsys, exercise, check, hint):
    assert getattr(checks, check)(_function(WRONG[exercise], check)) is False
    line = capsys.readouterr().out
    assert line.startswith(f"✗ {check}: ") and line.count("\n") == 1 and hint in line, line


def test_a_coordinate_listed_twice_gets_a_hint(capsys):
    """Forgetting to step along m repeats the right coordinates: a hint, not a crash of the check (or the grader)."""
    repeats = """
def thread_coords(tile_shape, thr_shape, thr_stride, tid):
    (M, N), (a, b) = tile_shape, thr_shape
    r, c = (tid // thr_stride[0]) % a, (tid // thr_stride[1]) % b
    return [(r, c + b * j) for j in range(N // b) for i in range(M // a)]
"""
    assert checks.thread_coords(_function(repeats, "thread_coords")) is False
    line = capsys.readouterr().out
    assert line.startswith("✗ thread_coords: ") and "listed twice" in line, line


def test_partly_right_submission_scores_exactly_its_points(tmp_path):
    # 3.1 right (check + hidden), 3.3 hard-coded (check only), 3.4 wrong. (3.2: test_kernel_exercises.py)
    answers = {"3.1": solution("3.1"), "3.3": HARD_CODED_3_3, "3.4": WRONG["3.4"]}
    report = submit(tmp_path, answers, exercises=set(answers))  # 3.2, the kernel, untouched: not graded here
    got = {e: report.exercises()[e][0] for e in ("3.1", "3.3", "3.4")}
    assert got == {"3.1": 3.0, "3.3": 1.0, "3.4": 0.0}, reports.summary(report)


def test_every_check_and_hidden_test_fails_on_a_wrong_answer(tmp_path):
    report = submit(tmp_path, WRONG)
    assert report.score == 0, reports.summary(report)
    assert_failed(report, ["thread_coords_on_random_tiles_and_thread_layouts", "smem_bank_on_random_elements",
                           "row_wavefronts_on_random_tiles_and_paddings"],
                  ["thread_coords", "smem_bank", "row_wavefronts"])


def test_the_wavefront_hint_gives_a_16_bit_phase_its_64_bytes():
    from cutecourse.grading.checks import l03_tensors as L

    assert "(64 bytes each)" in L._judge_wavefronts((64, 1, 16), 99, [])
    assert "(128 bytes each)" in L._judge_wavefronts((64, 1, 32), 99, [])


# Right answers, each through a function its exercise forbids (the DSL's local_partition, the package's bank model).
CALLS_PACKAGE = {
    "3.1": """
import cutlass
import cutlass.cute as cute

@cute.jit
def _coords(tile_shape: cutlass.Constexpr, thr_shape: cutlass.Constexpr, thr_stride: cutlass.Constexpr,
            tid: cutlass.Constexpr, out: cutlass.Constexpr):
    mine = cute.local_partition(cute.make_identity_tensor(tile_shape), cute.make_layout(thr_shape, stride=thr_stride),
                                cutlass.Int32(tid))
    out.extend(tuple(int(x) for x in mine[i]) for i in range(cute.size(mine)))

def thread_coords(tile_shape, thr_shape, thr_stride, tid):
    out = []
    _coords(tile_shape, thr_shape, thr_stride, tid, out)
    return out
""",
    "3.3": """
from cutecourse import viz
def smem_bank(m, n, col_stride, element_bits):
    return viz.bank_of(m + n * col_stride, element_bits)
""",
    "3.4": """
from cutecourse import viz
def row_wavefronts(tile_m, pad, element_bits):
    per = min(32, 1024 // element_bits)
    return viz.wavefronts(f"({tile_m},32):(1,{tile_m + pad})", element_bits,
                          [[(0, t) for t in range(p, p + per)] for p in range(0, 32, per)])
""",
}


@pytest.mark.parametrize("exercise", sorted(CALLS_PACKAGE))
def test_calling_the_package_would_be_right_and_calls_what_the_exercise_forbids(exercise, tmp_path):
    assert_right_but_forbidden(tmp_path, LESSON, exercise, CALLS_PACKAGE[exercise])


def test_a_submission_that_calls_the_package_scores_zero(tmp_path):
    assert_forbidden_calls_score_zero(tmp_path, LESSON, CALLS_PACKAGE)
