"""Lesson 6 on the GPU: bank conflicts, the stage sweep of the pipelined GEMM steps and the mbarrier mistakes.

    python3 benchmarks/smem_pipelines.py [--quick] [--json smem_pipelines.json] [--rounds 3] [--settle-ms 1000]

(a) Bank conflicts: cycles per ``ldmatrix.x4`` (cutecourse.kernels.smem_banks) on plain and swizzled tiles with rows
of 64 and 32 16-bit elements, next to the wavefront model's prediction; where ``ncu`` is on the PATH, also its
bank-conflict counters of shared loads and ldmatrix's (LDSM) wavefronts for the 64-element tiles, per ldmatrix.x4
(skipped where ncu is missing or cannot read the counters).
(b) The stage sweep: fp16 ``c = a @ b`` at 4096³ on random-normal data (A K-major, B K-major, C fp16, as
benchmarks/gemm.py) for gemm04_multistage and gemm05_swizzle at stages 3 up to the most that fit (with K tiles of
64 and of 32), and gemm06_tma, gemm07_wgmma and gemm08_warpspecialized at stages 2 up to the most that fit;
each checked against float64 torch, then timed with torch.matmul in the same settled, interleaved rounds as
benchmarks/gemm.py (cutecourse.bench.settled_rounds), median round reported. One stage is no pipeline at all in
the mbarrier steps (6-8): the only slot is still being read while the next k-tile waits for it, so they hang, and
the sweep starts at 2.
(c) The mbarrier scenarios (cutecourse.kernels.mbarrier_demo): whether each bounded wait completed, and after how
many tries.

It prints markdown tables to paste into benchmarks/RESULTS.md under a heading with the date, GPU, driver, DSL
version and the exact command, and writes every figure to `--json`. About 3 minutes on an H200: 19 GEMM
configurations and torch.matmul, 3 rounds of about a second each, plus a compile of about a second for each
configuration and under a minute of ncu; `--quick` (2048³, two configurations, one round, no ncu) under one.
"""

from __future__ import annotations

import argparse
import csv
import datetime
import io
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from cutecourse.bench import checked, kernels_to_time, settled_rounds, summary

from cutecourse.kernels.gemm import GEMM_STEPS

ROOT = Path(__file__).parents[1]
#: (row elements, layout) of the bank microbenchmark: each row width plain, then swizzled.
BANK_CASES = [(64, "plain"), (64, "swizzled"), (32, "plain"), (32, "S<1,3,3>"), (32, "swizzled"), (32, "S<3,3,3>")]
QUICK_BANK_CASES = BANK_CASES[:2]
#: ncu counters: bank conflicts of shared loads, then ldmatrix's own (LDSM) conflicts and wavefronts. An ncu that
#: lacks the LDSM ones is asked for the first alone.
NCU_METRICS = ("l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum",
               "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ldsm.sum",
               "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ldsm.sum")
NCU_ITERATIONS = 256
QUICK_SWEEP = ["5:tile_k=32,stages=3", "7:stages=4"]


def number(step: str) -> int:
    return GEMM_STEPS.index(step) + 1


def stages_that_fit(step: str, least: int, **fields: int) -> list[int]:
    """`least` up to the most stages the step's Config accepts with `fields` (it refuses stages that do not fit)."""
    import importlib

    config_type = importlib.import_module(f"cutecourse.kernels.gemm.{step}").Config
    stages = [least]
    while True:
        try:
            config_type(**fields, stages=stages[-1] + 1)
        except ValueError:
            return stages
        stages.append(stages[-1] + 1)


def sweep(quick: bool) -> list[str]:
    """The stage sweep as benchmarks/gemm.py's --variants specs, STEP:FIELD=VALUE,..."""
    if quick:
        return QUICK_SWEEP
    specs = []
    for step in ("gemm04_multistage", "gemm05_swizzle"):
        for tile_k in (64, 32):
            specs += [f"{number(step)}:tile_k={tile_k},stages={s}" for s in stages_that_fit(step, 3, tile_k=tile_k)]
    for step in ("gemm06_tma", "gemm07_wgmma", "gemm08_warpspecialized"):
        specs += [f"{number(step)}:stages={s}" for s in stages_that_fit(step, 2)]
    return specs


def stage_bytes(config: Any) -> int:
    """Shared memory of a config's A and B stages (16-bit elements)."""
    return config.stages * (config.tile_m + config.tile_n) * config.tile_k * 2


