"""Checks of lesson 6's exercise 6.5: the full/empty mbarrier hand-off of a TMA + wgmma GEMM whose CTA is one
consumer warpgroup (warps 0-3: every wgmma and the epilogue) and one producer warp (warp 4: only TMA), 160 threads.

Its PTX on any machine (the instructions of the hand-off and the 160-thread CTA that makes the producer a warp of
its own), real GEMMs on a Hopper GPU: ``C = A @ B`` for a row-major A (M, K) and a row-major, so N-major, B (K, N),
fp16 or bf16, into a NaN-poisoned fp32 C. The reference is lesson 5's (:func:`l05_tiled_mma.gemm_hint`: the float64
product of the inputs as the learner's process held them). A kernel that deadlocks (a wait whose phase never
completes) never returns: the grader stops its process at the call's timeout and the call fails; the next call gets
a fresh process and a fresh GPU context. The hidden tests (tests/hidden/test_06_smem_pipelines.py) use the same
hints and generators on shapes the notebook never shows.
"""

from __future__ import annotations

import re
from typing import Any

from cutecourse.grading.checks import Check
from cutecourse.grading.checks import l05_tiled_mma as L5
from cutecourse.grading.checks.l05_tiled_mma import VECTOR

#: (dtype, arch) of the PTX check: wgmma and TMA exist on sm_90a only.
PTX_CASES = [("float16", "sm_90a"), ("bfloat16", "sm_90a")]
#: The CTA the exercise asks for: a consumer warpgroup and one producer warp.
TMA_THREADS = 128 + 32
#: Shared-memory slots of the exercise's ring; a ring that wraps (K > TMA_STAGES * 64) is where a wrong arrival count on
#: "empty" or a wrong producer parity past the first pass shows.
TMA_STAGES, TMA_TILE_K = 4, 64
#: (M, N, K) of the GPU check: one whole tile; ragged M, N and K below one tile; K = 8 (one k-block); two rings that
#: wrap (9 and 5 k-tiles, the last one partial).
SHAPES = [(128, 128, 64), (100, 72, 40), (7, 8, 8), (130, 136, 520), (257, 264, 264)]

_BLOCK = re.compile(r"^\s*\.(reqntid|maxntid)\s+(\d+)(?:\s*,\s*(\d+))?(?:\s*,\s*(\d+))?", re.MULTILINE)


def block_threads(code: str) -> int | None:
    """The CTA size the PTX declares for its kernel (``.reqntid x, y, z`` or ``.maxntid``), or None if none."""
    match = _BLOCK.search(code)
    if match is None:
        return None
    size = 1
    for extent in match.groups()[1:]:
        size *= int(extent or 1)
    return size


def ptx_hint(code: Any) -> str | None:
    """What the PTX of a 6.5 answer lacks, or None: wgmma and TMA, no mma.sync/ldmatrix, 160 threads (the consumer
    warpgroup and the producer warp), mbarriers initialised, a full barrier armed with TMA's bytes, a plain arrive
    that releases an empty slot, and waits on both sides of the hand-off."""
    from cutecourse.kernels import ptx

    code = L5.ptx_text(code)
    if code is None:
        return "expected the PTX text (a str with an .entry)"
    sync = ptx.count(code, "mma.sync") + ptx.count(code, "ldmatrix")
    if sync:
        return (f"the PTX has {sync} mma.sync/ldmatrix: the consumers multiply with wgmma straight from the shared "
                f"slots (cute.gemm with the given tiled_mma on tCrA/tCrB), not through registers")
    if not ptx.count(code, "wgmma.mma_async"):
        return "no wgmma.mma_async in the PTX: the consumers' mainloop must run cute.gemm(tiled_mma, ...) on each slot"
    if not ptx.count(code, "cp.async.bulk.tensor"):
        return ("no TMA load (cp.async.bulk.tensor) in the PTX: the producer warp must issue cute.copy with tma_atom_a "
                "and tma_atom_b into the slot, with tma_bar_ptr naming the barrier that counts the bytes")
    threads = block_threads(code)
    if threads != TMA_THREADS:
        have = "declares no CTA size" if threads is None else f"has CTAs of {threads} threads"
        return (f"the kernel {have} (.reqntid in the PTX); this exercise's CTA is {TMA_THREADS} threads: one consumer "
                f"warpgroup (warps 0-3) and a producer warp (warp 4) that only issues TMA. Launch with "
                f"block=(TMA_THREADS, 1, 1)")
    if not ptx.count(code, "mbarrier.init"):
        return "no mbarrier.init in the PTX: every full and empty barrier needs its arrival count before first use"
    if not ptx.count(code, "mbarrier.arrive.expect_tx"):
        return ("no mbarrier.arrive.expect_tx in the PTX: before its TMA copies the producer must arrive on full[s] "
                "and announce the bytes they will deliver, or the phase cannot wait for the data")
    releases = ptx.count(code, "mbarrier.arrive") - ptx.count(code, "mbarrier.arrive.expect_tx")
    if not releases:
        return ("no plain mbarrier.arrive in the PTX: the consumers never release a slot (an arrive on empty[s] once "
                "the wgmmas that read it are done), so the producer cannot refill it")
    waits = ptx.count(code, "mbarrier.try_wait") + ptx.count(code, "mbarrier.test_wait")
    if waits < 2:
        return (f"the PTX has {waits} mbarrier wait{'s' if waits != 1 else ''}; the hand-off needs one on each side: "
                f"the consumers wait until a slot is full, the producer until it is empty")
    return _release_hint(code.splitlines())


