"""Grade a submission: nbval runs the answers in the master notebook, the checks are judged again out of process, and
the hidden tests call the learner's functions and kernels on unseen inputs. The grader is a security boundary.

For a submission of lesson ``NN_name`` (named so, or named on the command line; never taken from the notebook):

1. the submission is validated (size, JSON, structure and types); only its answer cells are used, by exercise id;
2. they are put into the master exercise notebook, whose check cells are restored, and nbval runs it in a fresh
   kernel inside a jail (:mod:`isolation`); there the checks are a stand-in that records what the learner's
   functions return on the checks' cases, and the grader judges those records against its references;
3. each check is judged again with the learner's answers (and the master cells they need) loaded in a plain
   jailed process, one per set of functions an exercise forbids (``"forbid"`` in its answer cell's metadata), which are unavailable in it; a check passes
   only if both verdicts pass (where there is no jupyter, the second alone decides);
4. the hidden tests (``<hidden>/test_NN_name.py``) run in a trusted pytest process that holds the references and
   calls into jailed learner processes.

All of a submission's learner processes share its walls: memory and processes are bounded per submission, the whole
grade has a deadline of ``timeout`` × the number of tests, and every learner process is dead before the report is
made. Points come from the markers of the hidden tests and from the check cells, whatever a run reports: a test that
did not finish is failed, a test this machine cannot run (a GPU test on a CPU) is "not run" and still counts toward
the maximum, unless the grade says GPU tests are graded elsewhere.
"""

from __future__ import annotations

import ast
import contextlib
import functools
import importlib.util
import json
import os
import re
import signal
import subprocess
import symtable
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from cutecourse import env
from cutecourse.grading import checks as checks_module
from cutecourse.grading import harness, isolation, plugin, sandbox
from cutecourse.grading import notebook as nbio

PASSED, FAILED, NOT_RUN = "passed", "failed", "not run"
#: Longest test output kept in a report; the rest is cut, and the cut is said.
MAX_OUTPUT_CHARS = 2000
#: The most a notebook's recorded check results may weigh.
MAX_RECORD_BYTES = 64 * 2**20


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


PACKAGE_DIR = Path(__file__).resolve().parents[1]


def lesson_of(submission: Path, course: Course, lesson: str | None = None) -> str:
    """The lesson a submission answers: `lesson` if given, else the file's name; one of the course's assignments."""
    known = course.lessons()
    name = lesson or submission.stem
    if name not in known:
        where = f"--lesson {lesson}" if lesson else f"the file name {submission.name!r}"
        raise ValueError(f"submission rejected: {where} names no lesson of this course; name the file after its "
                         f"exercise notebook or pass --lesson, one of {', '.join(known) or 'none (run cutecourse build)'}")
    return name


def _strip_magics(text: str) -> str:
    # IPython-only lines (%magic, !shell) mean nothing to a plain Python process.
    return "\n".join("pass  # " + line if line.lstrip().startswith(("%", "!")) else line for line in text.splitlines())


def answer_source(cell: dict[str, Any], answers: dict[str, dict[str, Any]]) -> str:
    """The learner's answer for the master's answer `cell` (or the master's stub); a kernel answer that is not kernel
    code only becomes a line that raises why, so that the exercise fails with it."""
    info = nbio.meta(cell)
    text = nbio.source(answers.get(info["exercise"], cell))
    why = harness.restricted(text, info.get("forbid", [])) if info.get("kernel") else None
    if why:
        return f"raise PermissionError({'exercise ' + info['exercise'] + ' is not graded: ' + why!r})\n"
    return text


