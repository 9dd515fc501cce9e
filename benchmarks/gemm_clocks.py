"""How one GEMM's launch time and the SM clock move after another GEMM ran: the power limit's memory.

    python benchmarks/gemm_clocks.py [--shape 4096x4096x4096] [--dtypes float16 bfloat16] [--pairs 6:9 6:torch 9:torch]

For each pair BEFORE:AFTER (a step number or "torch"), BEFORE runs back to back for `--before-ms`, then AFTER runs
back to back for `--after-ms` with a CUDA event every 40 launches. It prints AFTER's mean launch time and the SM clock
(nvidia-smi, cutecourse.bench.Clocks) in ten slices of that time. On an H200 with random data a kernel after a
lighter one starts at the lighter one's clock and takes hundreds of milliseconds to settle at its own: this is why
benchmarks/gemm.py settles each kernel for a second and alternates the order of its rounds.
"""

from __future__ import annotations

import argparse
import time

import torch

from cutecourse.bench import Clocks, kernels_to_time, median_ms, problem
from cutecourse.kernels.gemm import GEMM_STEPS

parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("--shape", type=problem, default="4096x4096x4096", metavar="MxNxK")
parser.add_argument("--dtypes", nargs="+", default=["float16", "bfloat16"])
parser.add_argument("--pairs", nargs="+", default=["6:9", "6:torch", "torch:9", "9:torch"])
parser.add_argument("--before-ms", type=float, default=1000.0)
parser.add_argument("--after-ms", type=float, default=500.0)
args = parser.parse_args()
for pair in args.pairs:
    sides = pair.split(":")
    if len(sides) != 2 or any(x != "torch" and x not in {str(i) for i in range(1, len(GEMM_STEPS) + 1)}
                              for x in sides):
        parser.error(f"--pairs {pair!r}: each pair is BEFORE:AFTER, each a step 1-{len(GEMM_STEPS)} or 'torch', "
                     "e.g. 6:9 or 9:torch")
m, n, k = args.shape
names = sorted({x for pair in args.pairs for x in pair.split(":") if x != "torch"}, key=int)
steps = dict(zip(names, kernels_to_time([int(x) for x in names], []).values()))
BATCH, SLICES = 40, 10

with Clocks(period_ms=20) as clocks:
    for dtype in args.dtypes:
        torch.manual_seed(0)
        a = torch.randn(m, k, device="cuda", dtype=getattr(torch, dtype))
        b = torch.randn(n, k, device="cuda", dtype=a.dtype).t()
        c = torch.empty(m, n, device="cuda", dtype=a.dtype)
        run = {"torch": lambda: torch.matmul(a, b, out=c)}
        run.update({x: (lambda g=gemm, cfg=config: g(a, b, c, cfg)) for x, (gemm, config) in steps.items()})
        for f in run.values():  # compile
            f()
        torch.cuda.synchronize()
        launch_ms = median_ms(lambda i: run["torch"](), reps=1, batch=10, warmup=1)
        for pair in args.pairs:
            before, after = pair.split(":")
            end = time.monotonic() + args.before_ms / 1e3
            while time.monotonic() < end:
                for _ in range(BATCH):
                    run[before]()
                torch.cuda.synchronize()
            t0 = time.monotonic()
            events = [torch.cuda.Event(enable_timing=True) for _ in range(int(args.after_ms / launch_ms / BATCH) + 1)]
            events[0].record()
            for e in events[1:]:
                for _ in range(BATCH):
                    run[after]()
                e.record()
            torch.cuda.synchronize()
            per = [events[i].elapsed_time(events[i + 1]) / BATCH for i in range(len(events) - 1)]  # ms a launch
            step = max(1, len(per) // SLICES)
            cells = []
            for i in range(0, len(per), step):
                since = sum(per[:i]) * BATCH  # ms since AFTER started (the GPU was idle when it was queued)
                took = sum(per[i:i + step]) * BATCH
                reading = clocks.during(t0 + since / 1e3, t0 + (since + took) / 1e3 + 0.02)
                cells.append(f"{since:4.0f} ms: {sum(per[i:i + step]) / len(per[i:i + step]) * 1e3:5.1f} µs "
                             f"@ {reading[0] if reading else float('nan'):4.0f} MHz")
            print(f"{dtype} {m}x{n}x{k} {before} -> {after}: " + " | ".join(cells), flush=True)
