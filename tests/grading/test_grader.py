"""`cutecourse grade` on the demo course: honest scores for right, wrong, partial, cheating and crashing answers."""

from __future__ import annotations

import json
import shutil
import sys
import tempfile

import pytest

from cutecourse import env
from cutecourse.cli import main
from cutecourse.grading import grader, reports
from cutecourse.grading import notebook as nbio

from .jail import needs_jail
from .submissions import DEMO, SOLUTION_0_1, WRONG_0_1, statuses

pytestmark = pytest.mark.slow
TIMEOUT = 10
GPU = env.gpu_missing(80) is None
EXPECTED_LINE = 'print("✓ row_major_strides: all 5 cases pass")'


def solution_answers() -> dict[str, str]:
    return {e: nbio.source(c) for e, c in nbio.answers(nbio.load(DEMO / "solutions" / "00_demo.ipynb")).items()}


def points_01(report: grader.Report) -> tuple[float, float]:
    return report.exercises()["0.1"]


@pytest.fixture(scope="module")
def grade(demo_course, make_submission):
    cache: dict[str, grader.Report] = {}

    def run(name: str, answers: dict[str, str], edit=None) -> grader.Report:
        if name not in cache:
            cache[name] = grader.grade(make_submission(name, answers, edit), demo_course, timeout=TIMEOUT)
        return cache[name]

    return run


def test_solution_scores_every_point_this_machine_can_run(grade):
    report = grade("solution", solution_answers())
    state = statuses(report)
    assert state["hidden test_scale_kernel_on_random_lengths_and_alphas"] == ("passed" if GPU else "not run")
    assert state["check scale"] == ("passed" if GPU else "not run")
    # Tests not run count toward the maximum: a CPU machine cannot award the kernel's points.
    assert report.max_score == 7 and report.score == (7 if GPU else 3), reports.summary(report)
    assert any(n.startswith("isolation: ") for n in report.notes)


def test_untouched_exercise_scores_zero(grade):
    report = grade("untouched", {})
    assert report.score == 0 and report.max_score > 0, reports.summary(report)


def test_hard_coded_visible_cases_get_exactly_the_check_point(grade):
    hard_coded = """
    def row_major_strides(shape):
        return {(4, 8): (8, 1), (2, 3, 4): (12, 4, 1), (5,): (1,), (1, 7): (7, 1), (3, 1, 2, 2): (4, 4, 2, 1)}[shape]
    """
    report = grade("partial", {"0.1": hard_coded})
    state = statuses(report)
    assert state["hidden test_row_major_strides_on_random_shapes"] == "failed"
    assert points_01(report) == (1.0, 3.0), reports.summary(report)


CHEATS = {
    "redefined_check": WRONG_0_1 + "\nchecks.row_major_strides = lambda fn: " + EXPECTED_LINE + " or True\n",
    "printed_expected_line": WRONG_0_1 + "\n" + EXPECTED_LINE + "\n",
    "patched_allclose": WRONG_0_1 + """
import numpy, torch, torch.testing
numpy.allclose = torch.allclose = lambda *a, **k: True
torch.testing.assert_close = lambda *a, **k: None
""",
    "reads_hidden_tests": f"""
def row_major_strides(shape):
    open({str(DEMO / 'hidden' / 'test_00_demo.py')!r}).read()
""" + SOLUTION_0_1.split("\n", 2)[2],
    "imports_the_solution": f"""
import json
_cells = json.load(open({str(DEMO / 'solutions' / '00_demo.ipynb')!r}))["cells"]
exec("".join(next(c["source"] for c in _cells if "row_major_strides(shape)" in "".join(c["source"]))))
""",
    "os_exit": "import os\nos._exit(0)\n" + SOLUTION_0_1,
    "sys_exit": "raise SystemExit(0)\n" + SOLUTION_0_1,
    "segfault": "import ctypes\ndef row_major_strides(shape):\n    return ctypes.string_at(0)\n",
    "hang": "def row_major_strides(shape):\n    while True:\n        pass\n",
}


