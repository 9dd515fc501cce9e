"""Every GEMM step against torch.matmul (cuBLAS), in one run on the same random-normal data.

    python benchmarks/gemm.py [--dtypes bfloat16 float16] [--rounds 5] [--csv gemm.csv] [--steps 5 9 10]
    python benchmarks/gemm.py --steps 5 --variants 5:tile_k=32,stages=4 5:raster=1   # Config variants of a step
    python benchmarks/gemm.py --plot gemm.csv --chart gemm.svg     # the chart, where matplotlib is installed

For each dtype and shape (4096³, 8192³ and two skinny ones) it checks each step's output against float64 torch,
then times torch.matmul and the steps in `--rounds` interleaved rounds and reports the median round: TFLOP/s and
the ratio to torch.matmul. In a round each kernel first runs alone for `--settle-ms`, then is timed as the median of
5 × 10 back-to-back launches (cutecourse.bench.median_ms); odd rounds run the kernels in the reverse order. Both are
there because the H200 is power-limited on random data and its clock follows the power draw over hundreds of
milliseconds: a kernel timed right after a lighter one borrows its clocks (unsettled, one step measured 1.11× and
0.87× at 8192³ in two runs; `benchmarks/gemm_clocks.py` shows torch.matmul 3-5% faster in its first 100 ms after
the one-warpgroup wgmma step than once settled), so no kernel should always follow the same one. Where nvidia-smi
exists, the SM clock and board power while each kernel ran are reported too (cutecourse.bench.Clocks): at the power
limit, a kernel that moves more data runs at a lower clock.
A is K-major (row-major (M, K)); B is K-major (``bt.t()``, the layout CUTLASS calls TN), C has A's dtype; torch
gets the same tensors and writes into the same C (``torch.matmul(a, b, out=c)``). Steps 1 and 2 (SIMT) are timed
at 4096³ only: at 8192³ a single launch of step 1 takes seconds. The goals: the full SM80 step (5) at 0.62× or more
at 8192³, the last cooperative step (9) at 0.99× or more at 4096³ and 8192³; the table of every step's ratio is the
ladder's lesson (what each idea buys).
"""

from __future__ import annotations

import argparse
import csv
import datetime
import importlib
import statistics
import time
from collections.abc import Callable
from typing import Any

from cutecourse.kernels import GEMM_STEPS as STEPS

SHAPES = [(4096, 4096, 4096), (8192, 8192, 8192), (8192, 8192, 512), (16384, 1024, 8192)]
SIMT = {"gemm01_naive", "gemm02_smem"}
#: Step number -> the ratio to torch.matmul it is meant to reach (drawn on the chart).
GOALS = {STEPS.index("gemm05_swizzle") + 1: 0.62, STEPS.index("gemm09_multicast") + 1: 0.99}


def plot(csv_path: str, chart_path: str) -> None:
    """A bar chart of each step's ratio to torch.matmul, one group per dtype and shape."""
    import matplotlib

    matplotlib.use("Agg")
    matplotlib.rcParams["svg.fonttype"] = "none"  # text stays text: a small SVG
    import matplotlib.pyplot as plt

    with open(csv_path) as f:
        rows = [r for r in csv.DictReader(f) if r["step"] != "torch.matmul"]
    groups = list(dict.fromkeys((r["dtype"], r["M"], r["N"], r["K"]) for r in rows))  # in the order they ran
    steps = [s for s in STEPS if any(r["step"] == s for r in rows)]
    fig, ax = plt.subplots(figsize=(12, 4.5))
    width = 0.8 / len(steps)
    for i, step in enumerate(steps):
        ratios = [next((float(r["ratio"]) for r in rows if r["step"] == step
                        and (r["dtype"], r["M"], r["N"], r["K"]) == g), 0.0) for g in groups]
        ax.bar([g + i * width for g in range(len(groups))], ratios, width, label=step)
    ax.set_yscale("log")  # step 1 is a thousandth of cuBLAS, step 9 about 1
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


