"""Grade a submission: nbval against the master's expected outputs, checks re-judged out of process, hidden tests.

For a submission ``NN_name.ipynb`` (a filled-in exercise notebook):

1. the learner's answer cells are taken out by exercise id; nothing else of the submission is used;
2. they are put into the master exercise notebook, whose check cells and expected outputs are restored, and nbval
   runs that notebook in a fresh kernel; each check cell passes only if nbval passes it *and* the same check,
   re-run with the learner's function in a sandboxed process (:mod:`sandbox`) and judged here, passes too;
3. the hidden tests (``<hidden>/test_NN_name.py``) call the learner's functions in that sandbox on unseen inputs.

Every learner process has a timeout and, without a GPU, a memory limit; a crash or a hang fails only the test it
hit, and the report is written regardless. Tests that need hardware this machine lacks are "not run", never passed.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cutecourse import env
from cutecourse.grading import checks as checks_module
from cutecourse.grading import notebook as nbio
from cutecourse.grading import plugin, sandbox

PASSED, FAILED, NOT_RUN = "passed", "failed", "not run"
#: Whole-run limits, as multiples of the per-test timeout (a notebook or a hidden-test file runs many tests).
RUN_TIMEOUT_FACTOR = 15


@dataclass
class TestResult:
    name: str
    exercise: str
    points: float
    status: str
    output: str = ""

    @property
    def score(self) -> float:
        return self.points if self.status == PASSED else 0.0


@dataclass
class Report:
    submission: str
    lesson: str
    tests: list[TestResult] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def runnable(self) -> list[TestResult]:
        return [t for t in self.tests if t.status != NOT_RUN]

    @property
    def score(self) -> float:
        return sum(t.score for t in self.tests)

    @property
    def max_score(self) -> float:
        """Points this machine could award: tests it could not run are left out."""
        return sum(t.points for t in self.runnable())

    def exercises(self) -> dict[str, tuple[float, float]]:
        """(score, max score on this machine) per exercise id, in order of appearance."""
        totals: dict[str, tuple[float, float]] = {}
        for t in self.tests:
            got, most = totals.get(t.exercise, (0.0, 0.0))
            runnable = t.status != NOT_RUN
            totals[t.exercise] = (got + t.score, most + (t.points if runnable else 0.0))
        return totals

    def only(self, exercise: str) -> "Report":
        return Report(self.submission, self.lesson, [t for t in self.tests if t.exercise == exercise], self.notes)


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

    def deny(self) -> list[str]:
        """What a learner's process may not read: hidden tests, solutions, and the grader's own code."""
        return [str(self.hidden), str(self.root / "solutions"), str(self.root / "exercises"), str(Path(__file__).parent)]


def lesson_of(submission: Path, sub: dict[str, Any], course: Course) -> str:
    lesson = sub.get("metadata", {}).get("cutecourse", {}).get("lesson")
    if isinstance(lesson, str) and re.fullmatch(r"\d\d_[a-z0-9_]+", lesson) and course.master(lesson).exists():
        return lesson
    stem = submission.stem
    if course.master(stem).exists():
        return stem
    known = sorted(p.stem for p in (course.root / "exercises").glob("[0-9][0-9]_*.ipynb"))
    raise ValueError(f"{submission.name}: cannot tell which lesson it answers; name the file after its exercise "
                     f"notebook (one of {', '.join(known) or 'none built yet: run cutecourse build'})")


def _strip_magics(text: str) -> str:
    # IPython-only lines (%magic, !shell) mean nothing to a plain Python process.
    return "\n".join("pass  # " + line if line.lstrip().startswith(("%", "!")) else line for line in text.splitlines())


def learner_cells(master: dict[str, Any], sub: dict[str, Any]) -> list[dict[str, str]]:
    """The code the learner's process runs: the master's code cells in order, the learner's answers in place of the
    stubs; check cells and GPU demonstration cells are left out."""
    answers = nbio.answers(sub)
    cells = []
    for index, cell in enumerate(master["cells"]):
        if cell.get("cell_type") != "code" or nbio.is_check(cell):
            continue
        if nbio.is_answer(cell):
            exercise = nbio.meta(cell)["exercise"]
            text = nbio.source(answers.get(exercise, cell))
            cells.append({"label": f"exercise {exercise}", "exercise": exercise, "source": _strip_magics(text)})
        elif "gpu" not in nbio.tags(cell):
            cells.append({"label": f"cell {index}", "source": _strip_magics(nbio.source(cell))})
    return cells


def merged_notebook(master: dict[str, Any], sub: dict[str, Any], gpu: bool, deny: list[str]) -> dict[str, Any]:
    """The master with the learner's answers in it; check cells compare outputs, GPU cells skip without a GPU.

    A first cell, run before any learner code, loads the checks and closes the same doors as the sandbox does."""
    nb = nbio.clone(master)
    guard = {"cell_type": "code", "execution_count": None, "outputs": [], "id": "cutecourse-guard",
             "metadata": {"tags": ["nbval-ignore-output"]},
             "source": ("import cutecourse.grading.checks\n"
                        "from cutecourse.grading.sandbox import _deny\n"
                        f"_deny({deny!r})\n"
                        "del _deny\n")}
    answers = nbio.answers(sub)
    for cell in nb["cells"]:
        if cell.get("cell_type") != "code":
            continue
        cell_tags = set(nbio.tags(cell))
        if nbio.is_answer(cell):
            exercise = nbio.meta(cell)["exercise"]
            if exercise in answers:
                nbio.set_source(cell, nbio.source(answers[exercise]))
            cell["outputs"] = []
        if nbio.is_check(cell):
            cell_tags.add("nbval-check-output")
        elif "gpu" in cell_tags:
            cell_tags.add("nbval-ignore-output")  # timings and demos differ from run to run
        if "gpu" in cell_tags and not gpu:
            cell_tags.add("nbval-skip")
        cell.setdefault("metadata", {})["tags"] = sorted(cell_tags)
    nb["cells"].insert(0, guard)
    return nb


def nbval_available() -> str | None:
    """None when nbval can run here, else why not."""
    for module in ("nbval", "jupyter_client", "ipykernel"):
        if importlib.util.find_spec(module) is None:
            return f"nbval needs jupyter ({module} is missing: pip install nbval ipykernel)"
    return None


def _limits(memory_mb: int | None) -> Any:
    if memory_mb is None:
        return None

    def apply() -> None:
        import resource

        resource.setrlimit(resource.RLIMIT_AS, (memory_mb * 2**20, memory_mb * 2**20))

    return apply


def _junit(path: Path) -> list[ET.Element]:
    if not path.exists():
        return []
    return list(ET.parse(path).getroot().iter("testcase"))


def _outcome(case: ET.Element) -> tuple[str, str]:
    for tag, status in (("failure", FAILED), ("error", FAILED), ("skipped", NOT_RUN)):
        node = case.find(tag)
        if node is not None:
            text = (node.get("message") or node.text or "").strip()
            return status, text.splitlines()[0][:500] if text else tag
    return PASSED, ""


# nbval imports nbformat, whose jsonschema builds an RFC 3987 grammar at import when `rfc3987_syntax` is installed:
# 2 of the 3 seconds pytest takes to start. Notebook validation never checks that format, so that import is skipped.
_PYTEST_WITHOUT_URI_GRAMMAR = ("import sys; sys.modules['rfc3987_syntax'] = None; import pytest; "
                               "sys.exit(pytest.main(sys.argv[1:]))")


def run_nbval(master: dict[str, Any], sub: dict[str, Any], gpu: bool, memory_mb: int | None, work: Path,
              deny: list[str], timeout: float) -> dict[int, tuple[str, str]]:
    """(status, message) per check-cell index of the master, from nbval in a fresh kernel."""
    path = work / "merged.ipynb"
    nbio.dump(merged_notebook(master, sub, gpu, deny), path)
    xml = work / "nbval.xml"
    cmd = [sys.executable, "-c", _PYTEST_WITHOUT_URI_GRAMMAR, "--nbval-lax", str(path),
           f"--nbval-cell-timeout={int(timeout)}",
           "--nbval-kernel-name=python3", "-p", "no:cacheprovider", "-o", "addopts=", "-q", f"--junitxml={xml}",
           f"--rootdir={work}"]
    try:
        subprocess.run(cmd, cwd=work, capture_output=True, text=True, timeout=timeout * RUN_TIMEOUT_FACTOR,
                       preexec_fn=_limits(memory_mb), start_new_session=True)
    except subprocess.TimeoutExpired:
        return {i: (FAILED, f"the notebook did not finish in {timeout * RUN_TIMEOUT_FACTOR:g} s")
                for i, c in enumerate(master["cells"]) if nbio.is_check(c)}
    # nbval numbers code cells only, and the guard cell is its "Cell 0".
    code_cells = [None] + [i for i, c in enumerate(master["cells"]) if c.get("cell_type") == "code"]
    results = {}
    for case in _junit(xml):
        found = re.search(r"Cell (\d+)", case.get("name", ""))
        if found and 0 < int(found.group(1)) < len(code_cells):
            results[code_cells[int(found.group(1))]] = _outcome(case)
    return results


def grade_checks(master: dict[str, Any], sub: dict[str, Any], course: Course, gpu: bool,
                 memory_mb: int | None, timeout: float) -> list[TestResult]:
    why_not = nbval_available()
    cells = [(i, c) for i, c in enumerate(master["cells"]) if nbio.is_check(c)]
    runnable = {i for i, c in cells if gpu or "gpu" not in nbio.tags(c)}

    def rejudge() -> dict[int, str]:
        """Each check's line, with the learner's function run in its own process and judged here."""
        lines = {}
        with sandbox.Learner(learner_cells(master, sub), deny=course.deny(), memory_mb=memory_mb,
                             preload=sandbox.PRELOAD, timeout=timeout) as learner:
            for index, cell in cells:
                check = checks_module.REGISTRY.get(nbio.meta(cell).get("check")) if index in runnable else None
                if check is not None:
                    lines[index] = checks_module.grade(check, learner)
        return lines

    nbval: dict[int, tuple[str, str]] = {}
    verdicts: dict[int, str] = {}
    if not why_not:
        with tempfile.TemporaryDirectory(prefix="cutecourse-nbval-") as work, ThreadPoolExecutor(2) as pool:
            judged = pool.submit(rejudge)  # independent of nbval's run, so the two go side by side
            nbval = run_nbval(master, sub, gpu, memory_mb, Path(work), course.deny(), timeout)
            verdicts = judged.result()
    results = []
    for index, cell in cells:
        info = nbio.meta(cell)
        name, exercise = info.get("check", f"cell {index}"), str(info.get("exercise", "?"))
        test = f"check {name} (cell {index})"
        if why_not:
            results.append(TestResult(test, exercise, 1, NOT_RUN, why_not))
        elif index not in runnable:
            results.append(TestResult(test, exercise, 1, NOT_RUN, "not run: needs a GPU (tag gpu)"))
        else:
            status, message = nbval.get(index, (FAILED, "nbval did not report this cell"))
            line = verdicts.get(index)
            # The verdict that counts is the grader's own: nbval passing a patched check is not enough.
            if line is not None and not line.startswith(checks_module.PASS):
                status, message = FAILED, line
            results.append(TestResult(test, exercise, 1, status, message))
    return results


def grade_hidden(lesson: str, cells: list[dict[str, str]], course: Course, timeout: float) -> list[TestResult]:
    tests = course.hidden / f"test_{lesson}.py"
    if not tests.exists():
        return []
    with tempfile.TemporaryDirectory(prefix="cutecourse-hidden-") as work:
        answers, xml = Path(work) / "answers.json", Path(work) / "hidden.xml"
        answers.write_text(json.dumps(cells))
        env = dict(os.environ, **{plugin.ANSWERS_ENV: str(answers), plugin.DENY_ENV: os.pathsep.join(course.deny()),
                                  sandbox.TIMEOUT_ENV: str(timeout)})
        cmd = [sys.executable, "-m", "pytest", str(tests), "-p", "cutecourse.grading.plugin", "--noconftest", "-p", "no:nbval",
               "-p", "no:cacheprovider", "-o", "addopts=", "-q", f"--junitxml={xml}", f"--rootdir={course.hidden}"]
        try:
            subprocess.run(cmd, cwd=work, env=env, capture_output=True, text=True,
                           timeout=timeout * RUN_TIMEOUT_FACTOR, start_new_session=True)
        except subprocess.TimeoutExpired:
            pass  # whatever finished is in the XML; the rest is reported failed below
        cases = _junit(xml)
    if not cases:
        return [TestResult(f"hidden tests of {lesson}", "?", 1, FAILED, "the hidden tests did not report")]
    results = []
    for case in cases:
        props = {p.get("name"): p.get("value") for p in case.iter("property")}
        status, message = _outcome(case)
        results.append(TestResult(f"hidden {case.get('name')}", props.get("exercise", "?"),
                                  float(props.get("points", 1)), status, message))
    return results


def exercise_points(course: Course, lesson: str) -> dict[str, float]:
    """Full points per exercise: one per check cell, plus each hidden test's `exercise(..., points=N)` marker."""
    import ast

    points: dict[str, float] = {}
    for cell in nbio.checks(nbio.load(course.master(lesson))):
        exercise = str(nbio.meta(cell).get("exercise", "?"))
        points[exercise] = points.get(exercise, 0) + 1
    hidden = course.hidden / f"test_{lesson}.py"
    if hidden.exists():
        for node in ast.walk(ast.parse(hidden.read_text())):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "exercise"
                    and node.args and isinstance(node.args[0], ast.Constant)):
                given = {k.arg: k.value.value for k in node.keywords if isinstance(k.value, ast.Constant)}
                exercise = str(node.args[0].value)
                points[exercise] = points.get(exercise, 0) + float(given.get("points", 1))
    return points


