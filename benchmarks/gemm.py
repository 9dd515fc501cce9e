"""Every GEMM step against torch.matmul (cuBLAS), in one run on the same random-normal data.

    python benchmarks/gemm.py [--dtypes bfloat16 float16] [--rounds 5] [--csv gemm.csv] [--steps 5 10 11]
    python benchmarks/gemm.py --steps 5 --variants 5:tile_k=32,stages=4 5:raster=1   # Config variants of a step
    python benchmarks/gemm.py --plot gemm.csv --chart gemm.svg     # the chart, where matplotlib is installed

For each dtype and shape (4096³, 8192³ and two skinny ones) it checks each step's output against float64 torch,
then times torch.matmul and the steps in `--rounds` settled, interleaved rounds (`cutecourse.bench.profile`; its
module docstring says why) and reports the median round: TFLOP/s, the ratio to torch.matmul, and where nvidia-smi
exists the SM clock and board power while each kernel ran. `cutecourse bench gemm` is the same run for one problem.
A is K-major (row-major (M, K)); B is K-major (``bt.t()``, the layout CUTLASS calls TN), C has A's dtype; torch
gets the same tensors and writes into the same C (``torch.matmul(a, b, out=c)``). Steps 1 and 2 (SIMT) are timed
at 4096³ only: at 8192³ a single launch of step 1 takes seconds. The goals: the full SM80 step (5) at 0.62× or more
at 8192³, the last cooperative step (10) at 0.99× or more at 4096³ and 8192³; the table of every step's ratio is the
ladder's lesson (what each idea buys).
"""

from __future__ import annotations

import argparse
import csv

from cutecourse import bench
from cutecourse.kernels.gemm import GEMM_STEPS as STEPS

SHAPES = [(4096, 4096, 4096), (8192, 8192, 8192), (8192, 8192, 512), (16384, 1024, 8192)]
SIMT = {"gemm01_naive", "gemm02_smem"}
#: Step number -> the ratio to torch.matmul it is meant to reach (drawn on the chart).
GOALS = {STEPS.index("gemm05_swizzle") + 1: 0.62, STEPS.index("gemm10_multicast") + 1: 0.99}


def plot(csv_path: str, chart_path: str) -> None:
    """A bar chart of each step's ratio to torch.matmul, one group per dtype and shape."""
    import matplotlib

    matplotlib.use("Agg")
    matplotlib.rcParams["svg.fonttype"] = "none"  # text stays text: a small SVG
    import matplotlib.pyplot as plt

    with open(csv_path) as f:
        rows = [r for r in csv.DictReader(f) if r["kernel"] != "torch.matmul"]
    groups = list(dict.fromkeys((r["dtype"], r["M"], r["N"], r["K"]) for r in rows))  # in the order they ran
    steps = [s for s in STEPS if any(r["kernel"] == s for r in rows)]
    fig, ax = plt.subplots(figsize=(12, 4.5))
    width = 0.8 / len(steps)
    for i, step in enumerate(steps):
        ratios = [next((float(r["ratio"]) for r in rows if r["kernel"] == step
                        and (r["dtype"], r["M"], r["N"], r["K"]) == g), 0.0) for g in groups]
        ax.bar([g + i * width for g in range(len(groups))], ratios, width, label=step)
    ax.set_yscale("log")  # step 1 is a thousandth of cuBLAS, step 10 about 1
    ax.axhline(1.0, color="black", linewidth=0.8)
    for goal, label in ((goal, f"step {number} goal") for number, goal in GOALS.items()):
        ax.axhline(goal, color="grey", linewidth=0.6, linestyle="--")
        ax.annotate(label, (len(groups) - 0.5, goal), fontsize=7, color="grey", va="bottom", ha="right")
    ax.set_xticks([g + 0.4 - width / 2 for g in range(len(groups))],
                  [f"{d}\n{m}³" if m == n == k else f"{d}\n{m}×{n}×{k}" for d, m, n, k in groups], fontsize=8)
    ax.set_ylabel("time of torch.matmul / time of step")
    ax.set_title(f"GEMM steps vs torch.matmul ({rows[0]['gpu']}, {rows[0]['date']})")
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    fig.tight_layout()
    fig.savefig(chart_path)
    print(f"chart: {chart_path}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dtypes", nargs="+", default=["bfloat16", "float16"])
    parser.add_argument("--steps", nargs="+", type=int, default=list(range(1, len(STEPS) + 1)))
    parser.add_argument("--shapes", nargs="+", type=bench.problem, default=SHAPES, metavar="MxNxK")
    parser.add_argument("--variants", nargs="*", default=[], metavar="STEP:FIELD=VALUE,...",
                        help="also time a step with some Config fields changed, e.g. 5:tile_k=32,stages=4 "
                             "or 9:epi_n=64")
    parser.add_argument("--rounds", type=int, default=5, help="interleaved rounds; the median is reported")
    parser.add_argument("--settle-ms", type=float, default=1000.0,
                        help="back-to-back launches of a kernel before it is timed, in ms (power and clocks settle)")
    parser.add_argument("--csv", default="gemm.csv")
    parser.add_argument("--chart", default="gemm.svg")
    parser.add_argument("--plot", metavar="CSV", help="only draw the chart of an earlier run's CSV")
    args = parser.parse_args()
    if args.plot:
        plot(args.plot, args.chart)
        return

    launches = bench.kernels_to_time(args.steps, args.variants)
    rows = bench.profile(args.shapes, args.dtypes, launches, rounds=args.rounds, settle_ms=args.settle_ms,
                         skip=lambda kernel, shape: kernel.startswith(tuple(SIMT)) and shape != (4096, 4096, 4096),
                         slow=lambda kernel: kernel.startswith(tuple(SIMT)))
    bench.write_csv(rows, args.csv)
    print(bench.table(rows))
    print(f"csv: {args.csv}")
    try:
        plot(args.csv, args.chart)
    except ImportError:
        print(f"no matplotlib here: draw the chart elsewhere with  python benchmarks/gemm.py --plot {args.csv}")


if __name__ == "__main__":
    main()