@pytest.mark.parametrize("name", sorted(CHEATS))
def test_cheats_and_crashes_score_zero_on_what_they_attack(grade, name):
    report = grade(name, {"0.1": CHEATS[name], "0.2": solution_answers()["0.2"]})
    assert points_01(report)[0] == 0, reports.summary(report)
    assert points_01(report)[1] > 0


def test_a_crash_in_one_exercise_leaves_the_other_graded(grade):
    report = grade("segfault", {"0.1": CHEATS["segfault"], "0.2": solution_answers()["0.2"]})
    assert report.exercises()["0.2"] == ((4.0, 4.0) if GPU else (0.0, 4.0)), reports.summary(report)


def test_editing_or_deleting_check_cells_does_not_change_the_grade(grade):
    def gut_checks(nb):
        for cell in nbio.checks(nb):
            nbio.set_source(cell, EXPECTED_LINE)

    def delete_checks(nb):
        nb["cells"] = [c for c in nb["cells"] if not nbio.is_check(c)]

    right = grade("right_gutted_checks", {"0.1": SOLUTION_0_1}, edit=gut_checks)
    wrong = grade("wrong_deleted_checks", {"0.1": WRONG_0_1}, edit=delete_checks)
    assert points_01(right)[0] == points_01(right)[1] > 0
    assert points_01(wrong)[0] == 0


def test_the_same_submission_gets_the_same_report(grade, demo_course):
    first = grade("wrong", {"0.1": WRONG_0_1})
    again = grader.grade(first.submission, demo_course, timeout=TIMEOUT)
    assert reports.results_json([first]) == reports.results_json([again])


def test_unreadable_submission_still_gets_a_report(demo_course, tmp_path):
    bad = tmp_path / "00_demo.ipynb"
    bad.write_text("{not json")
    report = grader.grade(bad, demo_course)
    assert report.score == 0 and "submission rejected: cannot read 00_demo.ipynb" in report.tests[0].output


def test_cli_writes_all_four_reports_and_sets_the_exit_code(demo_course, make_submission, tmp_path):
    good = make_submission("cli_good", solution_answers())
    args = ["grade", "--course", str(demo_course.root), "--hidden", str(demo_course.hidden), "--timeout", "60"]
    # Every point of the maximum earned here, or exit 1: on a CPU the kernel's points are not earned...
    assert main(args + [str(good), "--out", str(tmp_path / "good")]) == (0 if GPU else 1)
    # ... unless they are graded elsewhere, and then they are not claimed.
    assert main(args + [str(good), "--out", str(tmp_path / "good"), "--gpu-graded-elsewhere"]) == 0
    results = json.loads((tmp_path / "good" / "results.json").read_text())
    assert results["score"] == results["max_score"] == (7 if GPU else 3)
    assert "isolation: " in results["output"] and results["extra_data"]["isolation"]
    assert (tmp_path / "good" / "junit.xml").read_text().startswith("<?xml")
    assert (tmp_path / "good" / "grades.csv").read_text().splitlines()[0].startswith("submission,lesson,score")
    bad = make_submission("cli_bad", {"0.1": WRONG_0_1})
    assert main(args + [str(bad), "--hidden-only", "--out", str(tmp_path / "bad"), "--exercise", "0.1"]) == 1
    assert (tmp_path / "good" / "summary.md").read_text().startswith("| submission | lesson | points |")


@needs_jail
def test_the_cli_refuses_before_any_grade_where_a_jail_would_see_the_hidden_tests(demo_course, make_submission,
                                                                                   tmp_path, monkeypatch, capsys):
    """An instructor's folder on PYTHONPATH that also holds the hidden tests: bubblewrap binds what the grader imports
    from, so the learner's code would read them. The batch stops with the fix, before any submission is graded."""
    hidden = tmp_path / "prof" / "hidden"
    shutil.copytree(demo_course.hidden, hidden)
    monkeypatch.setattr(sys, "path", [*sys.path, str(tmp_path / "prof")])
    good = make_submission("refused_setup", solution_answers())
    args = ["grade", str(good), "--course", str(demo_course.root), "--hidden", str(hidden), "--out", str(tmp_path)]
    assert main(args) == 2
    said = capsys.readouterr().err
    assert f"holds {hidden}" in said and f"take {tmp_path / 'prof'} off PYTHONPATH" in said
    assert not (tmp_path / "results.json").exists()


