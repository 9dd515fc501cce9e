"""One grade's shared state: what its checks' and hidden tests' runs all need (the course, the master, the
submission, the walls, the clock).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cutecourse.grading import isolation, sandbox
from cutecourse.grading.cells import learner_cells
from cutecourse.grading.course import Course


@dataclass
class Grade:
    """What one grade needs in every part: the course, the master, the submission, the walls, the clock."""

    course: Course
    lesson: str
    master: dict[str, Any]
    sub: dict[str, Any]
    walls: isolation.Walls
    gpu: bool
    timeout: float
    deadline: float  # time.monotonic() when the grade's time is up
    exercises: frozenset[str] | None  # None: all of them
    work: Path

    def wanted(self, exercise: str) -> bool:
        return self.exercises is None or exercise in self.exercises

    @functools.cached_property
    def cells(self) -> list[dict[str, str]]:
        """What the plain learner processes run (:func:`learner_cells`): worked out once, before the grade's threads
        start (CPython 3.11's ast is not safe to use from two threads at once)."""
        hidden = self.course.hidden / f"test_{self.lesson}.py"
        return learner_cells(self.master, self.sub, hidden.read_text() if hidden.exists() else "")

    @functools.cached_property
    def preload(self) -> tuple[str, ...]:
        return sandbox.preloads(self.cells)
