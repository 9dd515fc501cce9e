"""Hostile submissions against `cutecourse grade`, one per kind of attack: each gains nothing, changes no file outside
its own scratch and out-dir (the course, the environment and another student's reports are hashed before and after),
leaves no process behind, and finishes within the grade's stated time bound.

Each attack answers exercise 0.1 of the demo course with a wrong function, and with the right one only if the attack
worked (it read an answer, found a reference, ...): so a score of 0 on 0.1, as for the untouched exercise, shows
that it did not.
"""

from __future__ import annotations

import hashlib
import json
import sys
import sysconfig
import time
from pathlib import Path

import pytest

from cutecourse.cli import main
from cutecourse.grading import grader, isolation, reports, results
from cutecourse.grading import notebook as nbio
from cutecourse.grading.cells import learner_cells

from .jail import ISOLATION, needs_jail
from .submissions import DEMO, ROOT, SOLUTION_0_1, WRONG_0_1

pytestmark = [pytest.mark.slow, needs_jail]
TIMEOUT = 10
SOLVED = SOLUTION_0_1.replace("def row_major_strides", "def _solved")
HIDDEN_FILE = DEMO / "hidden" / "test_00_demo.py"
SOLUTION_FILE = DEMO / "solutions" / "00_demo.ipynb"
SITE = Path(sysconfig.get_paths()["purelib"])


def _gain(found: str) -> str:
    """The answer that scores only if `found` (an expression evaluated in the learner's process) is true."""
    return f"""
{WRONG_0_1}
{SOLVED}
if {found}:
    row_major_strides = _solved
"""


def digest(*roots: Path) -> str:
    """A hash of every file under `roots`: path, size, mtime, and the bytes of the small ones."""
    h = hashlib.sha256()
    for root in roots:
        for path in sorted(root.rglob("*")) if root.is_dir() else [root]:
            if path.is_file() and "__pycache__" not in path.parts:
                st = path.stat()
                h.update(f"{path}|{st.st_size}|{st.st_mtime_ns}".encode())
                if st.st_size < 1 << 20:
                    h.update(path.read_bytes())
    return h.hexdigest()


def environment_digest() -> str:
    """The course, the package, and the Python environment's top level (.pth files, the editable finder)."""
    top = [p for p in sorted(SITE.iterdir()) if p.is_file()]
    return digest(DEMO, ROOT / "cutecourse", *top, Path(sys.prefix) / "pyvenv.cfg")


def jail_processes(markers: list[str]) -> list[int]:
    """Processes whose environment carries one of these walls' markers: only this test's jails (another test may be
    grading at the same time, under pytest-xdist), daemons that left their process group included."""
    needles = [f"CUTECOURSE_JAIL={marker}".encode() for marker in markers]
    found = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                environ = (proc / "environ").read_bytes()
            except OSError:
                continue
            if any(needle in environ for needle in needles):
                found.append(int(proc.name))
    return found


@pytest.fixture(scope="module")
def neighbour(tmp_path_factory) -> Path:
    """Another student's reports, already written."""
    out = tmp_path_factory.mktemp("neighbour")
    report = results.Report("neighbour/00_demo.ipynb", "00_demo",
                            [results.TestResult("check row_major_strides (cell 4)", "0.1", 1, results.PASSED)])
    reports.write([report], out)
    return out


@pytest.fixture
def attack(demo_course, make_submission, neighbour, tmp_path, monkeypatch):
    """attack(name, answers) -> the report, after checking that nothing outside changed and nothing survived."""
    made: list[str] = []  # the names (jail markers) of the walls the grades make
    build_walls = isolation.Walls.__init__

    def recorded(walls: isolation.Walls, *args, **kwargs) -> None:
        build_walls(walls, *args, **kwargs)
        made.append(walls.name)

    monkeypatch.setattr(isolation.Walls, "__init__", recorded)

    def run(name: str, answers: dict[str, str], timeout: float = TIMEOUT) -> results.Report:
        made.clear()
        before, theirs = environment_digest(), digest(neighbour)
        started = time.monotonic()
        report = grader.grade(make_submission(name, answers), demo_course, timeout=timeout, isolation_kind=ISOLATION)
        elapsed = time.monotonic() - started
        reports.write([report], tmp_path / "out")
        time.sleep(1.0)  # anything left running would act now
        assert made, f"{name}: the grade made no walls to look for"
        assert jail_processes(made) == [], f"{name}: learner processes outlived the grade"
        assert environment_digest() == before, f"{name}: the course or its environment changed"
        assert digest(neighbour) == theirs, f"{name}: another student's reports changed"
        budget = timeout * 4  # the demo has 2 check cells and 2 hidden tests
        assert elapsed < budget + 5, f"{name}: the grade took {elapsed:.0f} s, over its bound of {budget:g} s"
        assert report.max_score == 7, f"{name}: the maximum shrank to {report.max_score}"
        return report

    return run


