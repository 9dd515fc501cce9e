"""Grade a class on one machine: many submissions at once, one GPU per worker, with exactly the reports that grading
them one by one writes.

`grade_many` grades each submission in a worker process of its own (``python -m cutecourse.grading.batch``), for
two reasons: ``CUDA_VISIBLE_DEVICES`` is read per process, so each worker sees the one GPU it was given; and a grade
that dies (a grader bug, the machine's OOM killer) takes only its own submission with it, which then loses every
point with the reason. A worker's report comes back as JSON (`reports.to_dict`), and the reports are returned in the
order the submissions were given, so the combined ``grades.csv``, ``results.json`` and ``junit.xml`` are byte for
byte those of a sequential run. A Modal container (``cloud/modal_grade.py``) grades a submission with the same
`options`.

Workers run side by side only where this machine has the memory for all of them (`check_memory`: N submissions'
memory limits within what the host has available), and only inside bubblewrap: with the unprivileged-uid fallback
(or no jail) every submission's learner processes would share one user, and could signal or trace one another. A
worker's GPU is where its kernels go, not a wall: every jail on a GPU machine sees all the NVIDIA devices.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import queue
import shutil
import signal
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path
from typing import Any, Callable

from cutecourse.grading import grader, isolation, reports

#: Seconds a worker may run beyond its grade's own deadline (start-up, the kill of its jails, the report) before it
#: is killed and its submission loses every point.
SLACK_S = 300.0


def options(*, nbval_only: bool = False, hidden_only: bool = False, timeout: float = 120.0, lesson: str | None = None,
            exercise: str | None = None, isolation_kind: str = "auto", gpu_elsewhere: bool = False) -> dict[str, Any]:
    """`grader.grade`'s keyword arguments from `cutecourse grade`'s flags (the CLI and the Modal app both read them
    so); a ValueError names a flag that cannot be."""
    if nbval_only and hidden_only:
        raise ValueError("--nbval and --hidden-only: give one of them at most (without either, both are graded)")
    if not timeout > 0:
        raise ValueError(f"--timeout {timeout}: give the seconds each test may take, more than 0 (default 120)")
    return {"nbval": not hidden_only, "hidden": not nbval_only, "timeout": float(timeout), "lesson": lesson or None,
            "exercise": exercise or None, "isolation_kind": isolation_kind, "gpu_elsewhere": gpu_elsewhere}


def flags(options: dict[str, Any]) -> list[str]:
    """The `cutecourse grade` flags that grade with `options`: what a generated workflow or bundle runs."""
    out = ["--timeout", f"{options.get('timeout', 120.0):.12g}"]
    out += ["--nbval"] if not options.get("hidden", True) else []
    out += ["--hidden-only"] if not options.get("nbval", True) else []
    out += ["--lesson", options["lesson"]] if options.get("lesson") else []
    out += ["--exercise", options["exercise"]] if options.get("exercise") else []
    out += ["--isolation", options["isolation_kind"]] if options.get("isolation_kind", "auto") != "auto" else []
    out += ["--gpu-graded-elsewhere"] if options.get("gpu_elsewhere") else []
    return out


def visible_gpus() -> list[str]:
    """The GPUs workers can be given: the entries of CUDA_VISIBLE_DEVICES where it is set, else nvidia-smi's."""
    if "CUDA_VISIBLE_DEVICES" in os.environ:
        entries = [d.strip() for d in os.environ["CUDA_VISIBLE_DEVICES"].split(",")]
        return [d for d in entries if d and not d.startswith("-")]
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return []
    try:
        listed = subprocess.run([smi, "-L"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    return [str(i) for i, _ in enumerate(line for line in listed.splitlines() if line.startswith("GPU "))]


def available_mb() -> int:
    """The memory this machine has available now, in MiB: /proc/meminfo's MemAvailable, else the free pages."""
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) // 1024
    except (OSError, ValueError, IndexError):
        pass
    return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE") // 2**20


def check_memory(jobs: int, memory_mb: int) -> None:
    """A ValueError where `jobs` submissions, each allowed `memory_mb`, could together take more memory than this
    machine has available: the kernel's OOM killer would then pick among the graders, not among the submissions."""
    available = available_mb()
    if jobs * memory_mb > available:
        fit = available // memory_mb
        raise ValueError(f"--jobs {jobs}: {jobs} submissions × {memory_mb} MiB of memory each is {jobs * memory_mb} "
                         f"MiB, more than the {available} MiB this machine has available; "
                         + (f"give --jobs {fit} or fewer" if fit > 1 else "grade with --jobs 1")
                         + " (or free memory, or use a machine with more)")


def exercises_of(options: dict[str, Any]) -> frozenset[str] | None:
    """The exercises `options` grade (None: all of them)."""
    wanted = options.get("exercise")
    return None if wanted is None else frozenset([wanted] if isinstance(wanted, str) else wanted)


def worker_limit(submission: str | Path, course: grader.Course, options: dict[str, Any]) -> float:
    """Seconds a worker may take: its grade's deadline (`grader.deadline_s`), plus `SLACK_S`."""
    try:
        lesson = grader.lesson_of(Path(submission), course, options.get("lesson"))
        n_checks, hidden = grader.planned(course, lesson, nbval=options.get("nbval", True),
                                          hidden=options.get("hidden", True), exercises=exercises_of(options))
    except ValueError:  # graded at once: the report says why
        return SLACK_S
    return grader.deadline_s(options.get("timeout", 120.0), n_checks + len(hidden)) + SLACK_S


def _lost(submission: str | Path, course: grader.Course, options: dict[str, Any], why: str) -> grader.Report:
    return grader.lost(submission, course, why, lesson=options.get("lesson"), exercises=exercises_of(options))


def _kill_tree(process: subprocess.Popen) -> None:
    """Kill a worker and everything under it: its trusted pytest runs start sessions of their own, and the jails
    under them die with their parents."""
    for pid in [*isolation.descendants(process.pid), process.pid]:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)
    process.wait()


