"""The tuner's coordinate search against the exhaustive sweep of the same space, on this GPU.

    python benchmarks/tune.py [--shapes 4096x4096x4096 8192x8192x8192] [--step gemm10_multicast] [--dtype bfloat16]

For each shape: the exhaustive sweep of `cutecourse.tuning.SPACES[step]` (every Config compiled, checked against
float64 and timed, settled and interleaved), then the coordinate search (cutecourse.tune's default) over the same
space, then the step's default Config, both picks and torch.matmul timed together in one more settled run
(`--rounds`, `--settle-ms`), so that the two picks compare in the same rounds. The goal (issue 20): the coordinate
pick within 3% of the sweep's best. Nothing is written to the tuning cache. Prints Markdown rows for RESULTS.md.
"""

from __future__ import annotations

import argparse

from cutecourse import bench, tuning


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shapes", nargs="+", type=bench.problem, default=[(4096, 4096, 4096), (8192, 8192, 8192)],
                        metavar="MxNxK")
    parser.add_argument("--step", default="gemm10_multicast", choices=sorted(tuning.SPACES))
    parser.add_argument("--dtype", default="bfloat16", choices=("bfloat16", "float16"))
    parser.add_argument("--search-rounds", type=int, default=3, help="rounds of each search's timing")
    parser.add_argument("--rounds", type=int, default=5, help="rounds of the final comparison")
    parser.add_argument("--settle-ms", type=float, default=1000.0, help="settle per kernel in the final comparison")
    args = parser.parse_args()

    import torch

    launcher = __import__(f"cutecourse.kernels.gemm.{args.step}", fromlist=["gemm"]).gemm
    lines = ["| shape | search | configs timed | its pick | ms (search) | ms (final) | × torch.matmul | pick / "
             "sweep's best |", "|---|---|---|---|---|---|---|---|"]
    for shape in args.shapes:
        text = "x".join(map(str, shape))
        found = {search: tuning.tune(shape, args.dtype, step=args.step, search=search, rounds=args.search_rounds,
                                     cache=False, say=lambda line: None) for search in ("exhaustive", "coordinate")}
        for search, tuned in found.items():
            print(f"{text} {search}: {tuned}")
        a, b, c = bench.operands(*shape, args.dtype)
        picks = {"default": launcher.default, **{search: tuned.best for search, tuned in found.items()}}
        kernels = {"torch.matmul": lambda i: torch.matmul(a, b, out=c)}
        for name, config in picks.items():  # the same Config twice is one kernel
            kernels.setdefault(f"{args.step}({tuning.changes(args.step, config) or 'default'})",
                               bench.checked(name, launcher, config, a, b, c, say=print))
        with bench.Clocks() as clocks:
            times, power = bench.settled_rounds(kernels, args.rounds, args.settle_ms, clocks)
        result = bench.summary(times, power, 2 * shape[0] * shape[1] * shape[2])
        final = {name: result[f"{args.step}({tuning.changes(args.step, config) or 'default'})"]
                 for name, config in picks.items()}
        for name, config in picks.items():
            tuned = found.get(name)
            lines.append(f"| {text} | {name} | {len(tuned.timed) if tuned else 1} | "
                         f"{tuning.changes(args.step, config) or 'default'} | "
                         f"{f'{tuned.ms:.4f}' if tuned else '–'} | {final[name]['ms']:.4f} | "
                         f"{final[name]['ratio']:.3f} | {final['exhaustive']['ms'] / final[name]['ms']:.3f} |")
        lines.append(f"| {text} | torch.matmul | | | | {result['torch.matmul']['ms']:.4f} | 1.000 | |")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
