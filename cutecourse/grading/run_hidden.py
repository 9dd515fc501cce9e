"""The hidden tests of a grade: found from their markers in ``<hidden>/test_NN_name.py``, and run in a trusted pytest
process that holds the references and calls into jailed learner processes.
"""

from __future__ import annotations

import ast
import json
import os
from dataclasses import dataclass

from cutecourse.grading import isolation, plugin, pytest_run, sandbox
from cutecourse.grading.cells import forbidden
from cutecourse.grading.context import Grade
from cutecourse.grading.course import Course
from cutecourse.grading.results import FAILED, NOT_RUN, TestResult


#: Seconds the hidden tests' pytest keeps, after its learners' last call, to report before the grade's deadline.
WRAP_UP_S = 2.0


@dataclass(frozen=True)
class HiddenTest:
    """A hidden test as its markers declare it: its exercise, its points, the compute capability it needs."""

    name: str
    exercise: str
    points: float
    gpu: int | None


def hidden_tests(course: Course, lesson: str) -> list[HiddenTest]:
    """The lesson's hidden tests as their markers declare them (read from the source, not from any run)."""
    path = course.hidden / f"test_{lesson}.py"
    if not path.exists():
        return []
    found = []
    for node in ast.parse(path.read_text()).body:
        if not isinstance(node, ast.FunctionDef) or not node.name.startswith("test"):
            continue
        exercise = None
        points = 1.0
        gpu = None
        for deco in node.decorator_list:
            if not (isinstance(deco, ast.Call) and isinstance(deco.func, ast.Attribute)):
                continue
            args = [a.value for a in deco.args if isinstance(a, ast.Constant)]
            kwargs = {k.arg: k.value.value for k in deco.keywords if isinstance(k.value, ast.Constant)}
            if deco.func.attr == "exercise" and args:
                exercise, points = str(args[0]), float(kwargs.get("points", 1))
            elif deco.func.attr == "gpu":
                gpu = int(args[0]) if args else int(kwargs.get("cc", 80))
        if exercise is not None:
            found.append(HiddenTest(node.name, exercise, points, gpu))
    return found


def grade_hidden(g: Grade, expected: list[HiddenTest]) -> list[TestResult]:
    """The results of the hidden tests `expected` (the lesson's that this grade runs)."""
    if not expected:
        return []
    answers, xml = g.work / "answers.json", g.work / "hidden.xml"
    answers.write_text(json.dumps({"cells": g.cells, "forbid": forbidden(g.master),
                                   "deny": g.course.deny()}))
    # The learners' calls end `WRAP_UP_S` before the grade's deadline, so that pytest reports the tests that passed
    # before it is stopped there.
    run_env = dict(os.environ, **{plugin.ANSWERS_ENV: str(answers), isolation.WALLS_ENV: str(g.walls.spec_path),
                                  sandbox.TIMEOUT_ENV: str(g.timeout),
                                  sandbox.DEADLINE_ENV: repr(g.deadline - WRAP_UP_S)})
    cmd = isolation.python_module("pytest", str(g.course.hidden / f"test_{g.lesson}.py"),
                                  "-p", "cutecourse.grading.plugin", "--noconftest", "-p", "no:nbval",
                                  "-p", "no:cacheprovider", "-o", "addopts=", "-q", f"--junitxml={xml}",
                                  f"--rootdir={g.course.hidden}")
    if g.exercises is not None:
        cmd.append(f"--cutecourse-exercise={','.join(sorted(g.exercises))}")
    finished = pytest_run.run(cmd, g.deadline, cwd=g.work, env=run_env)
    outcomes = {case.get("name"): pytest_run.outcome(case) for case in pytest_run.testcases(xml)}
    results = []
    for t in expected:
        gpu_missing = t.gpu is not None and not g.gpu
        status, message = outcomes.get(t.name, (NOT_RUN, f"not run: needs sm_{t.gpu}") if gpu_missing else (
            FAILED, "did not finish: the hidden tests ran out of time" if not finished
            else "did not report (the hidden test run ended early)"))
        results.append(TestResult(f"hidden {t.name}", t.exercise, t.points, status, message))
    return results