@needs_jail
def test_a_temporary_folder_too_deep_for_the_kernels_sockets_is_named_with_the_fix(demo_course, make_submission,
                                                                                    tmp_path, monkeypatch):
    """The notebook kernel talks over Unix sockets in the grade's folder, and a socket's path has at most 107 bytes:
    under a deep TMPDIR the kernel could never answer, and each check only timed out."""
    deep = tmp_path / ("d" * 60)
    deep.mkdir()
    monkeypatch.setenv("TMPDIR", str(deep))
    monkeypatch.setattr(tempfile, "tempdir", str(deep))
    report = grader.grade(make_submission("deep_tmpdir", solution_answers()), demo_course, exercise="0.1",
                          timeout=TIMEOUT)
    check = next(t for t in report.tests if t.name.startswith("check"))
    assert "set TMPDIR to a shorter folder, e.g. TMPDIR=/tmp" in check.output, check.output
    assert [t.status for t in report.tests if t.name.startswith("hidden")] == ["passed"]


def test_one_exercise_exits_zero_only_when_its_points_were_earned_here(demo_course, make_submission, tmp_path):
    """A CPU CI step for the kernel exercise cannot earn its GPU points: it fails, unless told they are graded on a
    GPU elsewhere, and then it claims only its CPU points (none, for 0.2)."""
    good = make_submission("one_exercise", solution_answers())
    args = ["grade", str(good), "--course", str(demo_course.root), "--hidden", str(demo_course.hidden),
            "--out", str(tmp_path / "out"), "--exercise", "0.2"]
    assert main(args) == (0 if GPU else 1)
    report = grader.grade(good, demo_course, exercise="0.1", timeout=TIMEOUT)
    assert {t.exercise for t in report.tests} == {"0.1"} and report.score == report.max_score == 3


def test_the_lesson_comes_from_the_file_name_or_the_command_line_never_the_notebook(demo_course, make_submission,
                                                                                   tmp_path):
    def claim_other_lesson(nb):
        nb["metadata"]["cutecourse"] = {"lesson": "99_worth_more"}

    named = make_submission("metadata_lesson", solution_answers(), edit=claim_other_lesson)
    assert grader.grade(named, demo_course, timeout=TIMEOUT, hidden=False).lesson == "00_demo"
    renamed = tmp_path / "my_work.ipynb"
    renamed.write_bytes(named.read_bytes())
    rejected = grader.grade(renamed, demo_course, timeout=TIMEOUT)
    assert rejected.score == 0 and "names no lesson of this course" in rejected.tests[0].output
    assert grader.grade(renamed, demo_course, timeout=TIMEOUT, lesson="00_demo", hidden=False).score == 1


def test_a_notebook_cell_nbval_failed_is_reported_with_why():
    """nbval's message starts with the same line for every failed cell; the report keeps the line that says why (a
    timeout, here as pytest's JUnit XML writes it, colours escaped)."""
    import xml.etree.ElementTree as ET

    from cutecourse.grading import pytest_run, results

    case = ET.fromstring(
        '<testcase name="Cell 12"><failure message="#x1B[91mNotebook cell execution failed#x1B[0m&#10;#x1B[94mCell 12: '
        'Timeout of 20 seconds exceeded executing cell&#10;&#10;Input:&#10;#x1B[0mring_schedule(...)"/></testcase>')
    assert pytest_run.outcome(case) == (results.FAILED, "Notebook cell execution failed: Cell 12: Timeout of 20 "
                                                        "seconds exceeded executing cell")
    other = ET.fromstring('<testcase name="t"><failure message="AssertionError: 2 != 3&#10;more"/></testcase>')
    assert pytest_run.outcome(other) == (results.FAILED, "AssertionError: 2 != 3")
