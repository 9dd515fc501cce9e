"""Grade a class on one machine: many submissions at once, one GPU per worker, with exactly the reports that grading
them one by one writes.

`grade_many` grades each submission in a worker process of its own (``python -m cutecourse.grading.batch``), for
two reasons: ``CUDA_VISIBLE_DEVICES`` is read per process, so each worker sees the one GPU it was given; and a grade
that dies (a grader bug, the machine's OOM killer) takes only its own submission with it, which then loses every
point with the reason. A worker's report comes back as JSON (`reports.to_dict`), and the reports are returned in the
order the submissions were given, so the combined ``grades.csv``, ``results.json`` and ``junit.xml`` are byte for
byte those of a sequential run. The same `grade_one` grades a submission in a Modal container
(``cloud/modal_grade.py``).

Workers run side by side only inside bubblewrap: with the unprivileged-uid fallback every submission's learner
processes would share uid 65534, and could signal or trace one another.
"""

from __future__ import annotations

import argparse
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

#: `grader.grade`'s keyword arguments, as a batch passes them to every submission's grade.
OPTIONS = ("nbval", "hidden", "timeout", "lesson", "exercise", "isolation_kind", "gpu_elsewhere")
#: Seconds a worker may run beyond its grade's own deadline (start-up, the kill of its jails, the report) before it
#: is killed and its submission loses every point.
SLACK_S = 300.0


def flags(options: dict[str, Any]) -> list[str]:
    """The `cutecourse grade` flags that grade with `options`: what a generated workflow or bundle runs."""
    out = ["--timeout", f"{options.get('timeout', 120.0):g}"]
    out += ["--nbval"] if not options.get("hidden", True) else []
    out += ["--hidden-only"] if not options.get("nbval", True) else []
    out += ["--lesson", options["lesson"]] if options.get("lesson") else []
    out += ["--exercise", options["exercise"]] if options.get("exercise") else []
    out += ["--isolation", options["isolation_kind"]] if options.get("isolation_kind", "auto") != "auto" else []
    out += ["--gpu-graded-elsewhere"] if options.get("gpu_elsewhere") else []
    return out


def grade_one(submission: str | Path, course: grader.Course, options: dict[str, Any]) -> grader.Report:
    """One submission's grade with a batch's `options` (`OPTIONS`); what a worker and a Modal container run."""
    unknown = sorted(set(options) - set(OPTIONS))
    if unknown:
        raise ValueError(f"options {unknown}: not grading options; use {', '.join(OPTIONS)}")
    return grader.grade(submission, course, **options)


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


def exercises_of(options: dict[str, Any]) -> frozenset[str] | None:
    """The exercises `options` grade (None: all of them)."""
    wanted = options.get("exercise")
    return None if wanted is None else frozenset([wanted] if isinstance(wanted, str) else wanted)


def worker_limit(submission: str | Path, course: grader.Course, options: dict[str, Any]) -> float:
    """Seconds a worker may take: its grade's deadline (the per-test timeout times its tests), plus `SLACK_S`."""
    try:
        lesson = grader.lesson_of(Path(submission), course, options.get("lesson"))
        n_checks, hidden = grader.planned(course, lesson, nbval=options.get("nbval", True),
                                          hidden=options.get("hidden", True), exercises=exercises_of(options))
    except ValueError:  # graded at once: the report says why
        return SLACK_S
    return options.get("timeout", 120.0) * max(1, n_checks + len(hidden)) + SLACK_S


def in_worker(submission: str | Path, course: grader.Course, options: dict[str, Any],
              gpu: str | None) -> grader.Report:
    """Grade `submission` in a worker process that sees only `gpu` (None: the GPUs this process sees)."""
    lost = lambda why: grader.lost(submission, course, why, lesson=options.get("lesson"),  # noqa: E731
                                   exercises=exercises_of(options))
    limit = worker_limit(submission, course, options)
    with tempfile.TemporaryDirectory(prefix="cutecourse-batch-") as tmp:
        out = Path(tmp) / "report.json"
        command = [sys.executable, "-m", "cutecourse.grading.batch", str(submission), "--course", str(course.root),
                   "--hidden", str(course.hidden), "--options", json.dumps(options), "--report", str(out)]
        env = dict(os.environ, **({"CUDA_VISIBLE_DEVICES": gpu} if gpu is not None else {}))
        worker = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env,
                                  start_new_session=True)
        try:
            _, err = worker.communicate(timeout=limit)
        except subprocess.TimeoutExpired:
            os.killpg(worker.pid, signal.SIGKILL)
            worker.communicate()
            return lost(f"the grade ran past {limit:g} s and was stopped")
        try:
            return reports.from_dict(json.loads(out.read_text()))
        except (OSError, ValueError, KeyError, TypeError):
            return lost(f"the grader's worker ended (exit code {worker.returncode}) without a report: "
                        f"{err.strip()[-500:] or 'no message'}")


def grade_many(submissions: list[str], course: grader.Course, options: dict[str, Any], *, jobs: int = 1,
               say: Callable[[str], None] | None = None, progress: bool = True) -> list[grader.Report]:
    """Every submission's report, in the order given. `jobs` > 1 grades that many at once, each in its own worker
    with one of this machine's GPUs (workers share them round-robin where there are fewer GPUs than jobs); `say`
    gets each report's summary as it is made; a tqdm bar counts them."""
    from tqdm.auto import tqdm

    if jobs < 1:
        raise ValueError(f"jobs={jobs}: give 1 or more workers")
    if jobs > 1:
        walls = isolation.choose(options.get("isolation_kind", "auto"), course.deny(), course.read_only())
        if walls.kind == "uid":
            raise isolation.IsolationError(
                f"--jobs {jobs} needs bubblewrap: with uid {isolation.NOBODY} (the fallback here: {walls.detail}) "
                f"the learner processes of submissions graded side by side share one uid and could signal or trace "
                f"one another. Install bubblewrap (sudo apt-get install bubblewrap) or grade with --jobs 1")
    gpus = visible_gpus() if jobs > 1 else []
    slots: queue.Queue[str | None] = queue.Queue()
    for i in range(jobs):
        slots.put(gpus[i % len(gpus)] if gpus else None)

    def work(submission: str) -> grader.Report:
        if jobs == 1:
            return grade_one(submission, course, options)
        gpu = slots.get()
        try:
            return in_worker(submission, course, options, gpu)
        finally:
            slots.put(gpu)

    found: list[grader.Report | None] = [None] * len(submissions)
    with ThreadPoolExecutor(jobs) as pool, tqdm(total=len(submissions), unit="submission", desc="grading",
                                                 disable=not progress or len(submissions) < 2) as bar:
        futures = {pool.submit(work, s): i for i, s in enumerate(submissions)}
        for future in as_completed(futures):
            report = found[futures[future]] = future.result()
            bar.update()
            if say:
                with tqdm.external_write_mode():
                    say(reports.summary(report))
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
    report = grade_one(args.submission, grader.Course.at(args.course, args.hidden), json.loads(args.options))
    Path(args.report).write_text(json.dumps(reports.to_dict(report)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