def kernels_to_time(steps: list[int], variants: list[str]) -> dict[str, tuple]:
    """{name: (launcher, Config)} for the steps' default Configs and the `--variants` ("9:epi_n=64,stages=3")."""
    specs = [(number, "") for number in steps]
    for spec in variants:
        number, _, fields = spec.partition(":")
        if number not in {str(i) for i in range(1, len(STEPS) + 1)} or not all(
                f.count("=") == 1 for f in fields.split(",")):
            raise SystemExit(f"--variants {spec!r}: write STEP:FIELD=VALUE,... with a step 1-{len(STEPS)}, "
                             "e.g. 9:epi_n=64,stages=3")
        specs.append((int(number), fields))
    launches = {}
    for number, fields in specs:
        module = importlib.import_module(f"cutecourse.kernels.{STEPS[number - 1]}")
        changes = dict(f.split("=") for f in fields.split(",")) if fields else {}
        launches[f"{STEPS[number - 1]}({fields})" if fields else STEPS[number - 1]] = (module.gemm, module.Config(**{
            key: int(value) if value.isdigit() else value for key, value in changes.items()}))
    return launches


def settled_rounds(kernels: dict[str, Callable[[int], object]], rounds: int, settle_ms: float, clocks: Any,
                   slow: Callable[[str], bool] = lambda name: False
                   ) -> tuple[dict[str, list[float]], dict[str, list[tuple[float, float]]]]:
    """Time `kernels` ({name: fn(i)}, as cutecourse.bench.median_ms calls them) in `rounds` interleaved rounds, the
    odd rounds in the reverse order: in a round each kernel first runs alone for `settle_ms`, then is timed as the
    median of 5 × 10 back-to-back launches (one launch, unsettled, for the `slow` ones). Returns each kernel's ms
    per round and the (SM MHz, W) that `clocks` (a cutecourse.bench.Clocks) read while it ran (the module
    docstring says why)."""
    from cutecourse.bench import median_ms

    times: dict[str, list[float]] = {name: [] for name in kernels}
    power: dict[str, list[tuple[float, float]]] = {name: [] for name in kernels}
    for r in range(rounds):
        for name, fn in list(kernels.items())[::-1 if r % 2 else 1]:
            unsettled = slow(name)
            # Settle: run the kernel alone for settle_ms first, so that it is timed at the clocks its own power
            # draw allows, not at those the previous kernel left behind.
            once = median_ms(fn, reps=1, batch=1, warmup=1)
            warmup = 1 if unsettled else max(3, int(settle_ms / max(once, 1e-3)))
            t0 = time.monotonic()
            times[name].append(median_ms(fn, reps=1 if unsettled else 5, batch=1 if unsettled else 10,
                                         warmup=warmup))
            # Clock and power over the second half of the settle and the timing (the first half ramps).
            reading = clocks.during(t0 + (time.monotonic() - t0) / 2, time.monotonic())
            if reading:
                power[name].append(reading)
    return times, power


def checked(name: str, gemm: Any, config: Any, a: Any, b: Any, c: Any, say: Callable[[str], object] = print,
            judge: Callable[[Any], str | None] | None = None) -> Callable[[int], object]:
    """`gemm(a, b, c, config)` run once into a NaN-filled C and checked against torch in float64 (the first call also
    compiles; a wrong result stops the run), as the closure fn(i) that `settled_rounds` times. `judge(c)` says what
    is wrong with C (None: nothing); by default gemm_launch.within_bounds(c, a, b), C = a @ b."""
    import torch

    from cutecourse.kernels import gemm_launch

    c.fill_(float("nan"))
    start = time.perf_counter()
    gemm(a, b, c, config)
    torch.cuda.synchronize()
    problem = judge(c) if judge else gemm_launch.within_bounds(c, a, b)
    if problem:
        raise SystemExit(f"{name} is wrong: {problem}")
    say(f"{name}: correct; first call (compile + run) {time.perf_counter() - start:.1f} s")
    return lambda i: gemm(a, b, c, config)


