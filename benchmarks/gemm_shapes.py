"""The shape suite of issue 34: `cutecourse.gemm` against torch.matmul (cuBLAS) on the shapes models run, in one run.

    python benchmarks/gemm_shapes.py                       # the whole suite, about 5 minutes on an H200
    python benchmarks/gemm_shapes.py --quick               # bfloat16 only, 2 rounds, no fp8 or fused part
    python benchmarks/gemm_shapes.py --only 128x 1x16x     # shapes whose MxNxK contains one of these strings
    python benchmarks/gemm_shapes.py --plot run.csv        # only the chart of an earlier run's CSV

``y = x @ W.t()`` as ``nn.Linear`` computes it: x (M, K) row-major, W (N, K) row-major (so b = W.t() is K-major),
y (M, N) of x's dtype, random-normal data. The shapes are `cutecourse.kernels.gemm.winners.SHAPES`, which the
winners table is raced on: the issue's table (big squares, LLM layers at M = 128 to 8192, skinny and deep-K problems;
the table lists 13, which its geomean calls 14), then the decode-sized M = 1, 16 and 64 against the three LLM weights.
Kernels: torch.matmul, ``cutecourse.gemm`` (whatever it dispatches to, with the tuner's cache ignored) and quack's GEMM
where quack imports. Then, on three shapes (`EXTRAS`), the fused epilogue GELU(x @ W.t() + bias) against cuBLASLt's
(``torch._addmm_activation``) and fp8 e4m3 against ``torch._scaled_mm``, as benchmarks/epilogue.py times them.

Every kernel is checked against float64 torch first, then the kernels of a shape are timed in
`cutecourse.bench.settled_rounds` (settled, interleaved: the H200's clock follows its power draw), with the SM clock and
board power while each ran. The CSV goes to benchmarks/results/ (one row per kernel and shape: its ratio to its baseline
timed in the same rounds; for `cutecourse.gemm`, the step and Config it ran), the chart beside it; printed: the table,
what `cutecourse.gemm` ran on each shape, and per dtype the geomean and the worst ratio of ``cutecourse.gemm`` (and
quack) to torch.matmul. The goals (issue 34): geomean ≥ 1.00 in bf16 and fp16, no shape below 0.90.
"""

from __future__ import annotations

import argparse
import csv
import datetime
import math
import os
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))  # benchmarks/epilogue.py, whose fused and fp8 kernels this reuses

import epilogue as fused_bench  # noqa: E402

from cutecourse import bench  # noqa: E402
# the suite, which the winners table is raced on, and its three problems where the fused epilogue and fp8 are timed too
from cutecourse.kernels.gemm.winners import EXTRAS, SHAPES  # noqa: E402
OURS = "cutecourse.gemm"
QUACK = "quack"
FIELDS = ["date", "gpu", "dtype", "M", "N", "K", "epilogue", "kernel", "ms", "tflops", "baseline", "ratio", "sm_mhz",
          "watts", "rounds", "ran"]


def dispatched(a: Any, b: Any, c: Any, config: Any, **epilogue: Any) -> Any:
    """``cutecourse.gemm`` as the benchmarks call a step: (a, b, c, config); the config is the dispatcher's."""
    import cutecourse

    return cutecourse.gemm(a, b, c, **epilogue)


def ran(m: int, n: int, k: int, dtype: str, arch: int, sms: int) -> str:
    """What `cutecourse.gemm` runs on this problem as the suite calls it (x (M, K) and W (N, K) row-major, y of x's
    dtype) on an sm_`arch` GPU with `sms` SMs: the step and the fields its Config changes, as `explain` picks them
    (asked with CPU tensors, so no GPU is needed), e.g. "gemm11_pingpong(cluster_m=1,cluster_n=2,splits=2)"."""
    import torch

    import cutecourse
    from cutecourse.dispatch import changes

    kind = getattr(torch, dtype)
    choice = cutecourse.gemm.explain(torch.empty(m, k, dtype=kind), torch.empty(n, k, dtype=kind).t(),
                                     torch.empty(m, n, dtype=kind), arch=arch, sms=sms)
    return f"{choice.step}({changes(choice.step, choice.config) or 'default'})"


