"""What the host pays around each GEMM step: the first compile in a fresh process, and the launcher's time per call.

    python benchmarks/host_costs.py compile [--steps gemm05_swizzle ...]   # no GPU needed (compile-only arch)
    python benchmarks/host_costs.py launch [--steps ...] [--calls 200] [--rounds 9]   # needs a GPU

`compile`: each step compiled once in a fresh Python process with the DSL's file cache off, for its own arch (sm_80
for steps 1-5, sm_90a for the Hopper steps), from CPU tensors; the seconds of `compile_for` alone.

`launch`: the cached launcher (`module.gemm(a, b, c)`: checks, plan cache, pointers) against the bare compiled call it
ends in, on a 64³ problem, each the best µs per call over `--rounds` interleaved batches of `--calls`, the
garbage collector off (as timeit does). The figure is the difference: what the launcher adds per call. Beside them,
in the same rounds: the same host compiled for TVM FFI (`cute.compile(..., options="--enable-tvm-ffi")`, called with
plain ints, where the `apache-tvm-ffi` package is installed), and torch.matmul, the floor a small GEMM races.

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


def tvm_ffi() -> bool:
    """Whether the DSL can build kernels called through TVM FFI (the `apache-tvm-ffi` package is installed)."""
    try:
        import tvm_ffi  # noqa: F401
    except ImportError:
        return False
    return True


def launcher_overhead_us(step: str, n: int, rounds: int) -> dict[str, float]:
    """µs per call for `step` on a 64³ bf16 problem: "launcher" (`module.gemm(a, b, c)`), "bare" (the compiled call
    it ends in, with its pointers and extents built once), "tvm-ffi" (the same host compiled with
    ``--enable-tvm-ffi`` and called with plain ints: `data_ptr()`s and extents; only where `tvm_ffi()`), and
    "torch" (torch.matmul into the same output), interleaved."""
    import torch

    from cutecourse.kernels import launch
    from cutecourse.kernels.gemm import launcher

    module = importlib.import_module(f"cutecourse.kernels.gemm.{step}")
    a = torch.randn(64, 64, device="cuda").to(torch.bfloat16)
    b = torch.randn(64, 64, device="cuda").to(torch.bfloat16)
    c = torch.empty(64, 64, device="cuda")
    config = module.Config()
    bare, ops, fused = module.gemm.plan(a, b, c, config)
    stream = launch.current_stream()
    extents = launcher.extents(ops, a, b, c)
    pointers = launcher.pointers(ops, a, b, c)
    tail: tuple = ()
    if module.gemm.fuses:  # the plain epilogue's unused pointers (D's pointer stands in), alpha and beta
        tail = (*launcher.epilogue_pointers(fused, ops, pointers[2]), 1.0, 0.0)
    args = (*pointers, *extents, stream, *tail)
    calls = {"launcher": lambda: module.gemm(a, b, c), "bare": lambda: bare(*args)}
    if tvm_ffi():
        compiled = launcher.compile_for(module.host, config, ops, a, b, c, stream, options="--enable-tvm-ffi",
                                        fused=fused if module.gemm.fuses else None)
        ints = (a.data_ptr(), b.data_ptr(), c.data_ptr(), *extents, stream)
        if module.gemm.fuses:
            ints += (c.data_ptr(),) * 3 + (1.0, 0.0)
        compiled(*ints)
        torch.cuda.synchronize()
        calls["tvm-ffi"] = lambda: compiled(*ints)
    ab = torch.empty(64, 64, device="cuda", dtype=torch.bfloat16)
    calls["torch"] = lambda: torch.matmul(a, b, out=ab)
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
    ffi = "TVM FFI call (ints)" if tvm_ffi() else "TVM FFI call (apache-tvm-ffi not installed)"
    print(f"| step | launcher | bare compiled call | {ffi} | torch.matmul | launcher adds |\n|---|---|---|---|---|---|")
    for step in args.steps:
        module = importlib.import_module(f"cutecourse.kernels.gemm.{step}")
        if module.gemm.min_cc > 10 * major + minor:
            print(f"| {step} | needs sm_{module.gemm.min_cc} | | | | |")
            continue
        us = launcher_overhead_us(step, args.calls, args.rounds)
        ffi_us = f"{us['tvm-ffi']:.1f}" if "tvm-ffi" in us else ""
        print(f"| {step} | {us['launcher']:.1f} | {us['bare']:.1f} | {ffi_us} | {us['torch']:.1f} | "
              f"{us['launcher'] - us['bare']:.1f} |", flush=True)


if __name__ == "__main__":
    main()
