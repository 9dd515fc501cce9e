"""Gradescope's Docker mode, simulated (issue 32, part 2): a root grader in a container that cannot make namespaces runs
learner code as uid 65534. That uid must get a scratch folder it owns and nothing else writable, and honest work must
earn its points there (it used to score 0: every learner process died at `os.chdir` into a folder under the grader's
root-only temporary folder).

The simulation: the grader runs as root in a mount namespace laid out as the autograder's image is after
`setup.sh` (`classroom.SETUP_SH`): what the grader denies learners is root's alone (a root-only copy of each denied
folder is mounted over it, as `chmod -R go-rwx` leaves them), and this Python is where every user may run it (a
private home folder above it, such as /root here, is replaced by an open one with the Python mounted back). Nothing
else is unshared, and the grader is told `--isolation uid`, as `choose` falls back to it in Docker."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from cutecourse.grading import build, grader, isolation
from cutecourse.grading import notebook as nbio

from .jail import needs_jail
from .submissions import DEMO, ROOT

pytestmark = [pytest.mark.slow, needs_jail,
              pytest.mark.skipif(os.geteuid() != 0, reason="Docker mode has a root grader: run the tests as root")]


def _closed_above(path: Path) -> tuple[Path, Path] | None:
    """(the first folder above `path` that others may not pass through, its child on the way), or None."""
    parts = path.resolve().parents
    for above in reversed(parts):
        if not above.stat().st_mode & stat.S_IXOTH:
            return above, next(p for p in [path.resolve(), *parts] if p.parent == above)
    return None


def docker_mode(tmp_path: Path, command: list[str], env: dict[str, str] | None = None,
                timeout: float = 900) -> subprocess.CompletedProcess:
    """Run `command` as root in the simulated autograder image (see the module's docstring)."""
    locked = set()
    for course in (grader.Course.at(ROOT), grader.Course.at(DEMO, DEMO / "hidden")):
        locked |= {Path(p) for p in course.deny() if Path(p).exists()}
    args = [isolation._bwrap_binary(), "--dev-bind", "/", "/"]
    for n, path in enumerate(sorted(locked)):
        copy = tmp_path / "locked" / str(n)
        if path.name == ".git":  # the grader reads nothing of the history (a worktree's .git is a file)
            copy.parent.mkdir(parents=True, exist_ok=True)
            if path.is_dir():
                copy.mkdir()
            else:
                copy.write_text("")
        else:
            shutil.copytree(path, copy)
        os.chmod(copy, 0o700 if copy.is_dir() else 0o600)
        for folder, _, files in os.walk(copy):
            os.chmod(folder, 0o700)
            for name in files:
                os.chmod(os.path.join(folder, name), 0o600)
        args += ["--bind", str(copy), str(path)]
    closed = _closed_above(Path(sys.base_prefix))
    if closed:
        home, inside = closed
        args += ["--tmpfs", str(home), "--ro-bind", str(inside), str(inside)]
    return subprocess.run([*args, "--", *command], capture_output=True, text=True, timeout=timeout, cwd=ROOT,
                          env=dict(os.environ, **(env or {})))


GRADE = """
import json, sys
from pathlib import Path
from cutecourse.grading import grader, reports
course = grader.Course.at(Path.cwd())
found = {}
for path in sys.argv[1:]:
    report = grader.grade(path, course, timeout=300, isolation_kind="uid")
    found[Path(path).stem] = {"exercises": report.exercises(), "notes": report.notes,
                              "summary": reports.summary(report)}
print(json.dumps(found))
"""


def test_in_docker_mode_the_solutions_earn_every_point_a_cpu_grader_gives(tmp_path):
    lessons = ["01_gpu_hierarchy_tensor_cores", "02_layouts"]  # no GPU test in either
    paths = []
    for lesson in lessons:
        solved = nbio.answers(nbio.load(ROOT / "solutions" / f"{lesson}.ipynb"))
        answers = {exercise: nbio.source(cell) for exercise, cell in solved.items()}
        path = tmp_path / "submissions" / f"{lesson}.ipynb"
        path.parent.mkdir(exist_ok=True)
        nbio.dump(build.filled(nbio.load(ROOT / "exercises" / f"{lesson}.ipynb"), answers), path)
        paths.append(str(path))
    run = docker_mode(tmp_path, [sys.executable, "-c", GRADE, *paths])
    assert run.returncode == 0, run.stderr[-3000:]
    found = json.loads(run.stdout.strip().splitlines()[-1])
    for lesson in lessons:
        graded = found[lesson]
        assert any(f"uid {isolation.NOBODY}" in note for note in graded["notes"]), graded["notes"]
        for exercise, (score, most) in graded["exercises"].items():
            assert score == most, graded["summary"]  # these lessons have no GPU test: every point, on any machine


def test_in_docker_mode_the_attack_suite_still_gains_nothing(tmp_path):
    run = docker_mode(tmp_path, [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                                 str(Path(__file__).with_name("test_attacks.py"))],
                      env={"CUTECOURSE_TEST_ISOLATION": "uid"})
    tail = run.stdout[-3000:] + run.stderr[-1500:]
    assert run.returncode == 0, tail
    assert " passed" in tail and "skipped" not in tail.splitlines()[-1], tail