def learner_cells(master: dict[str, Any], sub: dict[str, Any], hidden: str = "") -> list[dict[str, str]]:
    """The code a plain learner process runs: the learner's answers in place of the stubs, and of the master's other
    code cells only what they need (:func:`needed_cells`); check cells and GPU demonstration cells are left out.
    `hidden` is the lesson's hidden-test source, whose string constants may name what the tests call."""
    answers = nbio.answers(sub)
    cells, roots = [], set()
    for index, cell in enumerate(master["cells"]):
        if cell.get("cell_type") != "code":
            continue
        if nbio.is_check(cell):
            roots |= _reads(_strip_magics(nbio.source(cell)))
        elif nbio.is_answer(cell):
            exercise = nbio.meta(cell)["exercise"]
            cells.append({"label": f"exercise {exercise}", "exercise": exercise,
                          "source": _strip_magics(answer_source(cell, answers))})
        elif "gpu" not in nbio.tags(cell):
            cells.append({"label": f"cell {index}", "source": _strip_magics(nbio.source(cell))})
    if hidden:
        with contextlib.suppress(SyntaxError, ValueError):
            roots |= {n.value for n in ast.walk(ast.parse(hidden)) if isinstance(n, ast.Constant)
                      and isinstance(n.value, str) and n.value.isidentifier()}
    return needed_cells(cells, roots)


def _reads(source: str) -> set[str]:
    """The global names `source` reads: at its top level, or free in its functions, classes and comprehensions."""
    try:
        tables = [symtable.symtable(source, "<cell>", "exec")]
    except (SyntaxError, ValueError):
        return set()
    found = set()
    while tables:
        table = tables.pop()
        tables += table.get_children()
        top = table.get_type() == "module"
        found |= {s.get_name() for s in table.get_symbols()
                  if s.is_referenced() and (top or s.is_global() or (table.get_type() == "class" and not s.is_local()))}
    return found


def _bindings_of(statement: ast.stmt) -> set[str] | None:
    """The global names a top-level statement binds or changes (``x.a = ...`` and ``x[i] = ...`` change ``x``);
    None where it cannot be told (``global``, a star import)."""
    found: set[str] = set()
    for node in ast.walk(statement):
        if isinstance(node, (ast.Global, ast.Nonlocal)) or (isinstance(node, ast.alias) and node.name == "*"):
            return None
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            found.add(node.name)
        elif isinstance(node, ast.alias):
            found.add((node.asname or node.name).split(".")[0])
        elif isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
            found.add(node.id)
        elif isinstance(node, (ast.Attribute, ast.Subscript)) and not isinstance(node.ctx, ast.Load):
            base = node.value
            while isinstance(base, (ast.Attribute, ast.Subscript)):
                base = base.value
            if isinstance(base, ast.Name):
                found.add(base.id)
    return found


def needed_cells(cells: list[dict[str, str]], roots: set[str] = frozenset()) -> list[dict[str, str]]:
    """Of the master's cells, those the answers (and the names in `roots`) need, in order, with the answers.

    nbval runs the whole lesson once; a plain learner process needs only what its answers read. A master cell is
    kept when it binds a name that a kept cell reads (the last binding before the reader, and the last one of all,
    which is what a function sees when it is called); an import of such a name is kept as that statement alone. A
    cell whose bindings cannot be told (``global``, ``import *``, not Python) is always kept. What the analysis
    cannot see is a change made through a method call (``config.update(...)``): a lesson whose answers need one binds
    it instead (``config = ...``); the solutions' grading tests show every lesson's answers get what they need."""
    parsed: list[list[ast.stmt] | None] = []
    bound_by: dict[str, list[tuple[int, int]]] = {}  # name -> (cell, statement) that bind it, in order
    for i, cell in enumerate(cells):
        try:
            statements = ast.parse(cell["source"]).body
        except (SyntaxError, ValueError):
            statements = None
        bindings = [_bindings_of(st) for st in statements or []]
        parsed.append(None if statements is None or None in bindings else statements)
        for j, names in enumerate(bindings):
            for name in names or ():
                bound_by.setdefault(name, []).append((i, j))
    keep: dict[int, set[int] | None] = {}  # cell -> the statements kept (None: the whole cell)
    work: list[tuple[int, set[str]]] = [(len(cells), set(roots))]

    def whole(i: int) -> None:
        if i not in keep or keep[i] is not None:
            keep[i] = None
            work.append((i, _reads(cells[i]["source"])))

    for i, cell in enumerate(cells):
        if cell.get("exercise") or parsed[i] is None:
            whole(i)
    while work:
        reader, names = work.pop()
        for name in names:
            binders = [b for b in bound_by.get(name, ()) if b[0] != reader]
            before = [b for b in binders if b[0] < reader]
            for i, j in {max(binders, default=None), max(before, default=None)} - {None}:
                if parsed[i] is None:
                    continue  # kept whole already
                if not isinstance(parsed[i][j], (ast.Import, ast.ImportFrom)):
                    whole(i)
                elif keep.get(i, ()) is not None:
                    keep.setdefault(i, set()).add(j)
    kept = []
    for i, cell in enumerate(cells):
        if keep.get(i, ()) is None:
            kept.append(cell)
        elif i in keep:
            text = "\n".join(ast.get_source_segment(cell["source"], parsed[i][j]) or "" for j in sorted(keep[i]))
            kept.append({"label": cell["label"] + " (imports)", "source": text + "\n"})
    return kept


