"""Checks print one line: a pass on a right answer, and on a wrong one a hint that does not give the answer away."""

import sys

import pytest

from cutecourse import env

from cutecourse.grading import checks
from cutecourse.grading.checks import l05_tiled_mma as L5


def right(shape):
    out, step = [], 1
    for extent in reversed(shape):
        out.append(step)
        step *= extent
    return tuple(reversed(out))


def test_right_answer_passes_with_one_line(capsys):
    assert checks.row_major_strides(right) is True
    assert capsys.readouterr().out == "✓ row_major_strides: all 5 cases pass\n"


@pytest.mark.parametrize("wrong, hint", [
    (lambda shape: tuple(1 for _ in shape), "skip a whole row"),
    (lambda shape: right(shape)[::-1], "last mode is contiguous"),
    (lambda shape: list(right(shape)), "expected a tuple of"),
    (lambda shape: 1 / 0, "raised ZeroDivisionError"),
])
def test_wrong_answers_fail_with_a_hint_and_without_the_answer(capsys, wrong, hint):
    assert checks.row_major_strides(wrong) is False
    line = capsys.readouterr().out
    assert line.startswith("✗ row_major_strides: ") and line.count("\n") == 1
    assert hint in line
    assert "(8, 1)" not in line  # the expected strides of the first case are never printed


def test_not_a_function_fails():
    assert checks.row_major_strides.run(42).startswith("✗ row_major_strides: expected the function")


def test_gpu_check_says_not_run_without_a_gpu():
    if env.gpu_missing(80) is None:
        pytest.skip("this machine has a GPU")
    assert checks.scale.run(lambda *a: None).startswith("– scale: not run (")


def test_relative_error_treats_unwritten_outputs_as_infinitely_wrong():
    np = pytest.importorskip("numpy")
    assert checks.relative_error(np.array([1.0, np.nan]), np.array([1.0, 2.0])) == float("inf")
    assert checks.relative_error(np.array([1.0, 2.0]), np.array([1.0, 2.0])) == 0.0
    assert checks.relative_error(np.ones(3), np.ones(4)) == float("inf")


def test_a_judge_that_trips_on_an_answer_fails_it_instead_of_raising():
    def judge(case, value, outputs):
        return {1: None}[value]  # KeyError on any value but 1

    check = checks.Check("fragile", "f", lambda: [(0,)], judge)
    assert check.run(lambda x: 1).startswith("✓ fragile")
    line = check.run(lambda x: 2)
    assert line.startswith("✗ fragile: f(0): the check could not judge 2 (KeyError: 2)"), line


def test_a_check_may_not_take_the_name_of_a_helper_of_the_checks_module(tmp_path, monkeypatch):
    (tmp_path / "l99_clash.py").write_text(
        "from cutecourse.grading.checks import Check\n"
        "clash = Check('rounded', 'rounded', lambda: [], lambda case, value, outputs: None)\n")
    monkeypatch.setattr(checks, "__path__", [*checks.__path__, str(tmp_path)])
    try:
        with pytest.raises(RuntimeError, match="check 'rounded' has the name of cutecourse.grading.checks.rounded"):
            checks._discover()
    finally:
        sys.modules.pop("cutecourse.grading.checks.l99_clash", None)
    assert checks.rounded.__name__ == "rounded"  # still the helper


def test_the_kernel_ptx_checks_compile_each_dtype_and_arch_of_the_hidden_grid_once():
    """AUTHORING: a kernel's PTX check compiles each 16-bit dtype and each arch once; its hidden test, the grid."""
    grid = L5.PTX_GRID
    assert set(L5.CHECK_PTX_CASES) <= set(grid)
    for axis in (0, 1):
        assert sorted(case[axis] for case in L5.CHECK_PTX_CASES) == sorted({case[axis] for case in grid})
