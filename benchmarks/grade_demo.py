"""Grade submissions of the grading demo on this machine, in the grader's jails, and print the reports and the time
each took.

    python benchmarks/grade_demo.py [--out DIR]

The submissions: the solution; a kernel that misses the last element (off by one); a kernel that writes 1 GiB past
its output (an illegal address, which kills the CUDA context of the learner's process); and two that answer 0.2
without a kernel: a torch launch wrapper in place of the host, and a plain (not @cute.jit) function that needs no import.
On a GPU the first scores every point and the others lose exercise 0.2; the report is written for all of them.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from cutecourse.cli import main
from cutecourse.grading import build
from cutecourse.grading import notebook as nbio

DEMO = Path(__file__).resolve().parents[1] / "tests" / "grading" / "demo"
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


def _save(nb: dict, folder: Path, name: str) -> Path:
    (folder / name).mkdir(exist_ok=True)
    nbio.dump(nb, folder / name / "00_demo.ipynb")
    return folder / name / "00_demo.ipynb"


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="grading-demo")
    args = parser.parse_args()
    work = Path(args.out) / "submissions"
    work.mkdir(parents=True, exist_ok=True)
    paths = submissions(work)
    times = []
    for path in paths:
        started = time.perf_counter()
        main(["grade", str(path), "--course", str(DEMO), "--hidden", str(DEMO / "hidden"),
              "--out", str(Path(args.out) / path.parent.name)])
        times.append((path.parent.name, time.perf_counter() - started))
    print("\nseconds per submission: " + ", ".join(f"{name} {t:.1f}" for name, t in times))