def _release_hint(lines: list[str]) -> str | None:
    """A slot is released only after a ``wgmma.wait_group`` since the batch's commit (wgmma reads shared memory
    asynchronously: before that wait TMA could refill a slot it still reads), and the accumulators are stored only
    after ``wgmma.wait_group 0``."""
    def first(after: int, test) -> int:
        return next((i for i in range(after, len(lines)) if test(lines[i])), len(lines))

    commit = first(0, lambda line: "wgmma.commit_group" in line)
    release = first(commit, lambda line: "mbarrier.arrive" in line and "expect_tx" not in line)
    if commit == len(lines) or first(commit, lambda line: "wgmma.wait_group" in line) > release:
        return ("the consumers release a slot (the plain mbarrier.arrive on empty) with no warpgroup.wait_group "
                "after their batch's commit: wgmma reads shared memory asynchronously, so TMA could refill the slot "
                "while the wgmmas still read it; release the slot of a batch that wait_group says is done")
    store = first(commit, lambda line: "st.global" in line)
    if not any(re.search(r"wgmma\.wait_group\S*\s+0\s*;", line) for line in lines[commit:store]):
        return ("the epilogue stores the accumulators with no warpgroup.wait_group(0) before it: the last batches of "
                "wgmma may still be writing them")
    return None


def ptx_case(dtype: str, arch: str) -> tuple[Any, ...]:
    """A PTX case: the arch, then CPU stand-ins of A (M, K), B (K, N) (in `dtype`) and C (M, N) (fp32)."""
    return L5.gemm_ptx_case(dtype, arch, True, batch=None)


def cases(seed: int, shapes: list[tuple[int, int, int]], dtype: str) -> list[tuple[Any, ...]]:
    """(A (M, K), B (K, N), poisoned fp32 C (M, N)) per (M, N, K): random normal inputs, rounded to `dtype` in the
    learner's process."""
    return L5.gemm_cases(seed, [(None, m, n, k) for m, n, k in shapes], dtype, True)


#: What a ring gets wrong when its products are: said after the GEMM judge's hint.
SUSPECTS = "; in a ring also: is a slot read before its k-tile landed, or refilled before its wgmmas were done?"


def gemm_result_hint(case: tuple[Any, ...], out: Any) -> str | None:
    """`out` (C after the launch) against A @ B in float64 (lesson 5's bounds, B (K, N)), or None."""
    return L5.gemm_hint(case, out, True, SUSPECTS)


def _judge_ptx(case: tuple[Any, ...], value: Any, outputs: list[Any]) -> str | None:
    return ptx_hint(value)


tma_ptx = Check("tma_ptx", "tma_host", lambda: [ptx_case(d, a) for d, a in PTX_CASES], _judge_ptx, via="ptx",
                options=(("vector", VECTOR),))
tma_gemm = Check("tma_gemm", "tma_host", lambda: cases(65, SHAPES, "float16"), L5.judge_gemm(True, SUSPECTS),
                 gpu=90, via="launch", options=(("vector", VECTOR),))
