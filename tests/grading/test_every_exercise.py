"""For every exercise notebook of the course: its solution scores every point this machine can run, and the
untouched exercise scores nothing. (Partly right submissions are checked per lesson, next to its hidden tests.)"""

import pytest

from cutecourse.grading import reports

from .submissions import ROOT, exercise_report, solution_report

LESSONS = sorted(p.stem for p in (ROOT / "solutions").glob("[0-9][0-9]_*.ipynb"))

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("lesson", LESSONS)
def test_solution_scores_every_runnable_point(lesson, tmp_path):
    report = solution_report(tmp_path, lesson)  # the GPU points, where there is no GPU, left to another grader
    assert report.max_score > 0 and report.score == report.max_score, reports.summary(report)


@pytest.mark.parametrize("lesson", LESSONS)
def test_untouched_exercise_scores_zero(lesson):
    report = exercise_report(lesson)
    assert report.max_score > 0 and report.score == 0, reports.summary(report)
