"""The checks of a grade, run twice: nbval runs the answers in the master notebook in a jailed kernel, whose checks'
stand-in records what the learner's functions return, judged here; and each check is judged again with the answers in
a plain jailed learner process (`rejudge`). A check passes only if both verdicts pass.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from cutecourse.grading import checks as checks_module
from cutecourse.grading import isolation, sandbox
from cutecourse.grading import notebook as nbio
from cutecourse.grading import pytest_run
from cutecourse.grading.cells import forbidden, merged_notebook
from cutecourse.grading.context import Grade
from cutecourse.grading.results import FAILED, NOT_RUN, PASSED, TestResult

#: The most a notebook's recorded check results may weigh.
MAX_RECORD_BYTES = 64 * 2**20
#: The jupyter kernel nbval runs the merged notebook in: a learner process in the grade's walls.
KERNEL_NAME = "cutecourse-jail"

# nbval imports nbformat, whose jsonschema builds an RFC 3987 grammar at import when `rfc3987_syntax` is installed:
# 2 of the 3 seconds pytest takes to start. Notebook validation never checks that format, so that import is skipped.
_PYTEST_WITHOUT_URI_GRAMMAR = ("import sys; sys.modules['rfc3987_syntax'] = None; import pytest; "
                               "sys.exit(pytest.main(sys.argv[1:]))")


def nbval_available() -> str | None:
    """None when nbval can run here, else why not."""
    for module in ("nbval", "jupyter_client", "ipykernel"):
        if importlib.util.find_spec(module) is None:
            return f"nbval needs jupyter ({module} is missing: pip install nbval ipykernel)"
    return None


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


def check_cells(g: Grade) -> list[tuple[int, dict[str, Any]]]:
    """(index, cell) of the master's check cells of the exercises this grade grades."""
    return [(i, c) for i, c in enumerate(g.master["cells"])
            if nbio.is_check(c) and g.wanted(str(nbio.meta(c).get("exercise", "?")))]


def run_nbval(g: Grade) -> tuple[dict[int, tuple[str, str]], dict[str, str]]:
    """(nbval's status and message per check-cell index, the judged line per check name from the kernel's records)."""
    path = g.work / "merged.ipynb"
    nbio.dump(merged_notebook(g.master, g.sub, g.gpu, g.exercises), path)
    # The kernel works in a tmpfs of its own (in bubblewrap); what the grader shares with it is in host folders: its
    # sockets, and the checks' cases and the records (bounded by the disk watchdog).
    scratch = g.walls.scratch("kernel")
    runtime = g.walls.scratch("kernel-sockets")
    shared = g.walls.scratch("kernel-records")
    records = shared / "records"
    records.mkdir()
    if g.walls.isolation.kind == "uid":
        os.chown(records, isolation.NOBODY, isolation.NOBODY)
    names = {nbio.meta(c).get("check") for _, c in check_cells(g)}
    specs = {n: checks_module.REGISTRY[n].spec() for n in names if n in checks_module.REGISTRY}
    # The cases only: what the learner's functions return on them is judged here, against the grader's own cases.
    (shared / "check-specs.json").write_text(json.dumps(specs))
    command = isolation.python_module("cutecourse.grading.sandbox", "--kernel", "-f", "{connection_file}")
    kernel = g.walls.command(command, scratch, writable=[str(runtime), str(shared)],
                             env={sandbox.CHECK_SPECS_ENV: str(shared / "check-specs.json"),
                                  sandbox.RECORDS_ENV: str(records),
                                  "CUTECOURSE_DENY": os.pathsep.join(g.course.deny())})
    spec_dir = g.work / "jupyter" / "kernels" / KERNEL_NAME
    spec_dir.mkdir(parents=True)
    (spec_dir / "kernel.json").write_text(json.dumps({"argv": kernel, "display_name": "learner (jailed)",
                                                      "language": "python"}))
    xml = g.work / "nbval.xml"
    cmd = [sys.executable, "-c", _PYTEST_WITHOUT_URI_GRAMMAR, "-p", "nbval.plugin", "--nbval-lax", str(path),
           f"--nbval-cell-timeout={max(1, int(g.timeout))}", f"--nbval-kernel-name={KERNEL_NAME}",
           "-p", "cutecourse.grading.kernel_jail", "-p", "no:cacheprovider", "-o", "addopts=", "-q",
           f"--junitxml={xml}", f"--rootdir={g.work}"]
    nbval_env = dict(os.environ, JUPYTER_PATH=str(g.work / "jupyter"), JUPYTER_RUNTIME_DIR=str(runtime),
                     JUPYTER_CONFIG_DIR=str(g.work / "jupyter-config"), JUPYTER_DATA_DIR=str(g.work / "jupyter"),
                     JUPYTER_PLATFORM_DIRS="1")
    if g.walls.isolation.kind == "uid":
        nbval_env[isolation.KERNEL_UID_ENV] = str(isolation.NOBODY)
    # nbval shuts its kernel down; were nbval killed, the kernel's bwrap dies with it (--die-with-parent). Either
    # way each check cell's record was written before that cell's reply, so the records are whole now.
    finished = pytest_run.run(cmd, g.deadline, cwd=g.work, env=nbval_env)
    results: dict[int, tuple[str, str]] = {}
    if finished:
        # nbval numbers code cells only.
        code_cells = [i for i, c in enumerate(g.master["cells"]) if c.get("cell_type") == "code"]
        for case in pytest_run.testcases(xml):
            found = re.search(r"Cell (\d+)", case.get("name", ""))
            if found and int(found.group(1)) < len(code_cells):
                results[code_cells[int(found.group(1))]] = pytest_run.outcome(case)
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
                             timeout=g.timeout, preload=g.preload, deadline=g.deadline) as learner:
            for index, check, _ in members:
                if time.monotonic() >= g.deadline:
                    lines[index] = f"{checks_module.FAIL} {check.name}: the grade ran out of time before this check"
                    continue
                lines[index] = checks_module.grade(check, learner)
    return lines


def grade_checks(g: Grade, notes: list[str]) -> list[TestResult]:
    """One result per check cell, a point each: passed only if nbval's run and the re-judge both pass it (where there
    is no jupyter, the re-judge alone decides, and `notes` says so)."""
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
