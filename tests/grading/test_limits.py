"""Issue 32, part 5: what a submission may use beyond memory and processes, each bounded and shown to be the bound.

- the replies its learner processes send the grader side, summed over the grade (`Limits.replies_mb`);
- the disk it may write: a jail's /tmp and /dev/shm are tmpfs of `Limits.scratch_mb`, its root and /dev read-only,
  and the host folders shared with it (the notebook kernel's sockets and records) summed by the disk watchdog;
- `--jobs N` only where N submissions' memory fits this machine (tests/grading/test_batch.py);
- the grade's time: no call waits past the grade's deadline, so a slow but right answer ends within it.

Each attack answers exercise 0.1 of the demo course and earns nothing from the attack; each limit is also shown to be
what stops it (the same process with the limit lifted, or the old behaviour put back, gets through).
"""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from cutecourse.grading import grader, isolation, reports, sandbox
from cutecourse.grading.results import FAILED, NOT_RUN
from cutecourse.grading.sandbox import Learner, LearnerError

from .jail import needs_jail
from .submissions import SOLUTION_0_1, WRONG_0_1

pytestmark = needs_jail
PACKAGE = Path(grader.PACKAGE_DIR)
MB = 2**20


@pytest.fixture
def grade_watched(demo_course, make_submission, tmp_path, monkeypatch):
    """grade_watched(name, answers, **grade_kw) -> (report, seconds, the most the walls' host folders held): the
    report written, and no learner process left."""
    made: list[isolation.Walls] = []
    build_walls = isolation.Walls.__init__

    def recorded(walls: isolation.Walls, *args, **kwargs) -> None:
        build_walls(walls, *args, **kwargs)
        made.append(walls)

    monkeypatch.setattr(isolation.Walls, "__init__", recorded)
    # The tripwire on the course's files is test_attacks.py's to test; here an edit elsewhere in the package while a
    # grade runs must not hide what the limits said.
    monkeypatch.setattr(grader, "fingerprint", lambda course: {})

    def run(name: str, answers: dict[str, str], **kw) -> tuple[grader.Report, float, int]:
        made.clear()
        peak, done = [0], threading.Event()

        def watch() -> None:
            while not done.wait(0.02):
                for walls in made:
                    peak[0] = max(peak[0], isolation.disk_usage(walls.work))

        watcher = threading.Thread(target=watch, daemon=True)
        watcher.start()
        started = time.monotonic()
        report = grader.grade(make_submission(name, answers), demo_course, **kw)
        elapsed = time.monotonic() - started
        done.set()
        watcher.join()
        assert reports.write([report], tmp_path / name)
        assert made and all(not w.pids() for w in made), f"{name}: learner processes outlived the grade"
        return report, elapsed, peak[0]

    return run


def _walls(**limits) -> isolation.Walls:
    return isolation.Walls(isolation.choose(), isolation.Limits(**limits), gpu=False, package_dir=PACKAGE)


# ---------------------------------------------------------------------------------------------------------------------
# 1. Replies.

#: A wrong answer whose every reply is 48 MiB (under the 256 MiB a reply may be): two replies pass a 64 MiB budget.
FLOOD_REPLIES = """
def row_major_strides(shape):
    return ("x" * (48 << 20),)
"""


def test_replies_past_the_submissions_budget_fail_the_call_with_the_total(grade_watched):
    report, elapsed, _ = grade_watched("reply_flood", {"0.1": FLOOD_REPLIES}, timeout=30,
                                       limits=isolation.Limits(memory_mb=4096, replies_mb=64))
    assert report.exercises()["0.1"][0] == 0, reports.summary(report)
    said = " ".join(t.output for t in report.tests)
    assert "the answer's replies passed 64 MiB in total" in said, reports.summary(report)
    assert elapsed < 60, f"the flood took {elapsed:.0f} s"


