"""Grade a submission: nbval runs the answers in the master notebook, the checks are judged again out of process, and
the hidden tests call the learner's functions and kernels on unseen inputs. The grader is a security boundary; this
module puts a grade together and scores it.

For a submission of lesson ``NN_name`` (named so, or named on the command line; never taken from the notebook):

1. the submission is validated (size, JSON, structure and types); only its answer cells are used, by exercise id;
2. they are put into the master exercise notebook (:mod:`cells`), whose check cells are restored, and nbval runs it in
   a fresh kernel inside a jail (:mod:`isolation`); there the checks are a stand-in that records what the learner's
   functions return on the checks' cases, and the grader judges those records against its references
   (:mod:`run_checks`);
3. each check is judged again with the learner's answers (and the master cells they need) loaded in a plain
   jailed process, one per set of functions an exercise forbids (``"forbid"`` in its answer cell's metadata), which
   are unavailable in it; a check passes only if both verdicts pass (where there is no jupyter, the second alone
   decides);
4. the hidden tests (``<hidden>/test_NN_name.py``) run in a trusted pytest process that holds the references and
   calls into jailed learner processes (:mod:`run_hidden`).

All of a submission's learner processes share its walls: memory and processes are bounded per submission, the whole
grade has a deadline of ``timeout`` × the number of tests, and every learner process is dead before the report is
made. Points come from the markers of the hidden tests and from the check cells, whatever a run reports: a test that
did not finish is failed, a test this machine cannot run (a GPU test on a CPU) is "not run" and still counts toward
the maximum, unless the grade says GPU tests are graded elsewhere.
"""

from __future__ import annotations

import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path, PurePosixPath
from typing import Any

from cutecourse import env
from cutecourse.grading import isolation, plugin, sandbox
from cutecourse.grading import notebook as nbio
from cutecourse.grading.context import Grade
from cutecourse.grading.course import PACKAGE_DIR, Course, lesson_of
from cutecourse.grading.results import FAILED, NOT_RUN, PASSED, Report, TestResult
from cutecourse.grading.run_checks import grade_checks
from cutecourse.grading.run_hidden import HiddenTest, grade_hidden, hidden_tests


def exercise_points(course: Course, lesson: str) -> dict[str, float]:
    """Full points per exercise: one per check cell, plus each hidden test's `exercise(..., points=N)` marker."""
    points: dict[str, float] = {}
    for cell in nbio.checks(nbio.load(course.master(lesson))):
        exercise = str(nbio.meta(cell).get("exercise", "?"))
        points[exercise] = points.get(exercise, 0) + 1
    for t in hidden_tests(course, lesson):
        points[t.exercise] = points.get(t.exercise, 0) + t.points
    return points


def lost(submission: str | Path, course: Course, why: str, *, lesson: str | None = None,
         exercises: frozenset[str] | None = None) -> Report:
    """The report of a submission that could not be graded (unreadable, or its grader died): every point of the
    lesson (or of `exercises`) is lost, none disappears from the maximum, and each says `why`."""
    try:
        lesson = lesson_of(Path(submission), course, lesson)
    except ValueError as exc:
        return Report(str(submission), lesson or "?", [TestResult("submission", "?", 1, FAILED, str(exc))])
    return Report(str(submission), lesson, [TestResult(f"exercise {e}: submission", e, most, FAILED, why)
                                            for e, most in exercise_points(course, lesson).items()
                                            if exercises is None or e in exercises])


def fingerprint(course: Course) -> dict[str, tuple[int, int]]:
    """Size and mtime of every file the grade depends on: a tripwire for a submission that rewrites them."""
    roots = [course.root / "exercises", course.hidden, PACKAGE_DIR]
    return {str(p): (p.stat().st_size, p.stat().st_mtime_ns) for root in roots if root.exists()
            for p in sorted(root.rglob("*")) if p.is_file() and "__pycache__" not in p.parts}


def deadline_s(timeout: float, tests: int) -> float:
    """A grade's time limit: the per-test `timeout` times its number of tests (at least one)."""
    return timeout * max(1, tests)


def default_limits(gpu: bool) -> isolation.Limits:
    """What a grade's submission may use unless it is given `limits`: more memory where there is a GPU (CUDA, torch
    and the DSL take more)."""
    return isolation.Limits(memory_mb=plugin.GPU_MEMORY_MB if gpu else plugin.CPU_MEMORY_MB)


def relative_name(name: str, argument: str) -> str:
    """`name`, if it is a notebook's path relative to the folder it is graded from: how a generated workflow, a
    Gradescope bundle and a Modal run name a submission. Else a ValueError naming `argument`."""
    path = PurePosixPath(name)
    if (path.is_absolute() or ".." in path.parts or path.suffix != ".ipynb" or path.as_posix() != name
            or any(ord(c) < 32 or ord(c) == 127 for c in name) or "${{" in name):
        raise ValueError(f"{argument} {name!r}: give the notebook's path relative to the folder it is graded from, "
                         f"ending in .ipynb, without '..', a leading '/', control characters or '${{{{' (e.g. "
                         f"exercises/02_layouts.ipynb)")
    return name


