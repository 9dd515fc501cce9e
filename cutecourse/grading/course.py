"""A course as the grader sees it: where its master exercise notebooks and hidden tests live, which lessons it
assigns, and what a learner's process may not read or write.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

from cutecourse.grading import isolation

#: The package the grader runs from (its checks are denied to learners; its files are fingerprinted).
PACKAGE_DIR = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Course:
    """Where the masters and hidden tests live (the repository, or a course laid out the same way)."""

    root: Path
    hidden: Path

    @classmethod
    def at(cls, root: str | Path, hidden: str | Path | None = None) -> "Course":
        root = Path(root).resolve()
        return cls(root, Path(hidden).resolve() if hidden else root / "tests" / "hidden")

    def master(self, lesson: str) -> Path:
        return self.root / "exercises" / f"{lesson}.ipynb"

    def lessons(self) -> list[str]:
        """The assignments: one per master exercise notebook."""
        return sorted(p.stem for p in (self.root / "exercises").glob("[0-9][0-9]_*.ipynb"))

    def deny(self) -> list[str]:
        """What a learner's process may not read: hidden tests, solutions, the repository's history, the checks."""
        return [str(self.hidden), str(self.root / "solutions"), str(self.root / ".git"),
                *(str(p) for p in isolation.hidden_in_package(PACKAGE_DIR))]

    def read_only(self) -> list[str]:
        """What a learner's process may not write (checked before grading as an unprivileged uid)."""
        return [str(self.root), sys.prefix, str(PACKAGE_DIR)]


def lesson_of(submission: Path, course: Course, lesson: str | None = None) -> str:
    """The lesson a submission answers: `lesson` if given, else the file's name; one of the course's assignments."""
    known = course.lessons()
    name = lesson or submission.stem
    if name not in known:
        where = f"--lesson {lesson}" if lesson else f"the file name {submission.name!r}"
        choices = ", ".join(known) or "none (run cutecourse build)"
        raise ValueError(f"submission rejected: {where} names no lesson of this course; name the file after its "
                         f"exercise notebook or pass --lesson, one of {choices}")
    return name
