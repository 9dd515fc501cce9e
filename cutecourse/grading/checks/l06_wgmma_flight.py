"""Checks of lesson 6's exercise 6.6: the consumer mainloop of a TMA + wgmma GEMM on ``PipelineTmaAsync`` that keeps
``IN_FLIGHT = 2`` k-tiles of wgmma in flight (a producer warp fills a ring of 4 slots; one consumer warpgroup
multiplies; 160 threads).

What it judges, in the PTX (on any machine with the DSL): wgmma from the slots, the 160-thread CTA, and the order of
the consumers' loop: ``wgmma.fence`` before the first wgmma of a batch (the zero-filled accumulators are register
writes), ``wgmma.commit_group`` after it, then ``wgmma.wait_group 2`` (two batches in flight) before the slot is
released (the plain ``mbarrier.arrive`` on empty), and ``wgmma.wait_group 0`` before the epilogue's stores. The PTX
is judged before ``ptxas``: ptxas repairs a missing fence or a missing last wait on the registers (it injects
``warpgroup.arrive`` / ``warpgroup.wait`` and says so, C7519 / C7517), but nothing repairs a slot released while a
wgmma still reads it. Which slot is released the PTX cannot tell (the index is a register): on a Hopper GPU, real
GEMMs (``C = A @ B``, A (M, K) row-major, B (K, N) row-major, fp16 or bf16, a NaN-poisoned fp32 C) against the
float64 product show a slot refilled under a running wgmma as wrong products, on long K (a ring that wraps many
times, one CTA: the Tensor Cores, not the loads, set the pace, so the issued batches run ahead). The hidden tests
(tests/hidden/test_06_smem_pipelines.py) use the same hints on shapes the notebook never shows.
"""

from __future__ import annotations

import re
from typing import Any

from cutecourse.grading.checks import Check
from cutecourse.grading.checks import l05_tiled_mma as L5
from cutecourse.grading.checks.l05_tiled_mma import VECTOR
from cutecourse.grading.checks.l06_tma_pipeline import PTX_CASES, block_threads, cases, ptx_case

__all__ = ["VECTOR", "PTX_CASES", "ptx_case"]

#: The exercise's CTA (a consumer warpgroup and a producer warp), ring and k-tile, and the batches kept in flight.
FLIGHT_THREADS = 128 + 32
FLIGHT_STAGES, FLIGHT_TILE_K = 4, 64
IN_FLIGHT = 2
#: (M, N, K) of the GPU check: one tile; ragged M, N and K below one tile; rings that wrap (9 and 5 k-tiles); and a
#: long K on one CTA (128 k-tiles), where a slot refilled under a running wgmma shows.
SHAPES = [(128, 128, 64), (100, 72, 40), (7, 8, 8), (130, 136, 520), (257, 264, 264), (96, 120, 8192)]

_WAIT = re.compile(r"wgmma\.wait_group\S*\s+(\d+)\s*;")


def _index(lines: list[str], after: int, test) -> int:
    return next((i for i in range(after, len(lines)) if test(lines[i])), len(lines))


def _is_release(line: str) -> bool:
    return "mbarrier.arrive" in line and "expect_tx" not in line