def test_the_replies_budget_is_what_stops_the_flood_and_is_shared_across_processes():
    cells = [{"label": "exercise 1", "exercise": "1", "source": "def big():\n    return 'x' * (4 << 20)\n"}]
    with _walls(replies_mb=16) as walls, Learner(cells, walls, timeout=30) as process:
        sent = 0
        with pytest.raises(LearnerError, match=r"the answer's replies passed 16 MiB in total while running big"):
            for _ in range(10):
                process.call("big")
                sent += 1
        assert sent == 3  # 4 MiB each and the ready line: the fourth passes 16 MiB
        with pytest.raises(LearnerError, match="passed 16 MiB in total"):  # spent: no process is even started
            process.call("big")
        assert process.process is None
        # The hidden tests' pytest reopens the walls and counts into the same total.
        assert isolation.Walls.reopen(str(walls.spec_path)).count_replies(0) == walls.count_replies(0) > 16 * MB
    with _walls(replies_mb=1024) as walls, Learner(cells, walls, timeout=30) as process:
        for _ in range(10):  # the same flood, the limit lifted: every reply gets through
            assert len(process.call("big")[0]) == 4 << 20


# ---------------------------------------------------------------------------------------------------------------------
# 2. Scratch disk.

#: Writes 4 MiB blocks, to every place a learner process might write, until each refuses or 3 GiB have gone; then
#: answers wrongly. In the notebook kernel that includes the folders the grader shares with it.
FLOOD_DISK = """
import os, sys, glob
def _flood(folder, budget=3 << 30):
    written, block, n = 0, b"x" * (4 << 20), 0
    while written < budget:
        try:
            with open(os.path.join(folder, f"flood-{os.getpid()}-{n}"), "wb") as f:
                for _ in range(16):
                    f.write(block)
                    written += len(block)
        except (OSError, ValueError):  # a full tmpfs, or a file at the size limit: the next file
            if n > 15:
                break
        n += 1
    return written
_places = [os.getcwd(), "/tmp", "/dev/shm", "/", os.path.expanduser("~"), os.environ.get("CUTECOURSE_RECORDS", "")]
_places += [os.path.dirname(a) for a in sys.argv if a.endswith(".json")]  # the kernel's connection file: its sockets
_written = {p: _flood(p) for p in _places if p}
print("written", _written, file=sys.stderr)
""" + WRONG_0_1


def test_scratch_floods_are_bounded_and_gain_nothing(grade_watched):
    limits = isolation.Limits(memory_mb=4096, scratch_mb=32)
    report, elapsed, peak = grade_watched("disk_flood", {"0.1": FLOOD_DISK}, timeout=20, limits=limits)
    assert report.exercises()["0.1"][0] == 0, reports.summary(report)
    # Unwatched, the flood fills 16 files of 32 MiB (RLIMIT_FSIZE's cap) in each host folder it finds, 1 GiB in all.
    # Between two looks of the watchdog (0.2 s, later on a loaded machine) it writes at page-cache speed: 34-110 MiB
    # were seen at the peak alone, 154-274 MiB under full test runs on two cores (the watchdog's thread waits for
    # the CPU). The bound is half of the unwatched flood: a watchdog that did not stop it would fail here.
    assert peak < 16 * 32 * MB, f"the submission's host folders reached {peak / MB:.0f} MiB"
    assert elapsed < 20 * 4 + 5


def _write_in_jail(walls: isolation.Walls, folder: str, mib: int, writable: list[str] = ()) -> tuple[int, str]:
    """(exit code, output) of a jailed process writing `mib` MiB to `folder`, 1 MiB at a time."""
    code = (f"import sys\nwith open(sys.argv[1] + '/big', 'wb') as f:\n    for _ in range({mib}):\n"
            f"        f.write(b'x' * (1 << 20)); f.flush()\nprint('wrote', {mib})\n")
    scratch = walls.scratch("writer")
    run = subprocess.run(walls.command([sys.executable, "-c", code, folder], scratch, writable=list(writable)),
                         capture_output=True, text=True, timeout=60)
    return run.returncode, run.stdout + run.stderr


