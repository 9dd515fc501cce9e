"""Submissions made from the demo course's exercise notebook, for the grading tests."""

from __future__ import annotations

from pathlib import Path
from typing import Callable

import pytest

from cutecourse.grading import build, grader
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
