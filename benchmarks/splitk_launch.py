"""Split-K's second launch, with and without programmatic dependent launch (PDL): step 11's split GEMM and its
reduction as the package launches them (the reduction launched while the GEMM runs, waiting in griddepcontrol.wait),
against the same kernels launched one behind the other (a copy of `cutecourse.kernels.gemm.splitk` with
``use_pdl=True`` and the wait taken out), on the shipped table's split picks, with torch.matmul, settled and
interleaved (`cutecourse.bench.settled_rounds`). Needs an sm_90 GPU. Which problems a run timed, and on which
table, is in benchmarks/RESULTS.md.

    python benchmarks/splitk_launch.py [--rounds 5] [--settle-ms 200] [--dtypes bfloat16 float16]
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
import tempfile
from pathlib import Path

#: The PDL lines of splitk.py, and what the serial launch has instead.
EDITS = [("    cute.arch.griddepcontrol_wait()\n", ""), (", use_pdl=True)", ")")]


def serial_launcher():
    """Step 11's launcher over a copy of splitk.py without PDL: the reduction queued behind the GEMM."""
    from cutecourse.kernels.gemm import gemm11_pingpong as step
    from cutecourse.kernels.gemm import launcher, splitk

    source = Path(splitk.__file__).read_text()
    for old, new in EDITS:
        if source.count(old) != 1:
            raise SystemExit(f"splitk.py no longer has exactly one {old!r}: update EDITS")
        source = source.replace(old, new)
    path = Path(tempfile.mkdtemp()) / "splitk.py"
    path.write_text(source)  # the DSL reads a kernel's source from its file
    name = "serial.splitk"  # a launcher knows its module by the last name
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module.Launcher(step.host, step.Config, vector=True, min_cc=90, for_device=launcher.for_device,
                           epilogue=True, fp8=True, column_major_out=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--settle-ms", type=float, default=200.0)
    parser.add_argument("--dtypes", nargs="+", default=["bfloat16", "float16"])
    args = parser.parse_args()

    import torch

    from cutecourse import bench
    from cutecourse.kernels.gemm import gemm11_pingpong as step
    from cutecourse.kernels.gemm import winners

    if not torch.cuda.is_available() or torch.cuda.get_device_capability() != (9, 0):
        raise SystemExit("splitk_launch.py times step 11 on an sm_90 GPU (H100, H200); none is visible here")
    serial = serial_launcher()
    print("| dtype | problem | Config | kernel | µs | × torch.matmul | SM MHz | W |\n|---|---|---|---|---|---|---|---|")
    with bench.Clocks() as clocks:
        for dtype in args.dtypes:
            # the problems the shipped table (sm_90) gives a split Config: the deep K of few tiles
            splits = [e for e in winners.table()["sm_90"][dtype].values() if e["config"].get("splits", 1) > 1]
            for entry in splits:
                m, n, k = entry["shape"]
                config = step.Config(**entry["config"])
                a, b, c = bench.operands(m, n, k, dtype)
                kernels = {"torch.matmul": lambda i, a=a, b=b, c=c: torch.matmul(a, b, out=c),
                           "split-K, PDL": bench.checked("PDL", step.gemm, config, a, b, c, say=lambda s: None),
                           "split-K, serial": bench.checked("serial", serial, config, a, b, c, say=lambda s: None)}
                times, power = bench.settled_rounds(kernels, args.rounds, args.settle_ms, clocks)
                picked = f"splits={config.splits}" + (", swap-AB" if config.swap_ab else "")
                for name, r in bench.summary(times, power, 2 * m * n * k).items():
                    print(f"| {dtype} | {m}×{n}×{k} | {picked} | {name} | {r['ms'] * 1e3:.1f} | {r['ratio']:.3f} | "
                          f"{r['sm_mhz']} | {r['watts']} |", flush=True)


if __name__ == "__main__":
    main()
