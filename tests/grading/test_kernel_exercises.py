"""The kernel exercises 3.2 (a batched transpose through a padded shared-memory tile) and 4.2 (a predicated,
vectorized fp32 -> 16-bit cast): the grader compiles and launches the learner's host itself, so a kernel earns its
points only for what it compiles to and computes; the package's own kernels, submitted as answers, earn none; each
check and hidden test fails a kernel with the classic mistake; a partly right kernel scores exactly its points."""

from __future__ import annotations

import inspect
import re
import textwrap

import pytest

from cutecourse import env
from cutecourse.grading import checks, reports, results

from .submissions import answer_from_file, assert_failed, edited, grade_lesson, lesson_solution, statuses

pytestmark = pytest.mark.slow
GPU = env.gpu_missing(80) is None
L3, L4 = "03_tensors_partitioning", "04_tiled_copy"
SOLUTION_3_2, SOLUTION_4_2 = lesson_solution(L3, "3.2"), lesson_solution(L4, "4.2")


# 3.2 without its predicate on the write: right on whole tiles, out of bounds on the edges of any other shape.
TRANSPOSE_UNGUARDED = edited(SOLUTION_3_2, ("        if cute.elem_less(tDc[i], shape):\n            tDg[i] = tDs[i]",
                                           "        tDg[i] = tDs[i]"))
# 3.2 without the barrier between the two phases.
TRANSPOSE_UNSYNCED = edited(SOLUTION_3_2, ("    cute.arch.sync_threads()\n", ""))
# 3.2 whose write bound is one column short: the last column of each S (last row of each D) is never written.
TRANSPOSE_LAST_COLUMN_LOST = edited(SOLUTION_3_2, ("cute.elem_less(tDc[i], shape)",
                                                   "cute.elem_less(tDc[i], (shape[0], shape[1] - 1))"))
# 4.2 one element per thread: right values, but not the 128-bit loads the exercise asks for.
CAST_SCALAR = edited(SOLUTION_4_2, ("THR_M, THR_N, VEC = 8, 32, 4", "THR_M, THR_N, VEC = 8, 32, 1"))
# 4.2 without the predicate: out of bounds on the edge tiles.
CAST_UNGUARDED = edited(SOLUTION_4_2, ("cute.copy(load, tAgA, regs, pred=pred)", "cute.copy(load, tAgA, regs)"),
                        ("cute.copy(store, out, tBgB, pred=pred)", "cute.copy(store, out, tBgB)"))
# 4.2 whose bound is one column short: the last vector of each row is never written.
CAST_LAST_VECTOR_LOST = edited(SOLUTION_4_2, ("i // atoms)], shape)", "i // atoms)], (shape[0], shape[1] - 4))"))


def package_kernel(module: object, kernel: str, name: str) -> str:
    """A package kernel's source under the exercise's kernel name, in an answer cell (cute and cutlass only)."""
    source = textwrap.dedent(inspect.getsource(getattr(module, kernel)))
    return "import cutlass\nimport cutlass.cute as cute\n\n" + re.sub(rf"\b{kernel}\b", name, source)


@pytest.mark.parametrize("source, check, host, hint", [
    (TRANSPOSE_UNGUARDED, "batched_ptx", "batched_host", "not guarded by a predicate"),
    (TRANSPOSE_UNSYNCED, "batched_ptx", "batched_host", "no barrier"),
    (CAST_SCALAR, "cast_ptx", "cast_host", "moves single elements"),
    (CAST_UNGUARDED, "cast_ptx", "cast_host", "not behind a predicate"),
])
def test_the_ptx_checks_fail_the_classic_mistakes_with_a_hint(capsys, tmp_path, source, check, host, hint):
    assert getattr(checks, check)(answer_from_file(tmp_path, source, host)) is False
    line = capsys.readouterr().out.strip().splitlines()[-1]
    assert line.startswith(f"✗ {check}: ") and hint in line, line


def test_the_checks_refuse_a_host_that_is_not_a_jit_function(capsys):
    def cast_host(a, b, stream):  # a launch wrapper in torch, as a learner might write
        b.copy_(a)

    assert checks.cast_ptx(cast_host) is False
    assert "decorate it with @cute.jit" in capsys.readouterr().out


