"""`cutecourse grade --jobs N`: a class graded side by side writes exactly the reports of grading it one by one, one
GPU per worker, and a worker that dies or hangs costs only its own submission."""

from __future__ import annotations

import tempfile
import threading
import time

import pytest

from cutecourse.cli import main
from cutecourse.grading import batch, grader, isolation, reports

from .jail import needs_jail
from .submissions import SOLUTION_0_1, WRONG_0_1

pytestmark = pytest.mark.slow
TIMEOUT = 20
REPORTS = ("results.json", "junit.xml", "grades.csv", "summary.md")
#: Kills every process it can signal: in bubblewrap, only its own jail's.
KILLS_ALL = "import os, signal\ntry:\n    os.kill(-1, signal.SIGKILL)\nexcept OSError:\n    pass\n" + SOLUTION_0_1


@pytest.fixture(autouse=True)
def room_for_the_jobs(monkeypatch, request):
    """The demo's submissions use a few hundred MiB, far from their limit: these tests grade side by side on a
    machine of any size (the test of the memory check itself reads the host's)."""
    if "memory_check" not in request.node.name:
        monkeypatch.setattr(batch, "available_mb", lambda: 2**30)


@needs_jail  # workers run side by side only in bubblewrap
def test_jobs_write_byte_for_byte_the_reports_of_grading_one_by_one(demo_course, make_submission, tmp_path):
    paths = [make_submission("batch_right", {"0.1": SOLUTION_0_1}), make_submission("batch_wrong", {"0.1": WRONG_0_1}),
             make_submission("batch_kills_all", {"0.1": KILLS_ALL}),
             make_submission("batch_right_again", {"0.1": SOLUTION_0_1})]
    unreadable = tmp_path / "unreadable" / "00_demo.ipynb"
    unreadable.parent.mkdir()
    unreadable.write_text("{not json")
    paths.insert(2, unreadable)
    args = ["grade", *map(str, paths), "--course", str(demo_course.root), "--hidden", str(demo_course.hidden),
            "--timeout", str(TIMEOUT), "--exercise", "0.1"]
    assert main(args + ["--out", str(tmp_path / "one_by_one")]) == 1
    assert main(args + ["--out", str(tmp_path / "jobs"), "--jobs", "3"]) == 1
    for name in REPORTS:
        assert (tmp_path / "jobs" / name).read_bytes() == (tmp_path / "one_by_one" / name).read_bytes(), name
    rows = [line.split(",") for line in (tmp_path / "jobs" / "grades.csv").read_text().splitlines()[1:]]
    assert [r[0] for r in rows] == list(map(str, paths))  # in the order given, whatever finished first
    # The submission that killed what it could harmed no neighbour: both right answers have every point.
    assert [r[2:4] for r in rows] == [["3", "3"], ["0", "3"], ["0", "3"], ["3", "3"], ["3", "3"]]


def test_a_worker_that_dies_or_hangs_costs_only_its_own_submission(demo_course, make_submission, monkeypatch,
                                                                    tmp_path):
    path = make_submission("worker_dies", {"0.1": SOLUTION_0_1})
    died = batch.in_worker(path, demo_course, {"no_such_option": 1}, None)  # the worker raises before grading
    assert died.score == 0 and died.max_score == 7 and died.lesson == "00_demo"
    assert "without a report" in died.tests[0].output and "no_such_option" in died.tests[0].output
    # Stopped mid-grade, the worker takes its trusted pytest runs and their jails with it.
    killed: list[int] = []
    monkeypatch.setattr(isolation, "descendants", lambda pid, real=isolation.descendants: killed.extend(real(pid))
                        or set(killed))
    monkeypatch.setattr(batch, "worker_limit", lambda *a: 6.0)
    hangs = make_submission("worker_hangs", {"0.1": "def row_major_strides(shape):\n    while True:\n        pass\n"})
    monkeypatch.setenv("TMPDIR", str(tmp_path))  # the worker's temporary folders, and this process's
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    started = time.monotonic()
    hung = batch.in_worker(hangs, demo_course, {"timeout": TIMEOUT}, None)
    assert time.monotonic() - started < 30
    assert hung.score == 0 and "ran past 6 s and was stopped" in hung.tests[0].output
    assert killed, "the worker had started nothing in 6 s"
    time.sleep(0.5)
    assert not [pid for pid in killed if isolation._alive(pid)]
    assert not list(tmp_path.iterdir()), "the stopped worker left its grade's folder (the answers) behind"