def banks(cases: list[tuple[int, str]], iterations: int) -> list[dict[str, Any]]:
    """Each case's predicted and measured cycles per ldmatrix.x4, and its ratio to the same row width's last
    swizzled ("swizzled") case."""
    from cutecourse.kernels import smem_banks

    rows = []
    for row_elements, layout in cases:
        config = smem_banks.Config(layout, row_elements)
        rows.append(dict(row_elements=row_elements, layout=layout, layout_text=config.layout_text(),
                         predicted=smem_banks.predicted_cycles(layout, row_elements),
                         measured=round(smem_banks.measure(layout, row_elements, iterations), 2)))
    swizzled = {r["row_elements"]: r["measured"] for r in rows if r["layout"] == "swizzled"}
    for r in rows:
        r["vs_swizzled"] = round(r["measured"] / swizzled[r["row_elements"]], 2)
    return rows


_NCU_CHILD = ("from cutecourse.kernels import smem_banks\n"
              f"smem_banks.measure('plain', 64, {NCU_ITERATIONS})\n"
              f"smem_banks.measure('swizzled', 64, {NCU_ITERATIONS})\n")


def ncu_counters() -> dict[str, Any]:
    """ncu's shared-memory counters per ldmatrix.x4 for the plain and swizzled 64-element tiles, or why there are
    none ({"skipped": reason})."""
    import torch

    from cutecourse.kernels import smem_banks

    exe = shutil.which("ncu")
    if exe is None:
        return {"skipped": "ncu is not on the PATH"}
    for metrics in (NCU_METRICS, NCU_METRICS[:1]):
        command = [exe, "--csv", "--metrics", ",".join(metrics), "-k", "regex:kernel_cutlass", sys.executable, "-c",
                   _NCU_CHILD]
        try:
            run = subprocess.run(command, capture_output=True, text=True, timeout=300, cwd=ROOT)
        except subprocess.TimeoutExpired:
            return {"skipped": "ncu took more than 300 s"}
        rows = [r for r in csv.DictReader(io.StringIO("\n".join(
            line for line in run.stdout.splitlines() if line.startswith('"')))) if r.get("Metric Name") in metrics]
        if run.returncode == 0 and len(rows) == 2 * len(metrics):
            break
    else:
        errors = [line for line in (run.stdout + run.stderr).splitlines() if "ERROR" in line]
        return {"skipped": f"ncu exited {run.returncode}: {errors[0] if errors else 'no counters in its output'}"}
    sms = torch.cuda.get_device_properties(torch.cuda.current_device()).multi_processor_count
    config = smem_banks.Config("plain", 64)
    issued = config.issued(NCU_ITERATIONS) * sms  # one CTA per SM
    launches = sorted({r["ID"] for r in rows}, key=int)
    result = {}
    for layout, launch_id in zip(("plain", "swizzled"), launches):
        values = {r["Metric Name"]: _number(r["Metric Value"]) for r in rows if r["ID"] == launch_id}
        result[layout] = {metric.split("__")[1].removesuffix(".sum"): (
            None if values[metric] is None else round(values[metric] / issued, 2)) for metric in metrics}
    return result


def _number(text: str) -> float | None:
    """ncu's value of a counter, None where it has none ("n/a": the counter does not exist on this GPU)."""
    try:
        return float(text.replace(",", ""))
    except ValueError:
        return None


def stage_sweep(specs: list[str], m: int, n: int, k: int, rounds: int, settle_ms: float) -> list[dict[str, Any]]:
    """Each spec's config, smem, median ms, TFLOP/s and ratio to torch.matmul (timed in the same rounds)."""
    import torch

    from cutecourse.bench import Clocks

    torch.manual_seed(0)
    a = torch.randn(m, k, device="cuda", dtype=torch.float16)
    b = torch.randn(n, k, device="cuda", dtype=torch.float16).t()
    c = torch.empty(m, n, device="cuda", dtype=torch.float16)
    launches = kernels_to_time([], specs)
    kernels = {"torch.matmul": lambda i: torch.matmul(a, b, out=c)}
    for name, (gemm, config) in launches.items():
        kernels[name] = checked(f"{name} float16 {m}x{n}x{k}", gemm, config, a, b, c,
                                say=lambda line: print(line, flush=True))
    with Clocks() as clocks:
        times, power = settled_rounds(kernels, rounds, settle_ms, clocks)
    rows = []
    for name, r in summary(times, power, 2 * m * n * k).items():
        config = launches[name][1] if name in launches else None
        rows.append(dict(kernel=name, step=name.partition("(")[0], tile_k=getattr(config, "tile_k", None),
                         stages=getattr(config, "stages", None),
                         smem_kib=round(stage_bytes(config) / 1024, 1) if config else None,
                         ms=round(r["ms"], 4), tflops=round(r["tflops"], 1), ratio=round(r["ratio"], 3),
                         sm_mhz=None if r["sm_mhz"] is None else round(r["sm_mhz"]),
                         watts=None if r["watts"] is None else round(r["watts"]),
                         rounds=[round(t, 4) for t in times[name]]))
    return rows


