"""For every exercise notebook of the course: its solution scores every point this machine can run, and the
untouched exercise scores nothing. (Partly right submissions are checked per lesson, next to its hidden tests.)"""

from pathlib import Path

import pytest

from cutecourse.grading import build, grader, reports
from cutecourse.grading import notebook as nbio

ROOT = Path(__file__).resolve().parents[2]
COURSE = grader.Course.at(ROOT)
LESSONS = sorted(p.stem for p in (ROOT / "solutions").glob("[0-9][0-9]_*.ipynb"))

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("lesson", LESSONS)
def test_solution_scores_every_runnable_point(lesson, tmp_path):
    submission = tmp_path / f"{lesson}.ipynb"
    nbio.dump(build.as_submitted(nbio.load(ROOT / "solutions" / f"{lesson}.ipynb")), submission)
    report = grader.grade(submission, COURSE, gpu_elsewhere=True)  # the GPU points, where there is no GPU
    assert report.max_score > 0 and report.score == report.max_score, reports.summary(report)


@pytest.mark.parametrize("lesson", LESSONS)
def test_untouched_exercise_scores_zero(lesson):
    report = grader.grade(ROOT / "exercises" / f"{lesson}.ipynb", COURSE)
    assert report.max_score > 0 and report.score == 0, reports.summary(report)