def test_each_worker_gets_one_gpu_and_reports_keep_the_order_given(demo_course, monkeypatch):
    monkeypatch.setattr(batch, "visible_gpus", lambda: ["0", "1"])
    monkeypatch.setattr(isolation, "choose", lambda *a: isolation.Isolation("bwrap", "test"))
    lock = threading.Lock()
    busy = {}
    seen = []

    def fake_worker(submission, course, options, gpu, live):
        with lock:
            busy[gpu] = busy.get(gpu, 0) + 1
            seen.append((gpu, sum(busy.values())))
        time.sleep(0.2 if submission.startswith("a") else 0.05)  # the first finishes last
        with lock:
            busy[gpu] -= 1
        return grader.Report(submission, "00_demo")

    monkeypatch.setattr(batch, "in_worker", fake_worker)
    names = ["a.ipynb", "b.ipynb", "c.ipynb", "d.ipynb", "e.ipynb"]
    found = batch.grade_many(names, demo_course, {}, jobs=3, progress=False)
    assert [r.submission for r in found] == names
    assert {gpu for gpu, _ in seen} == {"0", "1"} and max(n for _, n in seen) <= 3


def test_visible_gpus_follow_cuda_visible_devices(monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2, 3")
    assert batch.visible_gpus() == ["2", "3"]
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "-1")
    assert batch.visible_gpus() == []


@pytest.fixture
def named(tmp_path):
    """Paths the command line takes (`cli`'s usage check wants a notebook that exists and names a lesson): the demo's
    exercise notebook in folders a/ and b/; the batch's own checks come after that one."""
    made = []
    for folder in ("a", "b"):
        path = tmp_path / folder / "00_demo.ipynb"
        path.parent.mkdir()
        path.write_text("{}")
        made.append(str(path))
    return made


@pytest.mark.parametrize("kind, detail", [("uid", "uid 65534 (test)"), ("none", "none (test)")])
def test_jobs_refuse_any_isolation_but_bubblewrap(kind, detail, demo_course, monkeypatch, capsys, named):
    monkeypatch.setattr(isolation, "choose", lambda *a: isolation.Isolation(kind, detail))
    with pytest.raises(isolation.IsolationError, match="--jobs 2 needs bubblewrap.*--jobs 1"):
        batch.grade_many(["x.ipynb"], demo_course, {}, jobs=2)
    assert main(["grade", named[0], "--course", str(demo_course.root), "--jobs", "2"]) == 2
    assert "could signal or trace one another" in capsys.readouterr().err


def test_a_batch_refuses_no_workers_and_a_notebook_given_twice(demo_course, capsys, named):
    assert main(["grade", named[0], "--course", str(demo_course.root), "--jobs", "0"]) == 2
    assert "--jobs 0: give 1 or more workers" in capsys.readouterr().err
    assert main(["grade", named[0], named[1], named[0], "--course", str(demo_course.root)]) == 2
    assert f"{named[0]} is given more than once" in capsys.readouterr().err