def quack_gemm() -> Any:
    """quack's default GEMM as (a, b, c, config) -> c, or None where quack does not import."""
    try:
        from quack.gemm_interface import gemm
    except ImportError as exc:
        print(f"quack is not timed: {exc}")
        return None
    return lambda a, b, c, config: gemm(a, b, out=c)


def plain_rows(shapes: list[tuple[int, int, int]], dtypes: list[str], rounds: int, settle_ms: float
               ) -> list[dict[str, Any]]:
    """torch.matmul, cutecourse.gemm and quack on every shape and dtype (`cutecourse.bench.profile`)."""
    launches = {OURS: (dispatched, None)}
    quack = quack_gemm()
    if quack is not None:
        launches[QUACK] = (quack, None)
    import torch

    rows = bench.profile(shapes, dtypes, launches, rounds=rounds, settle_ms=settle_ms)
    major, minor = torch.cuda.get_device_capability()
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    for r in rows:
        if r["kernel"] == OURS:
            r["ran"] = ran(r["M"], r["N"], r["K"], r["dtype"], 10 * major + minor, sms)
    return [dict(r, epilogue="none", baseline="torch.matmul") for r in rows]


def extra_rows(shapes: list[tuple[int, int, int]], dtypes: list[str], rounds: int, settle_ms: float
               ) -> list[dict[str, Any]]:
    """GELU(x @ W.t() + bias) against cuBLASLt's fused epilogue in each 16-bit dtype, and fp8 e4m3 against
    torch._scaled_mm, on `shapes` (benchmarks/epilogue.py's kernels, checked first)."""
    import torch

    meta = dict(date=datetime.date.today().isoformat(), gpu=torch.cuda.get_device_name())
    rows = []
    with bench.Clocks() as clocks:
        for m, n, k in shapes:
            for dtype in [*dtypes, fused_bench.FP8]:
                if dtype == fused_bench.FP8:
                    kernels = fused_bench.fp8_kernels(m, n, k, [], print, dispatcher=True)
                else:
                    kernels = fused_bench.sixteen_bit_kernels(dtype, m, n, k, {OURS: (dispatched, None)}, print,
                                                              activations=("gelu_tanh",))
                torch.cuda.empty_cache()
                times, power = bench.settled_rounds(kernels, rounds, settle_ms, clocks)
                rows += fused_bench.rows_of(times, power, 2 * m * n * k, **meta, dtype=dtype, M=m, N=n, K=k)
    return rows


def geomeans(rows: list[dict[str, Any]]) -> list[str]:
    """Per dtype and epilogue, for cutecourse.gemm and quack: the geomean and the worst ratio to the baseline, and
    the shape of the worst."""
    lines = []
    groups = dict.fromkeys((r["dtype"], r["epilogue"]) for r in rows)
    for dtype, epi in groups:
        for kernel in (OURS, QUACK):
            mine = [r for r in rows if (r["dtype"], r["epilogue"]) == (dtype, epi) and r["kernel"].startswith(kernel)
                    and r["kernel"] != r["baseline"]]
            if not mine:
                continue
            ratios = [float(r["ratio"]) for r in mine]
            worst = min(mine, key=lambda r: float(r["ratio"]))
            geomean = math.exp(statistics.fmean(math.log(x) for x in ratios))
            lines.append(f"{dtype:>14} {epi:>9} {kernel:<16} vs {mine[0]['baseline']:<22} geomean {geomean:.3f}  "
                         f"worst {float(worst['ratio']):.3f} ({worst['M']}x{worst['N']}x{worst['K']})  "
                         f"over {len(ratios)} shapes")
    return lines


