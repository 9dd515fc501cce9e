"""What the host pays around each GEMM step: the first compile in a fresh process, and the launcher's time per call.

    python benchmarks/host_costs.py compile [--steps gemm05_swizzle ...]   # no GPU needed (compile-only arch)
    python benchmarks/host_costs.py launch [--steps ...] [--calls 200] [--rounds 9]   # needs a GPU

`compile`: each step compiled once in a fresh Python process with the DSL's file cache off, for its own arch (sm_80
for steps 1-5, sm_90a for the Hopper steps), from CPU tensors; the seconds of `compile_for` alone.

`launch`: the cached launcher (`module.gemm(a, b, c)`: the plan cache's key, the addresses, the stream) against the
bare TVM FFI call it ends in (the compiled kernel called with ints built once), on a 64³ problem, and
`cutecourse.gemm` (the dispatcher's own cache in front of the launcher) and torch.matmul, the floor a small GEMM
races: each the best µs per call over `--rounds` interleaved batches of `--calls`, the garbage collector off (as
timeit does). "launcher adds" is the difference between the launcher and the bare call.

These were test assertions (at most 10 s to compile, at most 20 µs of launcher overhead) until a shared machine's
noise failed one (21.5 µs on the H200). Timing is a benchmark: the figures go to benchmarks/RESULTS.md.
"""

from __future__ import annotations

import argparse
import gc
import importlib
import json
import math
import os
import subprocess
import sys
import time

from cutecourse.kernels.gemm import GEMM_STEPS

_TIMER = r"""
import importlib, json, sys, time, torch
from cutlass.cute.runtime import make_fake_stream
from cutecourse.kernels.gemm import launcher, operands
step, arch = sys.argv[1], sys.argv[2]
module = importlib.import_module(f"cutecourse.kernels.gemm.{step}")
a, b = torch.empty(256, 256, dtype=torch.float16), torch.empty(256, 256, dtype=torch.float16)
c = torch.empty(256, 256)
ops = operands.traits(a, b, c, step=step, vector=module.gemm.vector)
start = time.perf_counter()
launcher.compile_for(module.host, module.Config(), ops, a, b, c, make_fake_stream(), options=f"--gpu-arch {arch}")
print(json.dumps(time.perf_counter() - start))
"""


def arch(step: str) -> str:
    """The arch a step compiles for without a GPU: sm_90a for the Hopper steps, sm_80 for the others."""
    return "sm_90a" if importlib.import_module(f"cutecourse.kernels.gemm.{step}").gemm.min_cc >= 90 else "sm_80"


def first_compile_seconds(step: str) -> float:
    env = dict(os.environ, CUTE_DSL_DISABLE_FILE_CACHING="1")
    out = subprocess.run([sys.executable, "-c", _TIMER, step, arch(step)], capture_output=True, text=True,
                         env=env, check=True, timeout=300).stdout
    return json.loads(out.strip().splitlines()[-1])


def best_us_per_call(calls, n: int, rounds: int) -> list[float]:
    """Each call's best µs per call over `rounds`, the calls' batches interleaved, so that a change of the host's
    clock between them (another process, a frequency step) cannot fall on one side only."""
    import torch

    best = [math.inf] * len(calls)
    gc.disable()
    try:
        for _ in range(rounds):
            for i, call in enumerate(calls):
                torch.cuda.synchronize()
                start = time.perf_counter()
                for _ in range(n):
                    call()
                best[i] = min(best[i], (time.perf_counter() - start) / n * 1e6)
    finally:
        gc.enable()
    return best


def launcher_overhead_us(step: str, n: int, rounds: int) -> dict[str, float]:
    """µs per call for `step` on a 64³ bf16 problem: "launcher" (`module.gemm(a, b, c)`), "bare" (the TVM FFI
    function it ends in, its arguments built once), "dispatch" (`cutecourse.gemm(a, b, c, config=...)` with the
    step's default Config) and "torch" (torch.matmul into a bf16 output), interleaved."""
    import torch

    import cutecourse
    from cutecourse.kernels import launch

    module = importlib.import_module(f"cutecourse.kernels.gemm.{step}")
    a = torch.randn(64, 64, device="cuda").to(torch.bfloat16)
    b = torch.randn(64, 64, device="cuda").to(torch.bfloat16)
    c = torch.empty(64, 64, device="cuda")
    config = module.Config()
    plan = module.gemm.plan(a, b, c, config)
    args = (a.data_ptr(), b.data_ptr(), c.data_ptr(), *plan.extents, launch.raw_stream(a.get_device()))
    if module.gemm.fuses:  # the plain epilogue's unused pointers (D's address stands in), alpha and beta
        args += (c.data_ptr(),) * 3 + (1.0, 0.0)
    ab = torch.empty(64, 64, device="cuda", dtype=torch.bfloat16)
    calls = {"launcher": lambda: module.gemm(a, b, c), "bare": lambda: plan.fn(*args),
             "dispatch": lambda: cutecourse.gemm(a, b, c, config=config),
             "torch": lambda: torch.matmul(a, b, out=ab)}
    return dict(zip(calls, best_us_per_call(list(calls.values()), n, rounds)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("what", choices=("compile", "launch"))
    parser.add_argument("--steps", nargs="+", default=list(GEMM_STEPS), choices=GEMM_STEPS)
    parser.add_argument("--calls", type=int, default=200, help="calls per timed batch (launch)")
    parser.add_argument("--rounds", type=int, default=9, help="interleaved batches per call (launch)")
    args = parser.parse_args()
    if args.what == "compile":
        print("| step | arch | first compile, s |\n|---|---|---|")
        for step in args.steps:
            print(f"| {step} | {arch(step)} | {first_compile_seconds(step):.1f} |", flush=True)
        return
    import torch

    major, minor = torch.cuda.get_device_capability()
    print(f"{torch.cuda.get_device_name()} (sm_{major}{minor})")
    print("| step | launcher | bare TVM FFI call | cutecourse.gemm | torch.matmul | launcher adds |\n"
          "|---|---|---|---|---|---|")
    for step in args.steps:
        module = importlib.import_module(f"cutecourse.kernels.gemm.{step}")
        if module.gemm.min_cc > 10 * major + minor:
            print(f"| {step} | needs sm_{module.gemm.min_cc} | | | | |")
            continue
        us = launcher_overhead_us(step, args.calls, args.rounds)
        print(f"| {step} | {us['launcher']:.1f} | {us['bare']:.1f} | {us['dispatch']:.1f} | {us['torch']:.1f} | "
              f"{us['launcher'] - us['bare']:.1f} |", flush=True)


if __name__ == "__main__":
    main()