def summary(times: dict[str, list[float]], power: dict[str, list[tuple[float, float]]], flops: float,
            base: str = "torch.matmul") -> dict[str, dict[str, float | None]]:
    """Per kernel of `settled_rounds`' result: its median ms, TFLOP/s, ratio to `base` (timed in the same rounds),
    and the median SM MHz and W read while it ran (None without a reading)."""
    reference = statistics.median(times[base])

    def median_of(readings: list[tuple[float, float]], i: int) -> float | None:
        return statistics.median(r[i] for r in readings) if readings else None

    return {name: dict(ms=statistics.median(t), tflops=flops / statistics.median(t) / 1e9,
                       ratio=reference / statistics.median(t), sm_mhz=median_of(power[name], 0),
                       watts=median_of(power[name], 1)) for name, t in times.items()}


def write_csv(rows: list[dict[str, Any]], path: str) -> None:
    """The run's rows, one per kernel and problem, as CSV with the first row's keys for header."""
    with open(path, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dtypes", nargs="+", default=["bfloat16", "float16"])
    parser.add_argument("--steps", nargs="+", type=int, default=list(range(1, len(STEPS) + 1)))
    parser.add_argument("--shapes", nargs="+", default=[f"{m}x{n}x{k}" for m, n, k in SHAPES])
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

    import torch
    from tqdm import tqdm

    from cutecourse.bench import Clocks

    gpu = torch.cuda.get_device_name()
    date = datetime.date.today().isoformat()
    launches = kernels_to_time(args.steps, args.variants)
    shapes = [tuple(int(x) for x in s.split("x")) for s in args.shapes]
    rows = []
    clocks = Clocks()
    progress = tqdm(total=len(args.dtypes) * len(shapes), desc="dtype × shape")
    for name in args.dtypes:
        dtype = getattr(torch, name)
        for m, n, k in shapes:
            torch.manual_seed(0)
            a = torch.randn(m, k, device="cuda", dtype=dtype)
            b = torch.randn(n, k, device="cuda", dtype=dtype).t()
            c = torch.empty(m, n, device="cuda", dtype=dtype)
            kernels = {"torch.matmul": lambda i: torch.matmul(a, b, out=c)}
            for step, (gemm, config) in launches.items():
                if step.startswith(tuple(SIMT)) and (m, n, k) != (4096, 4096, 4096):
                    continue
                kernels[step] = checked(f"{step} {name} {m}x{n}x{k}", gemm, config, a, b, c, say=progress.write)
            rounds, power = settled_rounds(kernels, args.rounds, args.settle_ms, clocks,
                                           slow=lambda kname: kname.startswith(tuple(SIMT)))
            for kname, r in summary(rounds, power, 2 * m * n * k).items():
                rows.append(dict(date=date, gpu=gpu, dtype=name, M=m, N=n, K=k, step=kname, ms=f"{r['ms']:.4f}",
                                 tflops=f"{r['tflops']:.1f}", ratio=f"{r['ratio']:.3f}",
                                 sm_mhz="" if r["sm_mhz"] is None else f"{r['sm_mhz']:.0f}",
                                 watts="" if r["watts"] is None else f"{r['watts']:.0f}",
                                 rounds=" ".join(f"{t:.4f}" for t in rounds[kname])))
            progress.update()
    progress.close()
    clocks.close()
    write_csv(rows, args.csv)
    print("| dtype | M×N×K | kernel | ms | TFLOP/s | × torch.matmul | SM MHz | W |\n|---|---|---|---|---|---|---|---|")
    for r in rows:
        shape = f"{r['M']}×{r['N']}×{r['K']}"
        print(f"| {r['dtype']} | {shape} | {r['step']} | {r['ms']} | {r['tflops']} | {r['ratio']} | {r['sm_mhz']} "
              f"| {r['watts']} |")
    print(f"csv: {args.csv}")
    try:
        plot(args.csv, args.chart)
    except ImportError:
        print(f"no matplotlib here: draw the chart elsewhere with  python benchmarks/gemm.py --plot {args.csv}")


if __name__ == "__main__":
    main()