def in_worker(submission: str | Path, course: grader.Course, options: dict[str, Any], gpu: str | None,
              live: set[subprocess.Popen] | None = None) -> grader.Report:
    """Grade `submission` in a worker process that sees only `gpu` (None: the GPUs this process sees). The worker is
    in `live` while it runs; its temporary files (the grade's folder, with the submission's answers) go in a folder
    removed when it ends, however it ends."""
    live = set() if live is None else live
    limit = worker_limit(submission, course, options)
    with tempfile.TemporaryDirectory(prefix="cc-") as tmp:  # short: the kernel's sockets lie below it
        out = Path(tmp) / "report.json"
        command = isolation.python_module("cutecourse.grading.batch", str(submission), "--course", str(course.root),
                                          "--hidden", str(course.hidden), "--options", json.dumps(options),
                                          "--report", str(out))
        env = dict(os.environ, TMPDIR=tmp, **({"CUDA_VISIBLE_DEVICES": gpu} if gpu is not None else {}))
        worker = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env,
                                  start_new_session=True)
        live.add(worker)
        try:
            _, err = worker.communicate(timeout=limit)
        except subprocess.TimeoutExpired:
            _kill_tree(worker)
            return _lost(submission, course, options, f"the grade ran past {limit:g} s and was stopped")
        finally:
            live.discard(worker)
        try:
            return reports.from_dict(json.loads(out.read_text()))
        except (OSError, ValueError, KeyError, TypeError):
            return _lost(submission, course, options, f"the grader's worker ended (exit code {worker.returncode}) "
                                                      f"without a report: {err.strip()[-500:] or 'no message'}")