def test_the_solutions_score_exactly_their_points_here(tmp_path):
    for lesson, exercise, answer in ((L3, "3.2", SOLUTION_3_2), (L4, "4.2", SOLUTION_4_2)):
        report = grade_lesson(tmp_path, lesson, {exercise: answer}, timeout=300, exercises={exercise}, shared=True)
        # A PTX check and a PTX hidden test on any machine; a GPU check and the 3-point GPU test on a GPU.
        assert report.exercises()[exercise] == ((6.0 if GPU else 2.0), 6.0), reports.summary(report)


def test_the_packages_own_kernels_earn_nothing(tmp_path):
    from cutecourse.kernels import copy_predicated, transpose

    # The lesson's 2-D transpose (the package's naive step) with the host it is launched by: no batch mode, no
    # shared memory. The package's predicated copy: one dtype in and out, so no conversion.
    naive = package_kernel(transpose, "_naive_kernel", "batched_kernel") + '''

@cute.jit
def batched_host(mS: cute.Tensor, mD: cute.Tensor, stream):
    mDT = cute.make_tensor(mD.iterator, cute.select(mD.layout, mode=[1, 0]))
    gS, gDT = cute.zipped_divide(mS, (32, 32)), cute.zipped_divide(mDT, (32, 32))
    cS = cute.zipped_divide(cute.make_identity_tensor(mS.shape), (32, 32))
    thr_layout = cute.make_ordered_layout((8, 32), order=(1, 0))
    grid = (cute.size(gS, mode=[1, 0]), cute.size(gS, mode=[1, 1]), 1)
    batched_kernel(gS, gDT, cS, mS.shape, thr_layout).launch(grid=grid, block=(256, 1, 1), stream=stream)
'''
    copy = package_kernel(copy_predicated, "_kernel", "cast_kernel") + textwrap.dedent(
        inspect.getsource(copy_predicated.host)).replace("def host(", "def cast_host_any(").replace(
        "_kernel(", "cast_kernel(") + '''

@cute.jit
def cast_host(mA: cute.Tensor, mB: cute.Tensor, stream):
    cast_host_any(mA, mB, stream, 4)
'''
    for lesson, exercise, answer in ((L3, "3.2", naive), (L4, "4.2", copy)):
        report = grade_lesson(tmp_path, lesson, {exercise: answer}, timeout=300, exercises={exercise})
        assert report.exercises()[exercise][0] == 0, reports.summary(report)


def test_every_cpu_check_and_hidden_test_fails_the_wrong_kernels(tmp_path):
    report = grade_lesson(tmp_path, L3, {"3.2": TRANSPOSE_UNSYNCED}, timeout=300, exercises={"3.2"})
    assert_failed(report, ["batched_transpose_ptx_for_every_dtype_and_arch"], ["batched_ptx"])
    report = grade_lesson(tmp_path, L4, {"4.2": CAST_SCALAR}, timeout=300, exercises={"4.2"})
    assert_failed(report, ["cast_ptx_for_both_dtypes_and_archs"], ["cast_ptx"])


@pytest.mark.gpu(80)
def test_on_a_gpu_a_kernel_that_loses_the_last_column_keeps_only_its_ptx_points(tmp_path):
    for lesson, exercise, answer, hidden, check in (
            (L3, "3.2", TRANSPOSE_LAST_COLUMN_LOST, "batched_transpose_on_random_batches_and_dtypes",
             "transpose_batched"),
            (L4, "4.2", CAST_LAST_VECTOR_LOST, "cast_on_random_shapes_and_dtypes", "cast_copy")):
        report = grade_lesson(tmp_path, lesson, {exercise: answer}, timeout=300, exercises={exercise})
        assert_failed(report, [hidden], [check])
        assert report.exercises()[exercise] == (2.0, 6.0), reports.summary(report)
        assert "never written" in next(t.output for t in report.tests if t.name == f"hidden test_{hidden}")


@pytest.mark.gpu(80)
def test_on_a_gpu_a_kernel_without_predicate_fails_and_the_grader_survives(tmp_path):
    report = grade_lesson(tmp_path, L3, {"3.2": TRANSPOSE_UNGUARDED, "3.1": lesson_solution(L3, "3.1")}, timeout=300,
                          exercises={"3.1", "3.2"})
    state = statuses(report)
    assert state["hidden test_batched_transpose_on_random_batches_and_dtypes"] == results.FAILED
    assert report.exercises()["3.1"] == (3.0, 3.0), reports.summary(report)
