"""The grading tests' fixtures (the demo course, submissions made from its exercise notebook, the session's shared
reports) and hooks (a test that needs the grader's jail where none can be made is skipped, not failed)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Callable

import pytest

from cutecourse.grading import build, grader, isolation
from cutecourse.grading import notebook as nbio

from . import submissions
from .jail import NO_JAIL
from .submissions import DEMO


@pytest.fixture(scope="session", autouse=True)
def shared_reports(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The folder where submissions.graded keeps this session's reports: under xdist, the session's base folder, which
    every worker shares (each worker's own is a folder in it), so a report one worker graded is read by the others."""
    base = tmp_path_factory.getbasetemp()
    folder = (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / "shared_reports"
    folder.mkdir(exist_ok=True)
    submissions.SHARED_REPORTS = folder
    yield folder
    submissions.SHARED_REPORTS = None


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


def _skip_if_no_jail():
    """A test that grades learner code needs a jail: where none can be made (and the grader is not root, so it has no
    fallback either), the grader refuses with IsolationError; the test is then skipped with NO_JAIL, not failed."""
    try:
        return (yield)
    except isolation.IsolationError:
        if NO_JAIL is None:
            raise
        pytest.skip(NO_JAIL)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item):  # a module's shared grade is a fixture
    return (yield from _skip_if_no_jail())


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item):
    return (yield from _skip_if_no_jail())