def mbarriers() -> list[dict[str, Any]]:
    from cutecourse.kernels import mbarrier_demo

    return [dict(scenario=name, what=mbarrier_demo.SCENARIOS[name].what,
                 predicted=mbarrier_demo.SCENARIOS[name].completes, **outcome._asdict())
            for name, outcome in mbarrier_demo.run_all().items()]


def cell(value: Any) -> str:
    return "" if value is None else str(value)


def markdown(meta: dict[str, Any], bank_rows: list[dict], ncu: dict[str, Any], sweep_rows: list[dict],
             barrier_rows: list[dict]) -> str:
    shape = "×".join(str(x) for x in meta["shape"])
    out = [f"## {meta['date']} · {meta['gpu']} (driver {meta['driver']}) · lesson 6: bank conflicts, stage sweep, "
           "mbarrier mistakes", "", "Command (CuTe DSL " + meta["dsl"] + "):", "```", meta["command"], "```", "",
           "Bank conflicts: cycles one `ldmatrix.x4` costs an SM (8 warps, one CTA per SM; the model: 4 matrices × "
           "the wavefronts of one, one wavefront a cycle):", "",
           "| row elements | layout | model (cycles) | measured (cycles) | × swizzled |", "|---|---|---|---|---|"]
    out += [f"| {r['row_elements']} | `{r['layout_text']}` | {r['predicted']} | {r['measured']} | {r['vs_swizzled']} |"
            for r in bank_rows]
    if "skipped" in ncu:
        out += ["", f"ncu counters: not read ({ncu['skipped']})."]
    else:
        out += ["", "ncu, per `ldmatrix.x4` (64-element rows):", "", "| layout | " + " | ".join(ncu["plain"]) + " |",
                "|---|" + "---|" * len(ncu["plain"])]
        out += [f"| {layout} | " + " | ".join(str(v) for v in ncu[layout].values()) + " |" for layout in ncu]
    out += ["", f"Stage sweep, float16 {shape}, A and B K-major, C float16, median of {meta['rounds']} settled, "
            "interleaved rounds:", "",
            "| kernel | tile_k | stages | A+B smem KiB | ms | TFLOP/s | × torch.matmul | SM MHz | W |",
            "|---|---|---|---|---|---|---|---|---|"]
    out += [f"| {r['kernel']} | {cell(r['tile_k'])} | {cell(r['stages'])} | {cell(r['smem_kib'])} | {r['ms']} | "
            f"{r['tflops']} | {r['ratio']} | {cell(r['sm_mhz'])} | {cell(r['watts'])} |" for r in sweep_rows]
    out += ["", "mbarrier scenarios (bounded waits: at most 1000 `mbarrier.try_wait`):", "",
            "| scenario | what | rules predict | completed | tries | cycles | sum read |",
            "|---|---|---|---|---|---|---|"]
    out += [f"| {r['scenario']} | {r['what']} | {'completes' if r['predicted'] else 'never completes'} | "
            f"{r['completed']} | {r['tries']} | {r['cycles']} | {cell(r['seen'])} |" for r in barrier_rows]
    return "\n".join(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="2048³, two GEMM configurations, one round, no ncu")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds of the stage sweep")
    parser.add_argument("--settle-ms", type=float, default=1000.0, help="each kernel runs alone this long first")
    parser.add_argument("--iterations", type=int, default=4096, help="loop trips of the bank microbenchmark")
    parser.add_argument("--json", metavar="PATH", help="write every figure here")
    args = parser.parse_args()

    import torch

    from cutecourse import env

    machine = env.probe()
    size = 2048 if args.quick else 4096
    rounds, settle_ms = (1, 100.0) if args.quick else (args.rounds, args.settle_ms)
    meta = dict(date=datetime.date.today().isoformat(), gpu=torch.cuda.get_device_name(), driver=machine.driver,
                dsl=machine.dsl, command=" ".join(["python3", *sys.argv]), shape=[size] * 3, dtype="float16",
                rounds=rounds, settle_ms=settle_ms)
    start = time.perf_counter()
    bank_rows = banks(QUICK_BANK_CASES if args.quick else BANK_CASES, args.iterations)
    ncu = {"skipped": "--quick"} if args.quick else ncu_counters()
    sweep_rows = stage_sweep(sweep(args.quick), size, size, size, rounds, settle_ms)
    barrier_rows = mbarriers()
    print(markdown(meta, bank_rows, ncu, sweep_rows, barrier_rows))
    print(f"\n({time.perf_counter() - start:.0f} s)")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(dict(meta, banks=bank_rows, ncu=ncu, stage_sweep=sweep_rows, mbarrier=barrier_rows), f,
                      indent=1)
        print(f"json: {args.json}")


if __name__ == "__main__":
    main()