def plot(csv_path: str, chart_path: str) -> None:
    """Each shape's ratio to torch.matmul (cutecourse.gemm, quack), one panel per 16-bit dtype."""
    import matplotlib

    matplotlib.use("Agg")
    matplotlib.rcParams["svg.fonttype"] = "none"
    import matplotlib.pyplot as plt

    with open(csv_path) as f:
        rows = [r for r in csv.DictReader(f) if r["epilogue"] == "none" and r["kernel"] in (OURS, QUACK)]
    dtypes = list(dict.fromkeys(r["dtype"] for r in rows))
    fig, axes = plt.subplots(len(dtypes), 1, figsize=(14, 3.6 * len(dtypes)), squeeze=False)
    for ax, dtype in zip(axes[:, 0], dtypes):
        shapes = list(dict.fromkeys((r["M"], r["N"], r["K"]) for r in rows if r["dtype"] == dtype))
        kernels = [k for k in (OURS, QUACK) if any(r["kernel"] == k for r in rows)]
        width = 0.8 / len(kernels)
        for i, kernel in enumerate(kernels):
            ratios = [next((float(r["ratio"]) for r in rows if r["kernel"] == kernel and r["dtype"] == dtype
                            and (r["M"], r["N"], r["K"]) == shape), 0.0) for shape in shapes]
            ax.bar([s + i * width for s in range(len(shapes))], ratios, width, label=kernel)
        ax.axhline(1.0, color="black", linewidth=0.8)
        ax.axhline(0.9, color="grey", linewidth=0.6, linestyle="--")
        ax.set_xticks([s + 0.4 - width / 2 for s in range(len(shapes))], [f"{m}×{n}×{k}" for m, n, k in shapes],
                      fontsize=7, rotation=45, ha="right")
        ax.set_ylabel(f"{dtype}: torch.matmul time / ours")
        ax.legend(fontsize=8)
    axes[0, 0].set_title(f"GEMM shape suite vs torch.matmul ({rows[0]['gpu']}, {rows[0]['date']})")
    fig.tight_layout()
    fig.savefig(chart_path)
    print(f"chart: {chart_path}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dtypes", nargs="+", default=["bfloat16", "float16"])
    parser.add_argument("--only", nargs="+", default=[], metavar="TEXT",
                        help="only the shapes whose MxNxK contains one of these, e.g. 128x 1x")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds; the median is reported")
    parser.add_argument("--settle-ms", type=float, default=300.0,
                        help="back-to-back launches of a kernel before it is timed, in ms")
    parser.add_argument("--no-extras", action="store_true", help="leave out the fused epilogue and fp8")
    parser.add_argument("--quick", action="store_true", help="bfloat16, 2 rounds, 200 ms settles, no extras")
    parser.add_argument("--csv", help="default: benchmarks/results/gemm-shapes-<gpu>-<date>.csv")
    parser.add_argument("--plot", metavar="CSV", help="only draw the chart of an earlier run's CSV")
    args = parser.parse_args()
    if args.plot:
        plot(args.plot, str(Path(args.plot).with_suffix(".svg")))
        return
    if args.quick:
        args.dtypes = ["bfloat16"]
        args.rounds = 2
        args.settle_ms = 200.0
        args.no_extras = True

    import torch

    os.environ["CUTECOURSE_CACHE"] = tempfile.mkdtemp()  # no tuned picks: the dispatcher's rules decide

    def picked(shape: tuple[int, int, int]) -> bool:
        return not args.only or any(text in "x".join(map(str, shape)) for text in args.only)

    shapes = [s for s in SHAPES if picked(s)]
    gpu = torch.cuda.get_device_name().split()[-1].lower()
    path = args.csv or str(Path(__file__).parent / "results" / f"gemm-shapes-{gpu}-{datetime.date.today()}.csv")
    plain = plain_rows(shapes, args.dtypes, args.rounds, args.settle_ms)
    rows = plain if args.no_extras else plain + extra_rows([s for s in EXTRAS if picked(s)], args.dtypes,
                                                            args.rounds, args.settle_ms)
    with open(path, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=FIELDS, extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows)
    # The extras' rows (their torch.matmul's epilogue is "none" too, with no "data") are in the CSV and the geomeans.
    print(bench.table(plain))
    print("\n".join(f"{r['dtype']} {r['M']}×{r['N']}×{r['K']}: cutecourse.gemm ran {r['ran']}" for r in plain
                    if r.get("ran")))
    print("\n".join(geomeans(rows)))
    print(f"csv: {path}")
    try:
        plot(path, str(Path(path).with_suffix(".svg")))
    except ImportError:
        print(f"no matplotlib here: draw the chart elsewhere with  python benchmarks/gemm_shapes.py --plot {path}")


if __name__ == "__main__":
    main()