def test_reading_the_answers_gains_nothing(attack):
    secrets = [str(HIDDEN_FILE), str(SOLUTION_FILE), str(ROOT / ".git" / "HEAD"), str(ROOT / "solutions")]
    answer = f"""
import ctypes, os, glob, zlib, pathlib
import cutecourse
_found = []
def _try(fn):
    try:
        _found.append(bool(fn()))
    except Exception:
        pass
for _p in {secrets!r}:
    _try(lambda: open(_p).read())
    _try(lambda: os.read(os.open(os.path.basename(_p), os.O_RDONLY,
                                 dir_fd=os.open(os.path.dirname(_p), os.O_RDONLY)), 100))
    _try(lambda: os.link(_p, "/tmp/stolen") or open("/tmp/stolen").read())
    _try(lambda: ctypes.CDLL(None).fopen(_p.encode(), b"r"))
# git's object store holds every solution
_try(lambda: any(b"row_major_strides" in zlib.decompress(open(f, "rb").read())
                 for f in glob.glob({str(ROOT / '.git' / 'objects')!r} + "/*/*")))
# next to the package, wherever it was installed from
_try(lambda: (pathlib.Path(cutecourse.__file__).parents[1] / "tests/grading/demo/hidden/test_00_demo.py").read_text())
_try(lambda: os.listdir("/proc/1/root" + {str(DEMO / 'hidden')!r}))
""" + _gain("any(_found)")
    report = attack("reads_answers", {"0.1": answer})
    assert report.exercises()["0.1"][0] == 0, reports.summary(report)


def test_reading_the_references_in_memory_gains_nothing(attack):
    answer = """
import gc, sys, importlib, importlib.util
_names = ("_judge_row_major", "_row_major_cases", "test_row_major_strides_on_random_shapes")
_found = [m for m in list(sys.modules) if m.startswith("cutecourse.grading.checks.")]
_found += [o for o in gc.get_objects() if getattr(o, "__name__", None) in _names]
for _mod in ("cutecourse.grading.checks.demo", "cutecourse.grading.checks.l02_layouts"):
    try:
        _found.append(importlib.import_module(_mod))
    except Exception:
        pass
try:
    import cutecourse.grading as _g, os
    _path = os.path.join(os.path.dirname(_g.__file__), "checks", "demo.py")
    _spec = importlib.util.spec_from_file_location("stolen", _path)
    _m = importlib.util.module_from_spec(_spec); _spec.loader.exec_module(_m); _found.append(_m)
except Exception:
    pass
""" + _gain("_found")
    report = attack("reads_references", {"0.1": answer})
    assert report.exercises()["0.1"][0] == 0, reports.summary(report)


def test_writing_for_the_next_student_changes_nothing(attack, demo_course, make_submission):
    targets = [str(SITE / "zz_cutecourse_pwn.pth"), str(ROOT / "cutecourse" / "__init__.py"), str(HIDDEN_FILE),
               str(ROOT / "cutecourse" / "grading" / "checks" / "__pycache__" /
                   f"demo.{sys.implementation.cache_tag}.pyc"),
               str(ROOT / "cutecourse" / "hw" / "roofline.py"), str(DEMO / "exercises" / "00_demo.ipynb"),
               str(Path.home() / ".bashrc")]
    answer = f"""
import os
for _t in {targets!r}:
    try:
        os.makedirs(os.path.dirname(_t), exist_ok=True)
        with open(_t, "a") as _f:
            _f.write("\\nimport builtins; builtins.PWNED = True\\n")
    except OSError:
        pass
""" + WRONG_0_1
    report = attack("writes_for_the_next_student", {"0.1": answer})
    assert report.exercises()["0.1"][0] == 0
    # The digests leave out __pycache__ and the home folder: read those targets themselves.
    written = [t for t in targets if Path(t).is_file() and b"PWNED" in Path(t).read_bytes()]
    assert written == [], f"the submission wrote into {written}"
    # The next students are graded as if nothing had happened.
    untouched = grader.grade(make_submission("after_writes_untouched", {}), demo_course, timeout=TIMEOUT,
                              isolation_kind=ISOLATION)
    honest = grader.grade(make_submission("after_writes_honest", {"0.1": SOLUTION_0_1}), demo_course,
                          timeout=TIMEOUT, isolation_kind=ISOLATION)
    assert untouched.score == 0 and honest.exercises()["0.1"] == (3.0, 3.0), reports.summary(honest)


