"""Checks of lesson 6's exercise 6.6: the consumer mainloop of a TMA + wgmma GEMM in the **RS form** (A from
registers, B from the slots) on ``PipelineTmaAsync`` (a producer warp fills a ring of 4 slots; one consumer warpgroup
loads each k-tile's A into one set of registers and multiplies; 160 threads), keeping one batch in flight while it
waits for the next slot.

What it judges, in the PTX (on any machine with the DSL): RS wgmma (the A operand a register vector), the 160-thread
CTA, and the order of the consumers' loop from their wait for a full slot: ``wgmma.wait_group 0`` before the loads
that overwrite A's registers (the previous batch reads them asynchronously), the release of a slot after that wait and
before the loads, of a slot other than the one just waited for (the index register of its mbarrier address, traced
through the PTX's ``shl``/``add``), ``wgmma.fence`` after the last load and before the first wgmma (the loads are
register writes), ``wgmma.commit_group`` after the wgmmas, and ``wgmma.wait_group 0`` before the epilogue's stores.
The PTX is judged before ``ptxas``, which repairs a missing fence or wait on registers (it injects one and warns,
C7519 / C7517) but nothing about shared memory. On a Hopper GPU: real GEMMs (``C = A @ B``, A (M, K) row-major, B
(K, N) row-major, fp16 or bf16, a NaN-poisoned fp32 C) against the float64 product, on ragged shapes and long K. The
hidden tests (tests/hidden/test_06_smem_pipelines.py) use the same hints on shapes the notebook never shows.
"""

from __future__ import annotations

import re
from typing import Any

from cutecourse.grading.checks import l05_tiled_mma as L5
from cutecourse.grading.checks.l05_tiled_mma import VECTOR
from cutecourse.grading.checks.l06_tma_pipeline import (PTX_CASES, cases, index_of, is_release, is_wait, ptx_case,
                                                        slot_register, threads_hint)
from cutecourse.kernels import ptx

__all__ = ["VECTOR", "PTX_CASES", "ptx_case", "slot_register"]

#: The exercise's CTA (a consumer warpgroup and a producer warp), its ring and k-tile.
RS_THREADS = 128 + 32
RS_STAGES, RS_TILE_K = 4, 64
#: (M, N, K) of the GPU check: one tile; ragged M, N and K below one tile; rings that wrap (9 and 5 k-tiles); a long
#: K on one CTA (128 k-tiles).
SHAPES = [(128, 128, 64), (100, 72, 40), (7, 8, 8), (130, 136, 520), (257, 264, 264), (96, 120, 8192)]

_WAIT = re.compile(r"wgmma\.wait_group\S*\s+(\d+)\s*;")


def _is_a_load(line: str) -> bool:
    return bool(re.match(r"\s*(?:@!?%\w+\s+)?(ld\.shared|ldmatrix)", line))


def ptx_hint(code: Any) -> str | None:
    """What the PTX of a 6.6 answer lacks, or None (see the module's docstring)."""
    code = L5.ptx_text(code)
    if code is None:
        return "expected the PTX text (a str with an .entry)"
    if ptx.count(code, "mma.sync"):
        return "the PTX has mma.sync: the consumers multiply with wgmma (cute.gemm with the given tiled_mma)"
    lines = code.splitlines()
    first_mma = index_of(lines, 0, lambda line: "wgmma.mma_async" in line)
    if first_mma == len(lines):
        return "no wgmma.mma_async in the PTX: the consumers' loop must run cute.gemm(tiled_mma, ...) per k-block"
    if lines[first_mma].split("}", 1)[1].lstrip(" ,\t").startswith("%rd"):
        return ("the wgmmas read A from shared memory (a descriptor): this exercise's A comes from registers, the "
                "fragment tCrA, which the loop fills from the slot")
    hint = threads_hint(code, RS_THREADS, f"{RS_THREADS} threads: the consumer warpgroup and the producer warp. "
                        f"Launch with block=(RS_THREADS, 1, 1)")
    if hint:
        return hint
    # The consumers' loop starts at their wait for a full slot: the last mbarrier wait before the first wgmma.
    loop = max((i for i in range(first_mma) if is_wait(lines[i])), default=None)
    if loop is None:
        return ("no mbarrier wait before the first wgmma: the consumers must wait until a slot is full "
                "(consumer_wait) before they read it")
    loads = [i for i in range(loop, first_mma) if _is_a_load(lines[i])]
    if not loads:
        return ("no load from shared memory between the wait for a slot and the first wgmma: in the RS form the "
                "threads fill A's registers (tCrA) from the slot themselves, every k-tile")
    retire = [i for i in range(loop, loads[0]) if (m := _WAIT.search(lines[i])) and m.group(1) == "0"]
    if not retire:
        waits = [m.group(1) for line in lines[loop:loads[0]] for m in [_WAIT.search(line)] if m]
        said = f"a warpgroup.wait_group({waits[-1]})" if waits else "no warpgroup.wait_group"
        return (f"the loop loads A's registers with {said} before it: the batch issued on the last k-tile reads "
                f"those registers asynchronously and may still be running")
    release = index_of(lines, loop, is_release, before=first_mma)
    if release == first_mma or release > loads[0]:
        where = "after this k-tile's loads" if release < first_mma else "nowhere before this k-tile's wgmmas"
        return (f"the loop releases a slot (consumer_release: the plain mbarrier.arrive on empty) {where}; release "
                f"it as soon as the wait that retires its batch has returned, before this k-tile's loads, so that "
                f"the producer can refill it while this k-tile runs")
    if release < retire[0]:
        return ("the loop releases a slot before the warpgroup.wait_group that retires the batch reading it: TMA "
                "could refill it under a running wgmma")
    waited, released = slot_register(lines, loop), slot_register(lines, release)
    if waited is not None and waited == released:
        return ("the slot released is the one the loop has just waited for (the same index): its A is about to be "
                "loaded and its B read by this k-tile's wgmmas. Which k-tile's batch has the wait retired?")
    if not any("wgmma.fence" in line for line in lines[loads[-1]:first_mma]):
        return ("no wgmma.fence between the loads of A's registers and the first wgmma: the loads are register "
                "writes, and wgmma reads its registers asynchronously; ptxas would inject a fence and warn, but the "
                "kernel you wrote has the hazard")
    commit = index_of(lines, first_mma, lambda line: "wgmma.commit_group" in line)
    if commit == len(lines):
        return "no wgmma.commit_group after the batch: wait_group counts committed groups, so no wait can retire it"
    store = index_of(lines, commit, lambda line: "st.global" in line)
    if not any((m := _WAIT.search(line)) and m.group(1) == "0" for line in lines[commit:store]):
        return ("the epilogue stores the accumulators with no warpgroup.wait_group(0) before it: the last batch may "
                "still be writing them (ptxas would inject the wait; the kernel you wrote reads them early)")
    return None


#: What an RS pipeline gets wrong when its products are: said after the GEMM judge's hint.
SUSPECTS = ("; in the RS form also: are A's registers reloaded only after the batch reading them has retired, and is "
            "a slot released only once no batch reads it?")


gemm_result_hint = L5.result_hint(True, SUSPECTS)
rs_ptx, rs_gemm = L5.kernel_checks("rs", "rs_host", ptx_hint, lambda: [ptx_case(d, a) for d, a in PTX_CASES],
                                   lambda: cases(66, SHAPES, "float16"), True, SUSPECTS, gpu=90)
