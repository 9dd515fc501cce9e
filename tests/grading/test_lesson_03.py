"""Lesson 3 (tensors, views, thread partitioning): a partly right submission scores exactly its points, and every
check and hidden test fails on a wrong answer. The GPU test at the end grades a transpose kernel that never writes
the last column and shows that the GPU check and the hidden kernel test both fail it."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from cutecourse import env
from cutecourse.grading import checks, grader, reports

from .conftest import (NBVAL, assert_failed, assert_forbidden_calls_score_zero, assert_last_column_caught,
                       assert_right_but_forbidden, grade_lesson, lesson_solution, one_column_short, without_predicate)

LESSON = "03_tensors_partitioning"

pytestmark = pytest.mark.slow


def solution(exercise: str) -> str:
    return lesson_solution(LESSON, exercise)


def submit(tmp_path: Path, answers: dict[str, str]) -> grader.Report:
    return grade_lesson(tmp_path, LESSON, answers, timeout=120)


# No predicate: right for shapes that are multiples of 32, out of bounds on the edge tiles of any other.
NO_PREDICATE = without_predicate(solution("3.2"))
# The predicate's bound is one column short: the last column of S (last row of D) is never written.
LAST_COLUMN_LOST = one_column_short(solution("3.2"), "thr_c")

# Each wrong answer makes one classic mistake; the check's hint points at it.
WRONG = {
    # the thread's coordinate as if the thread layout were always row-major
    "3.1": """
def thread_coords(tile_shape, thr_shape, thr_stride, tid):
    (M, N), (a, b) = tile_shape, thr_shape
    r, c = divmod(tid, b)
    return [(r + a * i, c + b * j) for j in range(N // b) for i in range(M // a)]
""",
    "3.2": NO_PREDICATE,
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


def test_the_ptx_check_fails_a_kernel_without_predicate(capsys, tmp_path):
    import importlib.util

    path = tmp_path / "wrong_kernel.py"  # the DSL reads a kernel's source: it must live in a file
    path.write_text(WRONG["3.2"])
    spec = importlib.util.spec_from_file_location("wrong_kernel", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert checks.naive_ptx(module.naive_ptx) is False
    line = capsys.readouterr().out
    assert line.startswith("✗ naive_ptx: ") and "predicate" in line, line


def test_partly_right_submission_scores_exactly_its_points(tmp_path):
    # 3.1 right (check + hidden), 3.2 right (only its CPU check runs here), 3.3 hard-coded (check only), 3.4 wrong.
    report = submit(tmp_path, {"3.1": solution("3.1"), "3.2": solution("3.2"), "3.3": HARD_CODED_3_3,
                               "3.4": WRONG["3.4"]})
    got = {e: report.exercises()[e][0] for e in ("3.1", "3.2", "3.3", "3.4")}
    check = 1.0 if NBVAL else 0.0
    gpu = env.gpu_missing(80) is None
    expected = {"3.1": 2 + check, "3.2": check, "3.3": check, "3.4": 0.0}
    if gpu:
        expected["3.2"] = 2 * check + 3
    assert got == expected, reports.summary(report)


def test_every_check_and_hidden_test_fails_on_a_wrong_answer(tmp_path):
    report = submit(tmp_path, WRONG)
    assert report.score == 0, reports.summary(report)
    assert_failed(report, ["thread_coords_on_random_tiles_and_thread_layouts", "smem_bank_on_random_elements",
                           "row_wavefronts_on_random_tiles_and_paddings"],
                  ["thread_coords", "naive_ptx", "smem_bank", "row_wavefronts"])


@pytest.mark.gpu(80)
def test_gpu_check_and_hidden_test_fail_a_kernel_that_loses_the_last_column(tmp_path):
    report = submit(tmp_path, {"3.2": LAST_COLUMN_LOST})
    assert_last_column_caught(report, "3.2", "naive_transpose_on_random_shapes_and_dtypes", "transpose_naive",
                              "naive_ptx")


@pytest.mark.gpu(80)
def test_solution_kernel_scores_every_point_of_3_2_on_a_gpu(tmp_path):
    report = submit(tmp_path, {"3.2": solution("3.2")})
    assert report.exercises()["3.2"] == ((5.0, 5.0) if NBVAL else (3.0, 3.0)), reports.summary(report)


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
