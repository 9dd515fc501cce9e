"""Submissions made from the demo course's exercise notebook, for the grading tests."""

from __future__ import annotations

from pathlib import Path
from typing import Callable

import pytest

from cutecourse.grading import build, grader, reports
from cutecourse.grading import notebook as nbio

DEMO = Path(__file__).parent / "demo"


@pytest.fixture(scope="session")
def demo_course() -> grader.Course:
    return grader.Course.at(DEMO, DEMO / "hidden")


@pytest.fixture(scope="session")
def make_submission(tmp_path_factory: pytest.TempPathFactory) -> Callable[..., Path]:
    """make_submission(name, {"0.1": code}, edit=fn) -> the exercise notebook with those answers filled in."""
    root = tmp_path_factory.mktemp("submissions")

    def make(name: str, answers: dict[str, str], edit: Callable[[dict], None] | None = None) -> Path:
        nb = build.filled(nbio.load(DEMO / "exercises" / "00_demo.ipynb"), answers)
        if edit:
            edit(nb)
        folder = root / name
        folder.mkdir()
        path = folder / "00_demo.ipynb"
        nbio.dump(nb, path)
        return path

    return make


SOLUTION_0_1 = """
def row_major_strides(shape):
    strides, step = [], 1
    for extent in reversed(shape):
        strides.append(step)
        step *= extent
    return tuple(reversed(strides))
"""

WRONG_0_1 = """
def row_major_strides(shape):
    return tuple(1 for _ in shape)
"""


ROOT = Path(__file__).resolve().parents[2]


def statuses(report: grader.Report) -> dict[str, str]:
    """Each test's status, by its name without the points suffix."""
    return {t.name.split(" (")[0]: t.status for t in report.tests}


def assert_failed(report: grader.Report, hidden: list[str], checks: list[str]) -> None:
    """Every named hidden test failed, and every named check too."""
    state = statuses(report)
    expected = {f"hidden test_{t}" for t in hidden} | {f"check {c}" for c in checks}
    assert {n: state.get(n) for n in expected} == {n: grader.FAILED for n in expected}, reports.summary(report)


def lesson_solution(lesson: str, exercise: str) -> str:
    """The answer cell of `exercise` in the course's solution notebook of `lesson`, markers included."""
    return nbio.source(nbio.answers(nbio.load(ROOT / "solutions" / f"{lesson}.ipynb"))[exercise])


def grade_lesson(tmp_path: Path, lesson: str, answers: dict[str, str], timeout: float = 60) -> grader.Report:
    """Grade `lesson`'s exercise notebook with these answers filled in, against the course in this repository."""
    path = tmp_path / f"{lesson}.ipynb"
    nbio.dump(build.filled(nbio.load(ROOT / "exercises" / f"{lesson}.ipynb"), answers), path)
    return grader.grade(path, grader.Course.at(ROOT), timeout=timeout)


def jailed() -> bool:
    """Whether this machine grades in bubblewrap; on CI it must (a missing bwrap is a set-up error there)."""
    import os

    from cutecourse.grading import isolation

    try:
        kind = isolation.choose("bwrap").kind
    except isolation.IsolationError:
        if os.environ.get("CI"):
            raise
        return False
    return kind == "bwrap"