def forbidden(master: dict[str, Any]) -> dict[str, list[str]]:
    """Per exercise, the functions its answer may not use (the answer cell's ``forbid`` metadata), made stubs in its
    learner process; a kernel exercise's are refused in its source instead (`answer_source`)."""
    found = {}
    for cell in master["cells"]:
        if nbio.is_answer(cell) and not nbio.meta(cell).get("kernel"):
            names = nbio.meta(cell).get("forbid", [])
            found[nbio.meta(cell)["exercise"]] = [str(n) for n in names] if isinstance(names, list) else []
    return found


def merged_notebook(master: dict[str, Any], sub: dict[str, Any], gpu: bool,
                    exercises: frozenset[str] | None = None) -> dict[str, Any]:
    """The master with the learner's answers in it, for nbval: the check cells run the checks' stand-in, whose
    records the grader judges, so their output is not compared; GPU cells skip without a GPU; with `exercises`, the
    answer and check cells of other exercises skip."""
    nb = nbio.clone(master)
    answers = nbio.answers(sub)
    for cell in nb["cells"]:
        if cell.get("cell_type") != "code":
            continue
        cell_tags = set(nbio.tags(cell))
        if nbio.is_answer(cell):
            nbio.set_source(cell, answer_source(cell, answers))
            cell["outputs"] = []
        if nbio.is_check(cell) or "gpu" in cell_tags:
            cell_tags.add("nbval-ignore-output")  # the grader judges the checks; GPU demos differ run to run
        if "gpu" in cell_tags and not gpu:
            cell_tags.add("nbval-skip")
        other = nbio.meta(cell).get("exercise")
        if exercises is not None and other is not None and str(other) not in exercises:
            cell_tags.add("nbval-skip")
        cell.setdefault("metadata", {})["tags"] = sorted(cell_tags)
    return nb


def nbval_available() -> str | None:
    """None when nbval can run here, else why not."""
    for module in ("nbval", "jupyter_client", "ipykernel"):
        if importlib.util.find_spec(module) is None:
            return f"nbval needs jupyter ({module} is missing: pip install nbval ipykernel)"
    return None


def _junit(path: Path) -> list[ET.Element]:
    try:
        return list(ET.parse(path).getroot().iter("testcase"))
    except (OSError, ET.ParseError):
        return []


_ANSI = re.compile(r"(?:\x1b|#x1B)\[[0-9;]*m")  # colour codes, raw or as junit escapes them


def _outcome(case: ET.Element) -> tuple[str, str]:
    for tag, status in (("failure", FAILED), ("error", FAILED), ("skipped", NOT_RUN)):
        node = case.find(tag)
        if node is not None:
            text = _ANSI.sub("", (node.get("message") or node.text or "")).strip()
            return status, text.splitlines()[0][:500] if text else tag
    return PASSED, ""