def grade_many(submissions: list[str], course: grader.Course, options: dict[str, Any], *, jobs: int = 1,
               say: Callable[[str], None] | None = None, progress: bool = True) -> list[grader.Report]:
    """Every submission's report, in the order given. `jobs` > 1 grades that many at once, each in its own worker
    with one of this machine's GPUs (workers share them round-robin where there are fewer GPUs than jobs); `say`
    gets each report's summary as it is made; a tqdm bar counts them. A grade that fails costs its own submission
    every point, with the reason, and the batch goes on; Ctrl-C stops it, workers and all."""
    from tqdm.auto import tqdm

    if jobs < 1:
        raise ValueError(f"--jobs {jobs}: give 1 or more workers")
    repeated = sorted({s for s in submissions if submissions.count(s) > 1})
    if repeated:
        raise ValueError(f"submission {repeated[0]} is given more than once; give each notebook once")
    walls = isolation.choose(options.get("isolation_kind", "auto"), course.deny(), course.read_only())
    isolation.bound_paths(walls, grader.PACKAGE_DIR, course.deny())  # set-up errors stop the batch before a grade
    if jobs > 1:
        if walls.kind != "bwrap":
            raise isolation.IsolationError(
                f"--jobs {jobs} needs bubblewrap, and here learner code would run "
                f"{'as uid ' + str(isolation.NOBODY) if walls.kind == 'uid' else 'without a jail (--isolation none)'}"
                f": submissions graded side by side would share a user and could signal or trace one another, or "
                f"read one another's reports. Install bubblewrap (sudo apt-get install bubblewrap) or grade with "
                f"--jobs 1")
    gpus = visible_gpus() if jobs > 1 else []
    if jobs > 1:
        check_memory(jobs, grader.default_limits(bool(gpus)).memory_mb)
    slots: queue.Queue[str | None] = queue.Queue()
    for i in range(jobs):
        slots.put(gpus[i % len(gpus)] if gpus else None)
    live: set[subprocess.Popen] = set()

    def work(submission: str) -> grader.Report:
        try:
            if jobs == 1:
                return grader.grade(submission, course, **options)
            gpu = slots.get()
            try:
                return in_worker(submission, course, options, gpu, live)
            finally:
                slots.put(gpu)
        except Exception as exc:  # a grader bug: this submission's points, not the batch
            return _lost(submission, course, options, f"the grader failed: {type(exc).__name__}: {exc}")

    found: list[grader.Report | None] = [None] * len(submissions)
    bar = tqdm(total=len(submissions), unit="submission", desc="grading", disable=not progress or len(submissions) < 2)

    def done(index: int, report: grader.Report) -> None:
        found[index] = report
        bar.update()
        if say:
            with tqdm.external_write_mode():
                say(reports.summary(report))

    with bar:
        if jobs == 1:  # in this process and thread, as `cutecourse grade` always graded: Ctrl-C stops it at once
            for i, submission in enumerate(submissions):
                done(i, work(submission))
        else:
            pool = ThreadPoolExecutor(jobs)
            try:
                futures = {pool.submit(work, s): i for i, s in enumerate(submissions)}
                for future in as_completed(futures):
                    done(futures[future], future.result())
            except BaseException:
                pool.shutdown(wait=False, cancel_futures=True)
                for worker in list(live):
                    _kill_tree(worker)
                raise
            pool.shutdown()
    return [r for r in found if r is not None]


def main(argv: list[str] | None = None) -> int:
    """A worker: grade one submission and write its report as JSON (`grade_many` starts it)."""
    parser = argparse.ArgumentParser(prog="python -m cutecourse.grading.batch", description=main.__doc__)
    parser.add_argument("submission")
    parser.add_argument("--course", required=True)
    parser.add_argument("--hidden", required=True)
    parser.add_argument("--options", required=True, help="grader.grade's keyword arguments, as JSON")
    parser.add_argument("--report", required=True, help="where the report goes, as JSON")
    args = parser.parse_args(argv)
    report = grader.grade(args.submission, grader.Course.at(args.course, args.hidden), **json.loads(args.options))
    Path(args.report).write_text(json.dumps(reports.to_dict(report)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
