"""Submissions made from the demo course's exercise notebook, for the grading tests."""

from __future__ import annotations

import textwrap
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


def outputs(report: grader.Report) -> dict[str, str]:
    """Each test's output (its failure's message), by its name without the points suffix."""
    return {t.name.split(" (")[0]: t.output for t in report.tests}


def assert_failed(report: grader.Report, hidden: list[str], checks: list[str]) -> None:
    """Every named hidden test failed, and every named check too."""
    state = statuses(report)
    expected = {f"hidden test_{t}" for t in hidden} | {f"check {c}" for c in checks}
    assert {n: state.get(n) for n in expected} == {n: grader.FAILED for n in expected}, reports.summary(report)


def edited(source: str, *changes: tuple[str, str]) -> str:
    """`source` with each (old, new) replaced; each old must be there, so the variants follow the solution."""
    for old, new in changes:
        assert old in source, f"the solution no longer has {old!r}; update this test"
        source = source.replace(old, new)
    return source


def hard_coded(function: str, params: str, answers: dict, default: object) -> str:
    """The source of an answer that only knows the visible cases: ``function(params)`` returns ``answers[args]``
    for them and `default` for anything else (a check passes it; a hidden test must not)."""
    table = "".join(f"        {case!r}: {value!r},\n" for case, value in answers.items())
    return f"def {function}({params}):\n    return {{\n{table}    }}.get(({params}), {default!r})\n"


def lesson_solution(lesson: str, exercise: str) -> str:
    """The answer cell of `exercise` in the course's solution notebook of `lesson`, markers included."""
    return nbio.source(nbio.answers(nbio.load(ROOT / "solutions" / f"{lesson}.ipynb"))[exercise])


def grade_lesson(tmp_path: Path, lesson: str, answers: dict[str, str], timeout: float = 60,
                 exercises: set[str] | None = None) -> grader.Report:
    """Grade `lesson`'s exercise notebook with these answers filled in, against the course in this repository; with
    `exercises`, only those (far faster: the others' checks and hidden tests do not run)."""
    path = tmp_path / f"{lesson}.ipynb"
    nbio.dump(build.filled(nbio.load(ROOT / "exercises" / f"{lesson}.ipynb"), answers), path)
    return grader.grade(path, grader.Course.at(ROOT), timeout=timeout, exercise=exercises)


def _no_jail() -> str | None:
    """Why this machine cannot grade in bubblewrap (the cause and the command that fixes it), or None. On CI it must
    grade in bubblewrap: there a missing jail fails the run instead of skipping the tests that need it."""
    import os

    from cutecourse.grading import isolation

    why = isolation.no_jail()
    if why and os.environ.get("CI"):
        raise RuntimeError(f"CI must grade in bubblewrap, and cannot: {why}")
    return why


#: Why the tests that need the grader's jail skip here, or None where bubblewrap runs.
NO_JAIL = _no_jail()
#: A test that grades in bubblewrap and nothing else (the attack suite, --jobs, the workflow): skipped, with the cause
#: and its fix, where no jail can be made.
needs_jail = pytest.mark.skipif(NO_JAIL is not None, reason=str(NO_JAIL))


def _skip_if_no_jail():
    """A test that grades learner code needs a jail: where none can be made (and the grader is not root, so it has no
    fallback either), the grader refuses with IsolationError; the test is then skipped with NO_JAIL, not failed."""
    from cutecourse.grading import isolation

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


# --------------------------------------------------------------------------- answers that call what an exercise forbids


def forbidden(lesson: str, exercise: str) -> list[str]:
    """The dotted names an exercise's answer cell forbids (its metadata's "forbid"), from the course's solution."""
    cell = nbio.answers(nbio.load(ROOT / "solutions" / f"{lesson}.ipynb"))[exercise]
    return list(nbio.meta(cell).get("forbid", []))


def called_names(source: str) -> set[str]:
    """The full dotted names of the course and DSL functions `source` calls, through its imports' aliases."""
    import ast

    from cutecourse.grading.harness import dotted_name, import_aliases

    tree = ast.parse(textwrap.dedent(source))
    aliases = import_aliases(tree)
    names = {dotted_name(n.func, aliases) for n in ast.walk(tree) if isinstance(n, ast.Call)}
    return {n for n in names if n and n.split(".")[0] in ("cutecourse", "cutlass")}


def assert_right_but_forbidden(tmp_path: Path, lesson: str, exercise: str, source: str) -> None:
    """`source`, an answer to `exercise` that calls the course's or the DSL's own function, passes the exercise's
    check where nothing is forbidden (so a test that it scores 0 when graded can fail), and calls at least one
    function the exercise's metadata forbids; every forbidden name is a real function of the package or the DSL."""
    import importlib

    from cutecourse.grading import checks

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


def answer_from_file(tmp_path: Path, source: str, name: str) -> Callable[..., object]:
    """Function `name` of an answer's `source`, loaded from a file: the DSL reads a jit function's source."""
    import importlib.util

    path = tmp_path / f"answer_{name}_{abs(hash(source))}.py"  # one file per source: several may share a folder
    path.write_text(textwrap.dedent(source))
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return getattr(module, name)