@pytest.mark.parametrize("folder", ["/tmp", "/dev/shm"])
def test_a_jails_tmpfs_holds_the_scratch_limit_and_only_it(folder):
    with _walls(scratch_mb=32) as walls:
        code, out = _write_in_jail(walls, folder, 48)
        assert code != 0 and "wrote" not in out, out  # ENOSPC (or the file-size limit) stops it at 32 MiB
    with _walls(scratch_mb=128) as walls:
        code, out = _write_in_jail(walls, folder, 48)
        assert code == 0 and "wrote 48" in out, out


def test_the_jails_root_and_dev_are_read_only():
    with _walls() as walls:
        for folder in ("/", "/dev"):
            code, out = _write_in_jail(walls, folder, 1)
            assert code != 0 and "Read-only file system" in out, out


def test_the_disk_watchdog_stops_a_submission_that_fills_a_shared_folder(tmp_path):
    for limit, stopped in ((32, True), (256, False)):
        with _walls(scratch_mb=limit) as walls:
            shared = walls.scratch("shared")
            writes = [sys.executable, "-c", "import time\nfor n in range(6):\n    open(f'" + str(shared) +
                      "/f{n}', 'wb').write(b'x' * (16 << 20))\n    time.sleep(0.3)\nprint('all written')"]
            run = subprocess.run(walls.command(writes, walls.scratch("writer"), writable=[str(shared)]),
                                 capture_output=True, text=True, timeout=60)
            assert walls.over_disk is stopped, (limit, run.stdout, run.stderr)
            assert ("all written" in run.stdout) is not stopped


# ---------------------------------------------------------------------------------------------------------------------
# 4. Time.

SLOW_TIMEOUT = 8.0
SLOW_BUT_RIGHT = "import time\n" + SOLUTION_0_1.replace(
    "def row_major_strides(shape):", f"def row_major_strides(shape):\n    time.sleep({0.6 * SLOW_TIMEOUT})")
#: Seconds a grade may take beyond its deadline for the grader's own work (fingerprints, the kill, the report).
GRADER_MARGIN_S = 5.0


def _slow_grade(grade_watched, name: str) -> tuple[grader.Report, float, float]:
    # Exercise 0.1: one check cell and one hidden test, so 2 x 8 s; the check's 5 cases take 5 x 4.8 s, the hidden
    # test's 50 cases far more.
    report, elapsed, _ = grade_watched(name, {"0.1": SLOW_BUT_RIGHT}, timeout=SLOW_TIMEOUT, exercise="0.1",
                                       limits=isolation.Limits(memory_mb=4096))
    return report, elapsed, grader.deadline_s(SLOW_TIMEOUT, 2)


@pytest.mark.slow
def test_a_slow_but_right_answer_ends_within_the_grades_deadline(grade_watched):
    report, elapsed, deadline = _slow_grade(grade_watched, "slow_but_right")
    assert elapsed < deadline + GRADER_MARGIN_S, f"the grade took {elapsed:.1f} s against its {deadline:g} s"
    said = {t.name: (t.status, t.output) for t in report.tests}
    assert all(status in (FAILED, NOT_RUN) for status, _ in said.values()), reports.summary(report)
    assert any("the grade's time limit ran out" in out or "ran out of time" in out
               for _, out in said.values()), reports.summary(report)


@pytest.mark.slow
def test_without_the_deadline_each_call_gets_its_whole_timeout_and_the_grade_runs_over(grade_watched, monkeypatch):
    def whole_timeout(self: Learner, timeout: float, doing: str) -> tuple[float, str]:  # the old behaviour
        return timeout, f"timed out after {timeout:g} s while {doing}"

    monkeypatch.setattr(sandbox.Learner, "_wait", whole_timeout)
    _, elapsed, deadline = _slow_grade(grade_watched, "slow_but_right_old")
    assert elapsed > deadline + GRADER_MARGIN_S, f"the grade took {elapsed:.1f} s against its {deadline:g} s"