@pytest.mark.parametrize("jobs", [1, 2])
def test_a_grader_failure_costs_its_submission_and_the_batch_goes_on(jobs, demo_course, monkeypatch):
    monkeypatch.setattr(isolation, "choose", lambda *a: isolation.Isolation("bwrap", "test"))

    def fails_on_b(submission, *args, **kwargs):
        if submission.startswith("b"):
            raise RuntimeError("a bug in the grader")
        return grader.Report(submission, "00_demo")

    monkeypatch.setattr(*((grader, "grade") if jobs == 1 else (batch, "in_worker")), fails_on_b)
    found = batch.grade_many(["a/00_demo.ipynb", "b/00_demo.ipynb", "c/00_demo.ipynb"], demo_course, {}, jobs=jobs,
                             progress=False)
    assert [r.submission for r in found] == ["a/00_demo.ipynb", "b/00_demo.ipynb", "c/00_demo.ipynb"]
    assert found[1].max_score == 7 and found[1].score == 0
    assert found[1].tests[0].output == "the grader failed: RuntimeError: a bug in the grader"


@pytest.mark.parametrize("options", [
    {"nbval": True, "hidden": True, "timeout": 120.0, "lesson": None, "exercise": None, "isolation_kind": "auto",
     "gpu_elsewhere": False},
    {"nbval": False, "hidden": True, "timeout": 30.0, "lesson": "00_demo", "exercise": "0.2", "isolation_kind": "bwrap",
     "gpu_elsewhere": True},
    {"nbval": True, "hidden": False, "timeout": 7.5, "lesson": None, "exercise": "0.1", "isolation_kind": "none",
     "gpu_elsewhere": False},
])
def test_the_flags_a_workflow_runs_grade_with_the_same_options(options, demo_course, monkeypatch, named):
    got = {}
    monkeypatch.setattr(isolation, "choose", lambda *a: isolation.Isolation("bwrap", "test"))
    monkeypatch.setattr(batch, "grade_many", lambda subs, course, opts, **kw: got.update(opts) or [])
    monkeypatch.setattr(reports, "write", lambda *a: [])
    main(["grade", named[0], "--course", str(demo_course.root), *batch.flags(options)])
    assert got == options


@needs_jail  # the check comes after the one for bubblewrap
def test_jobs_memory_check_refuses_n_limits_past_the_hosts_memory_and_says_the_fix(demo_course, monkeypatch, capsys,
                                                                                  named):
    memory_mb = grader.default_limits(False).memory_mb
    monkeypatch.setattr(batch, "visible_gpus", lambda: [])
    monkeypatch.setattr(batch, "available_mb", lambda: 3 * memory_mb + 100)
    refused = (rf"--jobs 4: 4 submissions × {memory_mb} MiB of memory each is {4 * memory_mb} MiB, more than the "
               rf"{3 * memory_mb + 100} MiB this machine has available; give --jobs 3 or fewer")
    with pytest.raises(ValueError, match=refused):
        batch.grade_many(["x.ipynb"], demo_course, {}, jobs=4)
    assert main(["grade", named[0], "--course", str(demo_course.root), "--jobs", "4"]) == 2
    assert "give --jobs 3 or fewer" in capsys.readouterr().err
    monkeypatch.setattr(batch, "available_mb", lambda: memory_mb + 100)
    with pytest.raises(ValueError, match="grade with --jobs 1"):
        batch.grade_many(["x.ipynb"], demo_course, {}, jobs=2)
    # Where the memory is there, the same call goes on to grade (the check is what refused).
    monkeypatch.setattr(batch, "available_mb", lambda: 4 * memory_mb)
    monkeypatch.setattr(batch, "in_worker", lambda submission, *a: grader.Report(submission, "00_demo"))
    assert [r.submission for r in batch.grade_many(["x.ipynb"], demo_course, {}, jobs=4, progress=False)] == ["x.ipynb"]


def test_jobs_memory_check_reads_the_hosts_available_memory():
    meminfo = {line.split(":")[0]: int(line.split()[1]) for line in open("/proc/meminfo")}
    assert abs(batch.available_mb() - meminfo["MemAvailable"] // 1024) < 512