def test_rewriting_reports_and_copying_a_neighbour_gain_nothing(attack, neighbour, make_submission, tmp_path):
    other = make_submission("the_neighbours_notebook", {"0.1": SOLUTION_0_1})
    answer = f"""
import ctypes, os, signal, time, json
_libc = ctypes.CDLL(None)
_found = False
try:
    _found = "def row_major_strides" in open({str(other)!r}).read()
except OSError:
    pass
for _d in ({str(neighbour)!r}, {str(tmp_path / 'out')!r}, "grading", "../grading"):
    try:
        os.makedirs(_d, exist_ok=True)
        os.symlink("/etc/passwd", os.path.join(_d, "results.json.planted"))
    except OSError:
        pass
if _libc.fork() == 0:  # a daemon that outlives its parent and keeps rewriting the reports
    os.setsid()
    for _s in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
        signal.signal(_s, signal.SIG_IGN)
    for _ in range(600):
        for _d in ({str(neighbour)!r}, {str(tmp_path / 'out')!r}):
            try:
                open(os.path.join(_d, "results.json"), "w").write(json.dumps({{"score": 99, "max_score": 7}}))
            except OSError:
                pass
        time.sleep(0.1)
    os._exit(0)
""" + _gain("_found")
    report = attack("rewrites_reports", {"0.1": answer})
    assert report.exercises()["0.1"][0] == 0
    assert json.loads((tmp_path / "out" / "results.json").read_text())["score"] == report.score
    assert not (tmp_path / "out" / "results.json.planted").exists()


def test_reports_replace_a_planted_symlink_instead_of_writing_through_it(tmp_path):
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me")
    out = tmp_path / "out"
    out.mkdir()
    (out / "results.json").symlink_to(victim)
    reports.write([results.Report("x.ipynb", "00_demo")], out)
    assert victim.read_text() == "keep me" and not (out / "results.json").is_symlink()
    (tmp_path / "linked_out").symlink_to(out)
    with pytest.raises(ValueError, match="is a symlink"):
        reports.write([results.Report("x.ipynb", "00_demo")], tmp_path / "linked_out")


def test_fork_bombs_floods_and_hangs_are_bounded(attack):
    answer = """
import ctypes, os, signal, sys
_libc = ctypes.CDLL(None)
for _ in range(400):  # a fork bomb whose children ignore signals
    if _libc.fork() == 0:
        for _s in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
            signal.signal(_s, signal.SIG_IGN)
        while True:
            _libc.fork()
            _libc.sleep(1)
sys.stdout.write("x" * (64 << 20))  # an output flood
sys.stdout.flush()
while True:  # and a hang at import
    pass
"""
    report = attack("exhausts_time_and_processes", {"0.1": answer})
    assert report.exercises()["0.1"][0] == 0
    assert len(json.dumps(reports.results_json([report]))) < 100_000


def test_a_submission_that_kills_its_processes_ends_fast_and_keeps_the_maximum(attack):
    answer = "import os, signal\nos.kill(os.getppid(), signal.SIGKILL)\nos.kill(os.getpid(), signal.SIGKILL)\n"
    started = time.monotonic()
    report = attack("kills_its_processes", {"0.1": answer + SOLUTION_0_1}, timeout=120)
    # A dead kernel ends nbval at once, not at the 120 s a cell may take: this bounds a hang, with room for a loaded
    # machine (the grade takes seconds), not a speed.
    assert time.monotonic() - started < 60, reports.summary(report)
    assert report.exercises()["0.1"][0] == 0


