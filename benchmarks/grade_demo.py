"""Grade three submissions of the grading demo on this machine and print the reports.

    python benchmarks/grade_demo.py [--out DIR]

The submissions: the solution; a kernel that misses the last element (off by one); a kernel that writes 1 GiB past
its output (an illegal address, which kills the CUDA context of the learner's process). On a GPU the first scores
every point and the other two lose exercise 0.2; the report is written for all three.
"""

from __future__ import annotations

import argparse
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


def submissions(folder: Path) -> list[Path]:
    solution = build.as_submitted(nbio.load(DEMO / "solutions" / "00_demo.ipynb"))
    paths = []
    for name, guard in VARIANTS.items():
        nb = nbio.clone(solution)
        kernel = nbio.answers(nb)["0.2"]
        assert GOOD_GUARD in nbio.source(kernel), "the demo solution changed; update GOOD_GUARD"
        nbio.set_source(kernel, nbio.source(kernel).replace(GOOD_GUARD, guard))
        (folder / name).mkdir(exist_ok=True)
        paths.append(folder / name / "00_demo.ipynb")
        nbio.dump(nb, paths[-1])
    return paths


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="grading-demo")
    args = parser.parse_args()
    work = Path(args.out) / "submissions"
    work.mkdir(parents=True, exist_ok=True)
    paths = submissions(work)
    main(["grade", *map(str, paths), "--course", str(DEMO), "--hidden", str(DEMO / "hidden"), "--out", args.out])
