"""Submissions for the grading tests: the demo course's answers, a lesson's solution and variants of it, grading them
against the course in this repository, and reading the reports."""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import pickle
import textwrap
from pathlib import Path
from typing import Callable

import filelock

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


#: The test session's folder of shared reports (tests/grading/conftest.py sets it; under xdist, one folder for all the
#: workers): `graded` reads a report another test already graded from it. None: every `graded` call grades.
SHARED_REPORTS: Path | None = None


def _report_key(submission: Path, course: grader.Course, options: dict) -> str:
    """Everything that decides a report: the submission's file name (its lesson) and bytes, the course and its files
    (grader.fingerprint: size and mtime of the masters, hidden tests and package), and the grader's options, written
    the same way in every worker (a set's order is not)."""
    digest = hashlib.sha256(submission.read_bytes())
    plain = {k: sorted(v) if isinstance(v, (set, frozenset)) else v for k, v in sorted(options.items())}
    files = sorted(grader.fingerprint(course).items())
    digest.update(repr((submission.name, str(course.root), str(course.hidden), files, plain)).encode())
    return digest.hexdigest()


def graded(submission: str | Path, course: grader.Course, **options) -> Report:
    """grader.grade(submission, course, **options), graded once per test session: a test on any xdist worker that
    grades the same bytes under the same file name, against the same course files, with the same options, reads that
    report (its `submission` the path it asked about) instead of grading again; a lock makes a second worker wait for
    the first. Only for tests that observe what a submission scores: a test of the grader's own behaviour
    (determinism, attacks, time limits, batch equality) calls grader.grade."""
    submission = Path(submission)
    if SHARED_REPORTS is None:
        return grader.grade(submission, course, **options)
    stored = SHARED_REPORTS / f"{_report_key(submission, course, options)}.pickle"
    with filelock.FileLock(f"{stored}.lock"):
        if stored.exists():
            report = pickle.loads(stored.read_bytes())
            report.submission = str(submission)
            return report
        report = grader.grade(submission, course, **options)
        stored.write_bytes(pickle.dumps(report))
    return report


def grade_lesson(tmp_path: Path, lesson: str, answers: dict[str, str], timeout: float = 60,
                 exercises: set[str] | None = None, shared: bool = False, checks: bool = True) -> Report:
    """Grade `lesson`'s exercise notebook with these answers filled in, against the course in this repository; with
    `exercises`, only those (far faster: the others' checks and hidden tests do not run). `shared`: through `graded`
    (a report another test of the session observes too; never for a test that times the grade). `checks=False`: the
    hidden tests only (`cutecourse grade --hidden-only`), for a test that observes nothing else: the checks' nbval
    run and their re-judge (a notebook kernel and learner processes, each compiling a kernel answer again) are
    left out."""
    path = tmp_path / f"{lesson}.ipynb"
    nbio.dump(build.filled(nbio.load(ROOT / "exercises" / f"{lesson}.ipynb"), answers), path)
    grade = graded if shared else grader.grade
    options = {} if checks else {"nbval": False}
    return grade(path, grader.Course.at(ROOT), timeout=timeout, exercise=exercises, **options)


def solution_report(tmp_path: Path, lesson: str) -> Report:
    """The course's solution notebook of `lesson`, as a learner submits it, graded once per session (`graded`) with
    the GPU points this machine cannot judge left to another grader."""
    submission = tmp_path / f"{lesson}.ipynb"
    nbio.dump(build.as_submitted(nbio.load(ROOT / "solutions" / f"{lesson}.ipynb")), submission)
    return graded(submission, grader.Course.at(ROOT), gpu_elsewhere=True)


def exercise_report(lesson: str) -> Report:
    """The exercise notebook of `lesson` as built, untouched, graded once per session (`graded`)."""
    return graded(ROOT / "exercises" / f"{lesson}.ipynb", grader.Course.at(ROOT))


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
