"""A trusted pytest run (the hidden tests, nbval): in its own session until a deadline, and the outcome of each test
case its JUnit XML reports.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import time
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

from cutecourse.grading.results import FAILED, NOT_RUN, PASSED

#: The grader's pytest runs load only the plugins their command names (`-p`): the installed ones that load themselves
#: (hypothesis, xdist, anyio) took 0.75 of the 1 CPU-second pytest needs to start, twice per grade.
PLUGINS_BY_NAME_ONLY = {"PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}


def run(cmd: list[str], deadline: float, env: dict[str, str] | None = None, **kw: Any) -> bool:
    """Run a trusted subprocess (pytest, with `PLUGINS_BY_NAME_ONLY`) in its own session until it ends or `deadline`;
    False if it was killed."""
    left = deadline - time.monotonic()
    if left <= 0:
        return False
    env = dict(os.environ if env is None else env, **PLUGINS_BY_NAME_ONLY)
    process = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
                               env=env, **kw)
    try:
        process.wait(timeout=left)
        return True
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
        return False


def testcases(path: Path) -> list[ET.Element]:
    """The test cases of the JUnit XML at `path`; none where the run left no readable file."""
    try:
        return list(ET.parse(path).getroot().iter("testcase"))
    except (OSError, ET.ParseError):
        return []


_ANSI = re.compile(r"(?:\x1b|#x1B)\[[0-9;]*m")  # colour codes, raw or as junit escapes them


#: The first line of every failed cell's message under nbval; the line after it says what failed (a cell that ran
#: past its time limit: "Cell 12: Timeout of 20 seconds exceeded executing cell").
NBVAL_FAILED = "Notebook cell execution failed"


def outcome(case: ET.Element) -> tuple[str, str]:
    """(status, the first line of its message) of a JUnit test case, without terminal colours; for a notebook cell
    nbval failed, with the line that says why."""
    for tag, status in (("failure", FAILED), ("error", FAILED), ("skipped", NOT_RUN)):
        node = case.find(tag)
        if node is not None:
            lines = [line for line in _ANSI.sub("", (node.get("message") or node.text or "")).splitlines()
                     if line.strip()]
            if len(lines) > 1 and lines[0].strip() == NBVAL_FAILED:
                return status, f"{NBVAL_FAILED}: {lines[1].strip()}"[:500]
            return status, lines[0].strip()[:500] if lines else tag
    return PASSED, ""
