"""The results of a grade: each test's status and points (`TestResult`) and a submission's `Report`. Plain data, so
that whatever reads or writes reports loads nothing of the grading machinery.
"""

from __future__ import annotations

from dataclasses import dataclass, field

PASSED = "passed"
FAILED = "failed"
NOT_RUN = "not run"
#: Longest test output kept in a report; the rest is cut, and the cut is said.
MAX_OUTPUT_CHARS = 2000
#: How a hidden test's result is named (run_hidden: "hidden <test>"); the check cells' results are not.
HIDDEN_PREFIX = "hidden "


@dataclass
class TestResult:
    name: str
    exercise: str
    points: float
    status: str
    output: str = ""
    #: A test not run here whose points another grader awards (GPU tests, with --gpu-graded-elsewhere).
    elsewhere: bool = False

    def __post_init__(self) -> None:
        if len(self.output) > MAX_OUTPUT_CHARS:
            self.output = self.output[:MAX_OUTPUT_CHARS] + f"... [cut at {MAX_OUTPUT_CHARS} characters]"

    @property
    def score(self) -> float:
        return self.points if self.status == PASSED else 0.0

    @property
    def hidden(self) -> bool:
        """A hidden test's result: its inputs are ones the learner never saw."""
        return self.name.startswith(HIDDEN_PREFIX)

    @property
    def counted(self) -> float:
        """Points this test adds to the report's maximum."""
        return 0.0 if self.elsewhere else self.points


@dataclass
class Report:
    submission: str
    lesson: str
    tests: list[TestResult] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    isolation: str = ""

    @property
    def score(self) -> float:
        return sum(t.score for t in self.tests)

    @property
    def max_score(self) -> float:
        """Every test's points, run or not, except those graded elsewhere."""
        return sum(t.counted for t in self.tests)

    def exercises(self) -> dict[str, tuple[float, float]]:
        """(score, max score) per exercise id, in order of appearance."""
        totals: dict[str, tuple[float, float]] = {}
        for t in self.tests:
            got, most = totals.get(t.exercise, (0.0, 0.0))
            totals[t.exercise] = (got + t.score, most + t.counted)
        return totals

    def only(self, exercise: str) -> "Report":
        return Report(self.submission, self.lesson, [t for t in self.tests if t.exercise == exercise], self.notes,
                      self.isolation)