def _run(cmd: list[str], deadline: float, **kw: Any) -> bool:
    """Run a trusted subprocess (pytest) in its own session until it ends or `deadline`; False if it was killed."""
    left = deadline - time.monotonic()
    if left <= 0:
        return False
    process = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True, **kw)
    try:
        process.wait(timeout=left)
        return True
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
        return False


def read_capped(path: Path, limit: int) -> Any:
    """JSON from a file a learner process wrote: not through a symlink, at most `limit` bytes; None otherwise."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as f:
        data = f.read(limit + 1)
    if len(data) > limit:
        return None
    try:
        return json.loads(data)
    except (ValueError, RecursionError):
        return None


# nbval imports nbformat, whose jsonschema builds an RFC 3987 grammar at import when `rfc3987_syntax` is installed:
# 2 of the 3 seconds pytest takes to start. Notebook validation never checks that format, so that import is skipped.
_PYTEST_WITHOUT_URI_GRAMMAR = ("import sys; sys.modules['rfc3987_syntax'] = None; import pytest; "
                               "sys.exit(pytest.main(sys.argv[1:]))")
KERNEL_NAME = "cutecourse-jail"


@dataclass
class Grade:
    """What one grade needs in every part: the course, the master, the submission, the walls, the clock."""

    course: Course
    lesson: str
    master: dict[str, Any]
    sub: dict[str, Any]
    walls: isolation.Walls
    gpu: bool
    timeout: float
    deadline: float
    exercises: frozenset[str] | None  # None: all of them
    work: Path

    def wanted(self, exercise: str) -> bool:
        return self.exercises is None or exercise in self.exercises

    @functools.cached_property
    def cells(self) -> list[dict[str, str]]:
        """What the plain learner processes run (:func:`learner_cells`): worked out once, before the grade's threads
        start (CPython 3.11's ast is not safe to use from two threads at once)."""
        hidden = self.course.hidden / f"test_{self.lesson}.py"
        return learner_cells(self.master, self.sub, hidden.read_text() if hidden.exists() else "")

    @functools.cached_property
    def preload(self) -> tuple[str, ...]:
        return sandbox.preloads(self.cells)

    def call_timeout(self) -> float:
        return max(0.1, min(self.timeout, self.deadline - time.monotonic()))


def check_cells(g: Grade) -> list[tuple[int, dict[str, Any]]]:
    return [(i, c) for i, c in enumerate(g.master["cells"])
            if nbio.is_check(c) and g.wanted(str(nbio.meta(c).get("exercise", "?")))]


def run_nbval(g: Grade) -> tuple[dict[int, tuple[str, str]], dict[str, str]]:
    """(nbval's status and message per check-cell index, the judged line per check name from the kernel's records)."""
    path = g.work / "merged.ipynb"
    nbio.dump(merged_notebook(g.master, g.sub, g.gpu, g.exercises), path)
    scratch, runtime = g.walls.scratch("kernel"), g.walls.scratch("kernel-sockets")
    records = scratch / "records"
    records.mkdir()
    if g.walls.isolation.kind == "uid":
        os.chown(records, isolation.NOBODY, isolation.NOBODY)
    names = {nbio.meta(c).get("check") for _, c in check_cells(g)}
    specs = {n: checks_module.REGISTRY[n].spec() for n in names if n in checks_module.REGISTRY}
    # The cases only: what the learner's functions return on them is judged here, against the grader's own cases.
    (scratch / "check-specs.json").write_text(json.dumps(specs))
    kernel = g.walls.command([sys.executable, "-m", "cutecourse.grading.sandbox", "--kernel", "-f",
                              "{connection_file}"], scratch, writable=[str(runtime)],
                             env={sandbox.CHECK_SPECS_ENV: str(scratch / "check-specs.json"),
                                  sandbox.RECORDS_ENV: str(records),
                                  "CUTECOURSE_DENY": os.pathsep.join(g.course.deny())})
    spec_dir = g.work / "jupyter" / "kernels" / KERNEL_NAME
    spec_dir.mkdir(parents=True)
    (spec_dir / "kernel.json").write_text(json.dumps({"argv": kernel, "display_name": "learner (jailed)",
                                                      "language": "python"}))
    xml = g.work / "nbval.xml"
    cmd = [sys.executable, "-c", _PYTEST_WITHOUT_URI_GRAMMAR, "--nbval-lax", str(path),
           f"--nbval-cell-timeout={max(1, int(g.timeout))}", f"--nbval-kernel-name={KERNEL_NAME}",
           "-p", "cutecourse.grading.kernel_jail", "-p", "no:cacheprovider", "-o", "addopts=", "-q",
           f"--junitxml={xml}", f"--rootdir={g.work}"]
    nbval_env = dict(os.environ, JUPYTER_PATH=str(g.work / "jupyter"), JUPYTER_RUNTIME_DIR=str(runtime),
                     JUPYTER_CONFIG_DIR=str(g.work / "jupyter-config"), JUPYTER_DATA_DIR=str(g.work / "jupyter"),
                     JUPYTER_PLATFORM_DIRS="1")
    # nbval shuts its kernel down; were nbval killed, the kernel's bwrap dies with it (--die-with-parent). Either
    # way each check cell's record was written before that cell's reply, so the records are whole now.
    finished = _run(cmd, g.deadline, cwd=g.work, env=nbval_env)
    results: dict[int, tuple[str, str]] = {}
    if finished:
        # nbval numbers code cells only.
        code_cells = [i for i, c in enumerate(g.master["cells"]) if c.get("cell_type") == "code"]
        for case in _junit(xml):
            found = re.search(r"Cell (\d+)", case.get("name", ""))
            if found and int(found.group(1)) < len(code_cells):
                results[code_cells[int(found.group(1))]] = _outcome(case)
    lines = {}
    for name in specs:
        recorded = read_capped(records / f"{name}.json", MAX_RECORD_BYTES)
        lines[name] = checks_module.judge_records(checks_module.REGISTRY[name], recorded or [])
    return results, lines


def rejudge(g: Grade) -> dict[int, str]:
    """Each check's line, with the learner's function run in a plain jailed process (one per forbid set)."""
    forbid = forbidden(g.master)
    cells = g.cells
    groups: dict[tuple[str, ...], list[tuple[int, Any, str]]] = {}
    for index, cell in check_cells(g):
        info = nbio.meta(cell)
        check = checks_module.REGISTRY.get(info.get("check"))
        exercise = str(info.get("exercise", "?"))
        if check is not None and (g.gpu or check.gpu is None):
            groups.setdefault(tuple(forbid.get(exercise, [])), []).append((index, check, exercise))
    lines = {}
    for names, members in groups.items():
        with sandbox.Learner(cells, g.walls, forbid=names, exercise=members[0][2], deny=g.course.deny(),
                             timeout=g.call_timeout(), preload=g.preload) as learner:
            for index, check, _ in members:
                if time.monotonic() >= g.deadline:
                    lines[index] = f"{checks_module.FAIL} {check.name}: the grade ran out of time before this check"
                    continue
                learner.timeout = g.call_timeout()
                lines[index] = checks_module.grade(check, learner)
    return lines


def grade_checks(g: Grade, notes: list[str]) -> list[TestResult]:
    why_not = nbval_available()
    if why_not:
        notes.append(f"{why_not}: each check is judged in a plain learner process only")
    nbval: dict[int, tuple[str, str]] = {}
    recorded: dict[str, str] = {}
    with ThreadPoolExecutor(1) as pool:
        judged = pool.submit(rejudge, g)  # independent of nbval's run, so the two go side by side
        if not why_not:
            nbval, recorded = run_nbval(g)
        verdicts = judged.result()
    results = []
    for index, cell in check_cells(g):
        info = nbio.meta(cell)
        name, exercise = info.get("check", f"cell {index}"), str(info.get("exercise", "?"))
        check = checks_module.REGISTRY.get(name)
        test = f"check {name} (cell {index})"
        if check is None:
            results.append(TestResult(test, exercise, 1, FAILED, f"the course has no check named {name!r}"))
            continue
        if check.gpu is not None and not g.gpu:
            results.append(TestResult(test, exercise, 1, NOT_RUN, f"not run: needs sm_{check.gpu}; this machine has "
                                                                  f"no GPU"))
            continue
        status, message = PASSED, ""
        if not why_not:
            status, message = nbval.get(index, (FAILED, "nbval did not finish this cell in time"))
            line = recorded.get(name, "")
            if status == PASSED and not line.startswith(checks_module.PASS):
                status, message = FAILED, f"in the notebook: {line}"
        line = verdicts.get(index, f"{checks_module.FAIL} {name}: not judged")
        if status == PASSED and not line.startswith(checks_module.PASS):
            status, message = FAILED, line
        results.append(TestResult(test, exercise, 1, status, message))
    return results


@dataclass(frozen=True)
class HiddenTest:
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
        exercise, points, gpu = None, 1.0, None
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
    run_env = dict(os.environ, **{plugin.ANSWERS_ENV: str(answers), isolation.WALLS_ENV: str(g.walls.spec_path),
                                  sandbox.TIMEOUT_ENV: str(g.timeout)})
    cmd = [sys.executable, "-m", "pytest", str(g.course.hidden / f"test_{g.lesson}.py"), "-p",
           "cutecourse.grading.plugin", "--noconftest", "-p", "no:nbval", "-p", "no:cacheprovider", "-o", "addopts=",
           "-q", f"--junitxml={xml}", f"--rootdir={g.course.hidden}"]
    if g.exercises is not None:
        cmd.append(f"--cutecourse-exercise={','.join(sorted(g.exercises))}")
    finished = _run(cmd, g.deadline, cwd=g.work, env=run_env)
    outcomes = {case.get("name"): _outcome(case) for case in _junit(xml)}
    results = []
    for t in expected:
        gpu_missing = t.gpu is not None and not g.gpu
        status, message = outcomes.get(t.name, (NOT_RUN, f"not run: needs sm_{t.gpu}") if gpu_missing else (
            FAILED, "did not finish: the hidden tests ran out of time" if not finished
            else "did not report (the hidden test run ended early)"))
        results.append(TestResult(f"hidden {t.name}", t.exercise, t.points, status, message))
    return results


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
    limits = limits or isolation.Limits(memory_mb=plugin.GPU_MEMORY_MB if gpu else plugin.CPU_MEMORY_MB)
    with tempfile.TemporaryDirectory(prefix="cutecourse-grade-") as work, \
            isolation.Walls(walls_kind, limits, gpu, PACKAGE_DIR, Path(work) / "walls") as walls:
        g = Grade(course, lesson, master, sub, walls, gpu, timeout, time.monotonic() + budget, exercises, Path(work))
        g.preload  # noqa: B018 - the cells parsed here: CPython 3.11's ast is not safe from two threads at once
        with ThreadPoolExecutor(max_workers=2) as pool:
            # The two halves wait on their own subprocesses, so they run side by side.
            hidden_part = pool.submit(grade_hidden, g, wanted) if hidden else None
            checks_part = grade_checks(g, report.notes) if nbval else []
            report.tests = checks_part + (hidden_part.result() if hidden_part else [])
        over_memory = walls.over_memory
        walls.kill()  # nothing of the submission runs while its report is made
        if over_memory:
            report.notes.append(f"the submission went over its {limits.memory_mb} MiB of memory: all its processes "
                                f"were killed")
    after = fingerprint(course)
    changed = sorted(k for k, v in after.items() if before.get(k) != v) + sorted(set(before) - set(after))
    if changed:
        for t in report.tests:
            t.status, t.output = FAILED, f"the submission changed the course's files ({changed[0]}); restore them"
        report.notes.append(f"files changed during grading: {', '.join(changed)}; run git checkout before regrading")
    for t in report.tests:
        t.elsewhere = gpu_elsewhere and t.status == NOT_RUN  # only hardware this machine lacks makes a test not run
    return report