def fingerprint(course: Course) -> dict[str, int]:
    """Size and mtime of every file the grade depends on, to notice a submission that rewrites them."""
    roots = [course.root / "exercises", course.hidden, Path(__file__).parent]
    return {str(p): (p.stat().st_size, p.stat().st_mtime_ns) for root in roots if root.exists()
            for p in sorted(root.rglob("*")) if p.is_file() and "__pycache__" not in p.parts}


def grade(submission: str | Path, course: Course, nbval: bool = True, hidden: bool = True,
          timeout: float = sandbox.DEFAULT_TIMEOUT_S) -> Report:
    """Grade one submission; never raises for a bad submission, the report says what went wrong.

    `timeout` bounds each test (a call into the learner's code, or a notebook cell)."""
    submission = Path(submission)
    machine_gpu = env.gpu_missing(80) is None
    memory_mb = None if machine_gpu else plugin.CPU_MEMORY_MB
    try:
        sub = nbio.load(submission)
        lesson = lesson_of(submission, sub, course)
    except ValueError as exc:
        return Report(str(submission), "?", [TestResult("submission", "?", 1, FAILED, str(exc))])
    master = nbio.load(course.master(lesson))
    report = Report(str(submission), lesson)
    before = fingerprint(course)
    # The two halves wait on their own subprocesses, so they run side by side.
    with ThreadPoolExecutor(max_workers=2) as pool:
        hidden_part = pool.submit(grade_hidden, lesson, learner_cells(master, sub), course, timeout) if hidden else None
        checks_part = pool.submit(grade_checks, master, sub, course, machine_gpu, memory_mb, timeout) if nbval else None
        report.tests = (checks_part.result() if checks_part else []) + (hidden_part.result() if hidden_part else [])
    after = fingerprint(course)
    changed = sorted(k for k in set(before) | set(after) if before.get(k) != after.get(k))
    if changed:
        for t in report.tests:
            t.status, t.output = FAILED, f"the submission changed the course's files ({changed[0]}); restore them"
        report.notes.append(f"files changed during grading: {', '.join(changed)}; run git checkout before regrading")
    return report