def test_memory_is_limited_per_submission_not_per_process(demo_course, make_submission):
    answer = """
import ctypes, os
_libc = ctypes.CDLL(None)
_kids = []
for _ in range(3):  # three processes of 1 GiB each, together over the submission's 2 GiB
    _pid = _libc.fork()
    if _pid == 0:
        _block = bytearray(1 << 30)
        for _i in range(0, len(_block), 4096):
            _block[_i] = 1
        _libc.sleep(5)
        os._exit(0)
    _kids.append(_pid)
_ok = all(os.waitpid(p, 0)[1] == 0 for p in _kids)
""" + _gain("_ok")
    limits = isolation.Limits(memory_mb=2048)
    report = grader.grade(make_submission("memory_hog", {"0.1": answer}), demo_course, timeout=30, limits=limits,
                          isolation_kind=ISOLATION)
    assert report.exercises()["0.1"][0] == 0, reports.summary(report)


def test_malformed_submissions_are_rejected_and_the_batch_goes_on(demo_course, make_submission, tmp_path):
    good = make_submission("batch_good", {"0.1": SOLUTION_0_1})
    base = json.loads(good.read_text())
    bad = {
        "deep": '{"cells": ' + "[" * 100_000 + "]" * 100_000 + "}",
        "cells_not_dicts": json.dumps(dict(base, cells=[1, "two", None])),
        "metadata_wrong": json.dumps(dict(base, cells=[{"cell_type": "code", "metadata": [], "source": ""}])),
        "unhashable_id": json.dumps(dict(base, cells=[{"cell_type": "code", "source": "x",
                                                       "metadata": {"cutecourse": {"exercise": ["0.1"]}}}])),
        "source_not_text": json.dumps(dict(base, cells=[{"cell_type": "code", "source": [1, 2],
                                                         "metadata": {"cutecourse": {"exercise": "0.1"}}}])),
        "huge": json.dumps(dict(base, padding="x" * (nbio.MAX_SUBMISSION_BYTES + 1))),
    }
    paths = []
    for name, text in bad.items():
        (tmp_path / name).mkdir()
        paths.append(tmp_path / name / "00_demo.ipynb")
        paths[-1].write_text(text)
    out = tmp_path / "out"
    code = main(["grade", *map(str, paths), str(good), "--course", str(demo_course.root), "--hidden",
                 str(demo_course.hidden), "--out", str(out), "--timeout", str(TIMEOUT), "--exercise", "0.1"])
    assert code == 1
    rows = (out / "grades.csv").read_text().splitlines()[1:]
    assert len(rows) == len(bad) + 1 and rows[-1].split(",")[2:4] == ["3", "3"]
    written = json.loads((out / "results.json").read_text())
    rejected = [t for t in written["tests"] if "submission rejected" in t["output"]]
    assert len(rejected) == len(bad), [t["output"] for t in written["tests"]]


def test_a_kernel_answer_that_is_more_than_kernel_code_is_refused_before_it_runs():
    master = nbio.load(DEMO / "exercises" / "00_demo.ipynb")
    cheat = {"cells": [{"cell_type": "code", "metadata": {"cutecourse": {"exercise": "0.2"}},
                        "source": "import torch\ndef scale_host(x, out, alpha, stream):\n    out.copy_(x * alpha)\n"}]}
    (cell,) = [c for c in learner_cells(master, cheat) if c.get("exercise") == "0.2"]
    assert cell["source"].startswith("raise PermissionError(") and "not torch" in cell["source"]


def test_without_the_walls_the_same_attack_reads_the_answers(demo_course, make_submission):
    """The suite can fail: with --isolation none (only an audit hook), reading the answers works and scores."""
    answer = f"""
import ctypes, os
_libc = ctypes.CDLL(None)  # C's open: no audit event (ctypes is closed only where functions are forbidden)
_fd, _buffer = _libc.open({str(HIDDEN_FILE).encode()!r}, os.O_RDONLY), ctypes.create_string_buffer(4096)
_found = _fd >= 0 and _libc.read(_fd, _buffer, 4096) > 0 and b"def test_" in _buffer.raw
""" + _gain("_found")
    open_door = grader.grade(make_submission("reads_answers_unwalled", {"0.1": answer}), demo_course,
                             timeout=TIMEOUT, isolation_kind="none", hidden=False)
    assert open_door.exercises()["0.1"][0] == 1, reports.summary(open_door)