def planned(course: Course, lesson: str, *, nbval: bool = True, hidden: bool = True,
            exercises: frozenset[str] | None = None,
            master: dict[str, Any] | None = None) -> tuple[int, list[HiddenTest]]:
    """What a grade of `lesson` runs: the number of its check cells (in `master`, else the course's), and its hidden
    tests (`deadline_s` of their count bounds the grade)."""
    wanted = [t for t in hidden_tests(course, lesson) if exercises is None or t.exercise in exercises] if hidden else []
    n_checks = sum(1 for c in nbio.checks(master or nbio.load(course.master(lesson))) if exercises is None
                   or str(nbio.meta(c).get("exercise")) in exercises) if nbval else 0
    return n_checks, wanted


def grade(submission: str | Path, course: Course, nbval: bool = True, hidden: bool = True,
          timeout: float = sandbox.DEFAULT_TIMEOUT_S, *, lesson: str | None = None,
          exercise: str | list[str] | set[str] | None = None,
          isolation_kind: str = "auto", limits: isolation.Limits | None = None,
          gpu_elsewhere: bool = False) -> Report:
    """Grade one submission; never raises for a bad submission: the report says what went wrong.

    `timeout` bounds each test (a call into the learner's code, or a notebook cell), and the whole grade is bounded by
    `timeout` × the number of tests. `exercise` grades one exercise only (or those of a list). `gpu_elsewhere`: GPU
    tests this machine cannot run are left out of the maximum (another grader awards them)."""
    submission = Path(submission)
    try:
        lesson = lesson_of(submission, course, lesson)
    except ValueError as exc:
        return Report(str(submission), lesson or "?", [TestResult("submission", "?", 1, FAILED, str(exc))])
    points = exercise_points(course, lesson)
    exercises = None if exercise is None else frozenset([exercise] if isinstance(exercise, str) else exercise)
    unknown = sorted(exercises - set(points)) if exercises is not None else []
    if unknown:
        return Report(str(submission), lesson, [TestResult("submission", unknown[0], 1, FAILED,
                                                           f"--exercise {unknown[0]}: no such exercise in {lesson}; "
                                                           f"it has {', '.join(points)}")])
    try:
        sub = nbio.load_submission(submission)
    except ValueError as exc:
        return lost(submission, course, str(exc), lesson=lesson, exercises=exercises)
    master = nbio.load(course.master(lesson))
    gpu = env.gpu_missing(80) is None
    walls_kind = isolation.choose(isolation_kind, course.deny(), course.read_only())
    report = Report(str(submission), lesson, isolation=walls_kind.detail)
    n_checks, wanted = planned(course, lesson, nbval=nbval, hidden=hidden, exercises=exercises, master=master)
    budget = deadline_s(timeout, n_checks + len(wanted))
    report.notes.append(f"isolation: {walls_kind.detail}")
    report.notes.append(f"time limit: {timeout:g} s per test, {budget:g} s for the grade ({n_checks + len(wanted)} "
                        f"tests)")
    before = fingerprint(course)
    limits = limits or default_limits(gpu)
    with tempfile.TemporaryDirectory(prefix="cutecourse-grade-") as work, \
            isolation.Walls(walls_kind, limits, gpu, PACKAGE_DIR, Path(work) / "walls", course.deny()) as walls:
        g = Grade(course, lesson, master, sub, walls, gpu, timeout, time.monotonic() + budget, exercises, Path(work))
        g.preload  # noqa: B018 - the cells parsed here: CPython 3.11's ast is not safe from two threads at once
        with ThreadPoolExecutor(max_workers=2) as pool:
            # The two halves wait on their own subprocesses, so they run side by side.
            hidden_part = pool.submit(grade_hidden, g, wanted) if hidden else None
            checks_part = grade_checks(g, report.notes) if nbval else []
            report.tests = checks_part + (hidden_part.result() if hidden_part else [])
        over_memory, over_disk = walls.over_memory, walls.over_disk
        walls.kill()  # nothing of the submission runs while its report is made
        if over_memory:
            report.notes.append(f"the submission went over its {limits.memory_mb} MiB of memory: all its processes "
                                f"were killed")
        if over_disk:
            report.notes.append(f"the submission wrote more than {limits.scratch_mb} MiB to its scratch folders: all "
                                f"its processes were killed")
    after = fingerprint(course)
    changed = sorted(k for k, v in after.items() if before.get(k) != v) + sorted(set(before) - set(after))
    if changed:
        for t in report.tests:
            t.status, t.output = FAILED, f"the submission changed the course's files ({changed[0]}); restore them"
        report.notes.append(f"files changed during grading: {', '.join(changed)}; run git checkout before regrading")
    for t in report.tests:
        t.elsewhere = gpu_elsewhere and t.status == NOT_RUN  # only hardware this machine lacks makes a test not run
    provisional(report)
    return report


def provisional(report: Report) -> None:
    """Mark the verdicts of exercises whose GPU tests did not run here: their kernels were judged on the PTX of their
    compiled modules only, which a module made to please a census passes (`modules`); a GPU grader runs them."""
    waiting = [t for t in report.tests if t.status == NOT_RUN]
    exercises = sorted({t.exercise for t in waiting})
    if not exercises:
        return
    report.notes.append(f"provisional: exercise{'s' if len(exercises) > 1 else ''} {', '.join(exercises)} were judged "
                        f"without a GPU, on the PTX of each answer's compiled module only; a grader with a GPU also "
                        f"runs each module on random ragged shapes ({len(waiting)} tests, "
                        f"{sum(t.points for t in waiting):g} points not run here)")
    for t in report.tests:
        if t.exercise in exercises and t.status == PASSED:
            t.output = (t.output + " " if t.output else "") + "(provisional: no GPU ran this exercise's kernel)"