def ptx_hint(code: Any) -> str | None:
    """What the PTX of a 6.6 answer lacks, or None (see the module's docstring)."""
    from cutecourse.kernels import ptx

    code = L5.ptx_text(code)
    if code is None:
        return "expected the PTX text (a str with an .entry)"
    sync = ptx.count(code, "mma.sync") + ptx.count(code, "ldmatrix")
    if sync:
        return (f"the PTX has {sync} mma.sync/ldmatrix: the consumers multiply with wgmma straight from the slots "
                f"(cute.gemm with the given tiled_mma on tCrA/tCrB)")
    if not ptx.count(code, "wgmma.mma_async"):
        return "no wgmma.mma_async in the PTX: the consumers' loop must run cute.gemm(tiled_mma, ...) on each slot"
    threads = block_threads(code)
    if threads != FLIGHT_THREADS:
        have = "declares no CTA size" if threads is None else f"has CTAs of {threads} threads"
        return (f"the kernel {have} (.reqntid in the PTX); this exercise's CTA is {FLIGHT_THREADS} threads: the "
                f"consumer warpgroup and the producer warp. Launch with block=(FLIGHT_THREADS, 1, 1)")
    if ptx.count(code, "mbarrier.try_wait") + ptx.count(code, "mbarrier.test_wait") < 2:
        return ("the PTX has fewer than two mbarrier waits: the consumers must wait until each slot is full "
                "(consumer_wait) before their wgmmas read it")
    lines = code.splitlines()
    first_mma = _index(lines, 0, lambda line: "wgmma.mma_async" in line)
    # The consumers' loop starts at their wait for a full slot: the last mbarrier wait before the first wgmma.
    loop = max((i for i in range(first_mma) if "mbarrier.try_wait" in lines[i] or "mbarrier.test_wait" in lines[i]),
               default=0)
    if not any("wgmma.fence" in line for line in lines[loop:first_mma]):
        return ("no wgmma.fence between the wait for a slot and the first wgmma: the accumulators were written by "
                "the threads (the zero-fill), and wgmma reads them asynchronously; ptxas would inject a fence and "
                "warn, but the kernel you wrote has the hazard")
    commit = _index(lines, first_mma, lambda line: "wgmma.commit_group" in line)
    if commit == len(lines):
        return "no wgmma.commit_group after the batch: wait_group counts committed groups, so no wait can retire it"
    release = _index(lines, commit, _is_release)
    if release == len(lines):
        return ("no plain mbarrier.arrive after the batch: the consumers never release a slot "
                "(consumer_release), so the producer cannot refill it")
    waits = [int(m.group(1)) for line in lines[commit:release] for m in [_WAIT.search(line)] if m]
    if not waits:
        return ("a slot is released (the mbarrier.arrive of consumer_release) with no wgmma.wait_group after the "
                "batch's commit: wgmma reads shared memory asynchronously, so TMA could refill the slot while a "
                "batch still reads it")
    if waits[-1] != IN_FLIGHT:
        kept = f"{waits[-1]} batch{'es' if waits[-1] != 1 else ''}"
        return (f"the loop's wgmma.wait_group keeps {kept} in flight; this exercise keeps IN_FLIGHT = {IN_FLIGHT}: "
                f"the wait's argument is how many of the newest batches may still run")
    store = _index(lines, release, lambda line: "st.global" in line)
    if not any((m := _WAIT.search(line)) and m.group(1) == "0" for line in lines[release:store]):
        return ("the epilogue stores the accumulators with no warpgroup.wait_group(0) before it: the last batches "
                "may still be writing them (ptxas would inject the wait; the kernel you wrote reads them early)")
    return None


#: What a pipeline with batches in flight gets wrong when its products are: said after the GEMM judge's hint.
SUSPECTS = ("; with batches in flight also: is a slot released only once the wait_group that retires the batch "
            "reading it has returned?")


def gemm_result_hint(case: tuple[Any, ...], out: Any) -> str | None:
    """`out` (C after the launch) against A @ B in float64 (lesson 5's bounds, B (K, N)), or None."""
    return L5.gemm_hint(case, out, True, SUSPECTS)


def _judge_ptx(case: tuple[Any, ...], value: Any, outputs: list[Any]) -> str | None:
    return ptx_hint(value)


flight_ptx = Check("flight_ptx", "flight_host", lambda: [ptx_case(d, a) for d, a in PTX_CASES], _judge_ptx,
                   via="ptx", options=(("vector", VECTOR),))
flight_gemm = Check("flight_gemm", "flight_host", lambda: cases(66, SHAPES, "float16"), L5.judge_gemm(True, SUSPECTS),
                    gpu=90, via="launch", options=(("vector", VECTOR),))
