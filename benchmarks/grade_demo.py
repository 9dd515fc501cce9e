"""Grade a batch of GPU submissions of the grading demo on this machine, in the grader's jails: one by one, then with
`--jobs N` side by side; check the two wrote byte for byte the same reports, and print the seconds per submission.

    python benchmarks/grade_demo.py [--out DIR] [--jobs N] [--copies K] [--lessons 05_tiled_mma ...]

The submissions, each `--copies` times: the solution; a kernel that misses the last element (off by one); a kernel
that writes 1 GiB past its output (an illegal address, which kills the CUDA context of the learner's process); and
two that answer 0.2 without a kernel: a torch launch wrapper in place of the host, and a plain (not @cute.jit)
function that needs no import. `--lessons` adds the course's own solution of those lessons (graded against the
course, not the demo). On a GPU the first scores every point and the others lose exercise 0.2; the report is written
for all of them.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from cutecourse.grading import batch, build, grader, reports
from cutecourse.grading import notebook as nbio

DEMO = Path(__file__).resolve().parents[1] / "tests" / "grading" / "demo"
OPTIONS = {"timeout": 120.0}  # as `cutecourse grade` grades by default
GOOD_GUARD = "    if i < cute.size(gx):\n        gout[i] = gx[i] * alpha\n"
VARIANTS = {
    "solution": GOOD_GUARD,
    "off_by_one": "    if i < cute.size(gx) - 1:\n        gout[i] = gx[i] * alpha\n",
    "illegal_address": "    if i < cute.size(gx):\n        gout[i + 268435456] = gx[i] * alpha\n",
}
#: Answers of 0.2 that compute the result with torch instead of a kernel.
NO_KERNEL = {
    "torch_wrapper": "import torch\n\ndef scale_host(x, out, alpha, stream):\n    out.copy_(x * alpha)\n",
    "plain_function": ("def scale_host(x, out, alpha, stream):\n"
                      "    out.copy_(x * alpha)\n"),
}


def submissions(folder: Path) -> list[Path]:
    solution = build.as_submitted(nbio.load(DEMO / "solutions" / "00_demo.ipynb"))
    paths = []
    for name, guard in VARIANTS.items():
        nb = nbio.clone(solution)
        kernel = nbio.answers(nb)["0.2"]
        assert GOOD_GUARD in nbio.source(kernel), "the demo solution changed; update GOOD_GUARD"
        nbio.set_source(kernel, nbio.source(kernel).replace(GOOD_GUARD, guard))
        paths.append(_save(nb, folder, name))
    for name, answer in NO_KERNEL.items():
        nb = nbio.clone(solution)
        nbio.set_source(nbio.answers(nb)["0.2"], answer)
        paths.append(_save(nb, folder, name))
    return paths


def _folder(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    return path


def _save(nb: dict, folder: Path, name: str) -> Path:
    (folder / name).mkdir(exist_ok=True)
    nbio.dump(nb, folder / name / "00_demo.ipynb")
    return folder / name / "00_demo.ipynb"


def grade_batch(batches: list[tuple[grader.Course, list[Path]]], jobs: int) -> tuple[list[grader.Report], list[float]]:
    """The reports of every (course, submissions) batch, and the seconds from one report to the next (one by one:
    each submission's own time)."""
    found, marks = [], [time.perf_counter()]
    for course, paths in batches:
        found += batch.grade_many([str(p) for p in paths], course, OPTIONS, jobs=jobs,
                                  say=lambda line: (print(line), marks.append(time.perf_counter())))
    return found, [b - a for a, b in zip(marks, marks[1:])]


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="grading-demo")
    parser.add_argument("--jobs", type=int, default=4, help="workers for the side-by-side run (default 4)")
    parser.add_argument("--copies", type=int, default=2, help="copies of each demo submission (default 2)")
    parser.add_argument("--lessons", nargs="*", default=[], help="also grade the course's solutions of these")
    args = parser.parse_args()
    out = Path(args.out)
    demo_paths = [p for copy in range(args.copies) for p in submissions(_folder(out / "submissions" / f"copy{copy}"))]
    course = grader.Course.at(DEMO.parents[2])
    lesson_paths = []
    for lesson in args.lessons:
        lesson_paths.append(_folder(out / "submissions" / "lessons") / f"{lesson}.ipynb")
        nbio.dump(build.as_submitted(nbio.load(course.root / "solutions" / f"{lesson}.ipynb")), lesson_paths[-1])
    batches = [(grader.Course.at(DEMO, DEMO / "hidden"), demo_paths), (course, lesson_paths)]
    paths = demo_paths + lesson_paths
    written, took = {}, {}
    for label, jobs in (("one by one", 1), (f"--jobs {args.jobs}", args.jobs)):
        started = time.perf_counter()
        made, each = grade_batch(batches, jobs)
        took[label] = (time.perf_counter() - started, each)
        files = reports.write(made, out / label.replace(" ", "_").strip("-"))
        written[label] = {f.name: f.read_bytes() for f in files}
    print(f"\n{len(paths)} submissions, GPUs {batch.visible_gpus() or 'none'}")
    print("one by one, seconds each: " + ", ".join(f"{p.parent.name}/{p.stem} {t:.1f}"
                                                    for p, t in zip(paths, took["one by one"][1])))
    for label, (total, _) in took.items():
        print(f"{label}: {total:.1f} s in all, {total / len(paths):.1f} s per submission"
              f" ({took['one by one'][0] / total:.2f}x one by one)")
    first, second = written.values()
    differ = [name for name in first if first[name] != second[name]]
    print("reports identical: " + (f"yes ({', '.join(first)})" if not differ else f"NO: {', '.join(differ)} differ"))
    sys.exit(1 if differ else 0)
