"""`cutecourse grade` on the demo course: honest scores for right, wrong, partial, cheating and crashing answers."""

from __future__ import annotations

import json

import pytest

from cutecourse import env
from cutecourse.cli import main
from cutecourse.grading import grader, reports
from cutecourse.grading import notebook as nbio

from .conftest import DEMO, NBVAL, SOLUTION_0_1, WRONG_0_1, statuses

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
    assert report.max_score > 0 and report.score == report.max_score, reports.summary(report)
    state = statuses(report)
    assert state["hidden test_scale_kernel_on_random_lengths_and_alphas"] == ("passed" if GPU else "not run")
    assert state["check scale"] == ("passed" if GPU and NBVAL else "not run")


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
    assert points_01(report) == ((1.0, 3.0) if NBVAL else (0.0, 2.0)), reports.summary(report)


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
    got, most = report.exercises()["0.2"]
    assert got == most and (most > 0) == GPU


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
    assert report.score == 0 and "cannot read it as a notebook" in report.tests[0].output


def test_cli_writes_all_three_reports_and_sets_the_exit_code(demo_course, make_submission, tmp_path, capsys):
    good = make_submission("cli_good", solution_answers())
    args = ["grade", "--course", str(demo_course.root), "--hidden", str(demo_course.hidden), "--timeout", "60"]
    assert main(args + [str(good), "--out", str(tmp_path / "good")]) == 0
    results = json.loads((tmp_path / "good" / "results.json").read_text())
    assert results["score"] == results["max_score"] > 0
    assert (tmp_path / "good" / "junit.xml").read_text().startswith("<?xml")
    assert (tmp_path / "good" / "grades.csv").read_text().splitlines()[0].startswith("submission,lesson,score")
    bad = make_submission("cli_bad", {"0.1": WRONG_0_1})
    assert main(args + [str(bad), "--hidden-only", "--out", str(tmp_path / "bad"), "--exercise", "0.1"]) == 1
    assert main(args + [str(bad), "--classroom"]) == 0
    assert "cutecourse grade" in capsys.readouterr().out
