"""Submissions for the grading tests: the demo course's answers, a lesson's solution and variants of it, grading them
against the course in this repository, and reading the reports."""

from __future__ import annotations

import functools
import importlib.util
import textwrap
from pathlib import Path
from typing import Callable

from cutecourse.grading import build, grader, reports
from cutecourse.grading import notebook as nbio
from cutecourse.grading.results import FAILED, Report

ROOT = Path(__file__).resolve().parents[2]
DEMO = Path(__file__).parent / "demo"

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


def statuses(report: Report) -> dict[str, str]:
    """Each test's status, by its name without the points suffix."""
    return {t.name.split(" (")[0]: t.status for t in report.tests}


def outputs(report: Report) -> dict[str, str]:
    """Each test's output (its failure's message), by its name without the points suffix."""
    return {t.name.split(" (")[0]: t.output for t in report.tests}


def assert_failed(report: Report, hidden: list[str], checks: list[str]) -> None:
    """Every named hidden test failed, and every named check too."""
    state = statuses(report)
    expected = {f"hidden test_{t}" for t in hidden} | {f"check {c}" for c in checks}
    assert {n: state.get(n) for n in expected} == {n: FAILED for n in expected}, reports.summary(report)


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


@functools.cache
def course_exercises() -> dict[str, str]:
    """Every exercise of the course, with its lesson, as the solutions' answer cells name them: the one place an
    exercise id is defined (registries elsewhere are checked against it by test_registries.py)."""
    found = {}
    for path in sorted((ROOT / "solutions").glob("[0-9][0-9]_*.ipynb")):
        found |= {exercise: path.stem for exercise in nbio.answers(nbio.load(path))}
    return found


def lesson_solution(lesson: str, exercise: str) -> str:
    """The answer cell of `exercise` in the course's solution notebook of `lesson`, markers included."""
    return nbio.source(nbio.answers(nbio.load(ROOT / "solutions" / f"{lesson}.ipynb"))[exercise])


def grade_lesson(tmp_path: Path, lesson: str, answers: dict[str, str], timeout: float = 60,
                 exercises: set[str] | None = None) -> Report:
    """Grade `lesson`'s exercise notebook with these answers filled in, against the course in this repository; with
    `exercises`, only those (far faster: the others' checks and hidden tests do not run)."""
    path = tmp_path / f"{lesson}.ipynb"
    nbio.dump(build.filled(nbio.load(ROOT / "exercises" / f"{lesson}.ipynb"), answers), path)
    return grader.grade(path, grader.Course.at(ROOT), timeout=timeout, exercise=exercises)


def answer_from_file(tmp_path: Path, source: str, name: str) -> Callable[..., object]:
    """Function `name` of an answer's `source`, loaded from a file: the DSL reads a jit function's source."""
    path = tmp_path / f"answer_{name}_{abs(hash(source))}.py"  # one file per source: several may share a folder
    path.write_text(textwrap.dedent(source))
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return getattr(module, name)


def assert_kernel_checks(prefix: str, host: str) -> None:
    """A kernel exercise's `<prefix>_ptx` and `<prefix>_gemm` checks name `host`: the PTX one compiles for sm_80 and
    sm_90a, the GEMM one launches on an sm_80 GPU, both with 16-byte vectors."""
    from cutecourse.grading import checks

    ptx, gemm = checks.REGISTRY[f"{prefix}_ptx"], checks.REGISTRY[f"{prefix}_gemm"]
    assert (ptx.target, ptx.via, ptx.gpu) == (host, "ptx", None)
    assert (gemm.target, gemm.via, gemm.gpu) == (host, "launch", 80)
    assert dict(ptx.options) == dict(gemm.options) == {"vector": 8}
    assert {case[0] for case in ptx.cases()} == {"sm_80", "sm_90a"}
