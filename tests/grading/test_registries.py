"""An exercise id is defined once, by its answer cell in the solutions (`course_exercises`). Every other place that
spells one (the hidden tests' markers, the grading tests' registries and submissions, test_no_copies' PRINTED) must
name an exercise the solutions have; a registry of check names or hidden tests must name that exercise's own."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from cutecourse.grading import notebook as nbio
from cutecourse.grading.course import Course
from cutecourse.grading.run_hidden import hidden_tests

from .submissions import ROOT, course_exercises

EXERCISE_ID = re.compile(r"^[1-9]\d*\.\d+$")
#: The tests that spell the course's exercise ids (the others grade the demo course, or make up exercises).
SPELLERS = sorted([*ROOT.glob("tests/hidden/test_[0-9][0-9]_*.py"), *ROOT.glob("tests/grading/test_lesson_*.py"),
                   *ROOT.glob("tests/grading/test_l[0-9][0-9]_*.py"), ROOT / "tests/grading/test_kernel_exercises.py",
                   ROOT / "tests/grading/test_no_copies.py"])
LESSONS = sorted(set(course_exercises().values()))


def spelled(path: Path) -> set[str]:
    """The exercise ids `path` spells: its string constants shaped like one."""
    tree = ast.parse(path.read_text())
    return {n.value for n in ast.walk(tree)
            if isinstance(n, ast.Constant) and isinstance(n.value, str) and EXERCISE_ID.match(n.value)}


def registries(path: Path, suffix: str) -> dict[str, dict[str, str]]:
    """The module-level dicts of `path` whose name ends in `suffix`, written as literals: name -> {exercise: value}."""
    found = {}
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Dict):
            names = [t.id for t in node.targets if isinstance(t, ast.Name) and t.id.endswith(suffix)]
            if names:
                found[names[0]] = ast.literal_eval(node.value)
    return found


@pytest.mark.parametrize("path", SPELLERS, ids=lambda p: p.name)
def test_every_exercise_a_test_names_is_one_the_solutions_have(path):
    unknown = sorted(spelled(path) - set(course_exercises()))
    assert not unknown, f"{path.relative_to(ROOT)} names exercises that no solution has: {unknown}"


def test_each_exercise_id_starts_with_its_lessons_number():
    wrong = {e: lesson for e, lesson in course_exercises().items() if e.split(".")[0] != str(int(lesson[:2]))}
    assert not wrong, wrong


@pytest.mark.parametrize("lesson", LESSONS)
def test_each_exercise_has_check_cells_and_hidden_tests_and_nothing_else_does(lesson):
    own = {e for e, of in course_exercises().items() if of == lesson}
    solution = nbio.load(ROOT / "solutions" / f"{lesson}.ipynb")
    checked = {str(nbio.meta(c).get("exercise")) for c in nbio.checks(solution)}
    marked = {t.exercise for t in hidden_tests(Course.at(ROOT), lesson)}
    assert checked == own and marked == own, (sorted(own), sorted(checked), sorted(marked))


@pytest.mark.parametrize("path", sorted(ROOT.glob("tests/grading/test_lesson_*.py")), ids=lambda p: p.name)
def test_the_registries_of_checks_and_hidden_tests_name_the_exercises_own(path):
    """CHECKS = {"5.1": "mma_coords"}: a check cell of 5.1 runs that check; CPU_HIDDEN = {"5.1": "mma_coords_..."}:
    test_mma_coords_... is a hidden test of 5.1."""
    solutions = {lesson: nbio.load(ROOT / "solutions" / f"{lesson}.ipynb") for lesson in LESSONS}
    for name, registry in registries(path, "CHECKS").items():
        for exercise, check in registry.items():
            cells = nbio.checks(solutions[course_exercises()[exercise]])
            own = {nbio.meta(c).get("check") for c in cells if nbio.meta(c).get("exercise") == exercise}
            assert check in own, f"{name}[{exercise!r}] = {check!r}: the check cells of {exercise} run {sorted(own)}"
    for name, registry in registries(path, "HIDDEN").items():
        for exercise, test in registry.items():
            marked = {t.name: t.exercise for t in hidden_tests(Course.at(ROOT), course_exercises()[exercise])}
            assert marked.get(f"test_{test}") == exercise, f"{name}[{exercise!r}]: no hidden test_{test} of {exercise}"
