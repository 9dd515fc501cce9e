"""Answers that call what their exercise forbids: that each is a right answer where nothing is forbidden, and that the
grader scores it 0."""

from __future__ import annotations

import ast
import importlib
import textwrap
from pathlib import Path

from cutecourse.grading import checks, reports
from cutecourse.grading import notebook as nbio
from cutecourse.grading.harness import dotted_name, import_aliases

from .submissions import ROOT, answer_from_file, grade_lesson


def forbidden(lesson: str, exercise: str) -> list[str]:
    """The dotted names an exercise's answer cell forbids (its metadata's "forbid"), from the course's solution."""
    cell = nbio.answers(nbio.load(ROOT / "solutions" / f"{lesson}.ipynb"))[exercise]
    return list(nbio.meta(cell).get("forbid", []))


def called_names(source: str) -> set[str]:
    """The full dotted names of the course and DSL functions `source` calls, through its imports' aliases."""
    tree = ast.parse(textwrap.dedent(source))
    aliases = import_aliases(tree)
    names = {dotted_name(n.func, aliases) for n in ast.walk(tree) if isinstance(n, ast.Call)}
    return {n for n in names if n and n.split(".")[0] in ("cutecourse", "cutlass")}


def assert_right_but_forbidden(tmp_path: Path, lesson: str, exercise: str, source: str) -> None:
    """`source`, an answer to `exercise` that calls the course's or the DSL's own function, passes the exercise's
    check where nothing is forbidden (so a test that it scores 0 when graded can fail), and calls at least one
    function the exercise's metadata forbids; every forbidden name is a real function of the package or the DSL."""
    names = forbidden(lesson, exercise)
    assert names, f"exercise {exercise} forbids nothing"
    for name in names:
        path, *rest = name.split(".")
        obj = importlib.import_module(path)
        for part in rest:  # an attribute, a submodule, or one of a module a re-export shadows (hw.occupancy.occupancy)
            if hasattr(obj, part):
                obj = getattr(obj, part)
            else:
                try:
                    obj = importlib.import_module(f"{path}.{part}")
                except ModuleNotFoundError:
                    obj = getattr(importlib.import_module(path), part)
            path = f"{path}.{part}"
        assert callable(obj), name
    assert called_names(source) & set(names), (exercise, sorted(called_names(source)), names)
    master = nbio.load(ROOT / "exercises" / f"{lesson}.ipynb")
    for cell in nbio.checks(master):
        if nbio.meta(cell).get("exercise") == exercise and "gpu" not in nbio.tags(cell):
            check = checks.REGISTRY[nbio.meta(cell)["check"]]
            line = check.run(answer_from_file(tmp_path, source, check.target))
            assert line.startswith(checks.PASS), line


def assert_forbidden_calls_score_zero(tmp_path: Path, lesson: str, answers: dict[str, str]) -> None:
    """Graded, answers that call what their exercise forbids score 0 there (the grader makes those unavailable)."""
    report = grade_lesson(tmp_path, lesson, answers, timeout=120, exercises=set(answers))
    got = {e: report.exercises()[e][0] for e in answers}
    assert got == {e: 0.0 for e in answers}, reports.summary(report)
