"""Checks of lesson 6's exercise 6.7: the TMA-store epilogue of a wgmma GEMM whose 128 x 128 fp32 tile of C leaves in
two slabs of 64 rows through one shared-memory buffer (one warpgroup, 128 threads).

What it judges, in the PTX (on any machine with the DSL): C leaves through TMA stores only (no ``st.global``), in
``SLABS = 2`` bulk groups, and each slab in the order the two proxies need: its ``st.shared`` writes, then
``fence.proxy.async`` (the generic proxy's writes made visible to the async proxy), then ``bar.sync`` (every thread's
writes before the one thread's store), then the bulk store and ``cp.async.bulk.commit_group``; before the next slab's
writes a ``cp.async.bulk.wait_group.read 0`` (the one buffer has been read) and a ``bar.sync``; after the last store a
``wait_group.read`` (the CTA's shared memory outlives the store's reads). On a Hopper GPU, real GEMMs (``C = A @ B``,
A (M, K) row-major, B (K, N) row-major, fp16 or bf16, a NaN-poisoned fp32 C) against the float64 product: a slab
overwritten under its store, or stored before its writes are visible, shows as wrong or missing values of C. The
hidden tests (tests/hidden/test_06_smem_pipelines.py) use the same hints on shapes the notebook never shows.
"""

from __future__ import annotations

from typing import Any

from cutecourse.grading.checks import l05_tiled_mma as L5
from cutecourse.grading.checks.l05_tiled_mma import VECTOR
from cutecourse.grading.checks.l06_tma_pipeline import PTX_CASES, cases, ptx_case, threads_hint

__all__ = ["VECTOR", "PTX_CASES", "ptx_case"]

#: The exercise's CTA (one warpgroup), the slabs C's tile leaves in, and its k-tile.
STORE_THREADS = 128
SLABS = 2
SLAB_M = 64
STORE_TILE_K = 64
#: (M, N, K) of the GPU check: one tile; ragged M, N and K below one tile (the store clips them); M inside the
#: first slab only; several tiles each way.
SHAPES = [(128, 128, 64), (100, 72, 40), (7, 8, 8), (60, 264, 136), (257, 264, 264)]

_STORE = "cp.async.bulk.tensor"


def _is_store(line: str) -> bool:
    return _STORE in line and ".global.shared" in line


def _is_read_wait(line: str, group: str | None = None) -> bool:
    words = line.split()
    if not words or not words[0].startswith("cp.async.bulk.wait_group.read"):
        return False
    return group is None or words[-1].rstrip(";") == group


def ptx_hint(code: Any) -> str | None:
    """What the PTX of a 6.7 answer lacks, or None (see the module's docstring)."""
    from cutecourse.kernels import ptx

    code = L5.ptx_text(code)
    if code is None:
        return "expected the PTX text (a str with an .entry)"
    if not ptx.count(code, "wgmma.mma_async"):
        return "no wgmma.mma_async in the PTX: keep the given mainloop"
    hint = threads_hint(code, STORE_THREADS, f"one warpgroup of {STORE_THREADS} threads. Launch with "
                        f"block=(STORE_THREADS, 1, 1)")
    if hint:
        return hint
    if ptx.count(code, "st.global"):
        return ("the PTX writes C with st.global: in this exercise C leaves shared memory through TMA stores only "
                "(cute.copy with tma_atom_c from sC)")
    lines = code.splitlines()
    stores = [i for i, line in enumerate(lines) if _is_store(line)]
    if not stores:
        return ("no TMA store (cp.async.bulk.tensor ... .global.shared) in the PTX: each slab goes from sC to C with "
                "cute.copy(tma_atom_c, ...)")
    commits = [i for i, line in enumerate(lines) if "cp.async.bulk.commit_group" in line]
    if len(commits) != SLABS:
        return (f"the PTX commits {len(commits)} bulk group{'s' if len(commits) != 1 else ''} "
                f"(cp.async.bulk.commit_group); the tile leaves in SLABS = {SLABS} slabs through one buffer, each "
                f"slab's store its own group")
    start = 0
    for slab, commit in enumerate(commits):
        first_store = next((i for i in stores if start <= i < commit), None)
        if first_store is None:
            return f"no TMA store before the commit of slab {slab}: a bulk group holds the stores issued since the last"
        writes = [i for i in range(start, first_store) if lines[i].lstrip().startswith("st.shared")]
        if not writes:
            return (f"slab {slab} is stored with no st.shared before it: the slab's accumulators must be written "
                    f"into sC first")
        fences = [i for i in range(writes[-1], first_store) if "fence.proxy.async" in lines[i]]
        if not fences:
            return (f"slab {slab}: no fence.proxy.async between the threads' st.shared into sC and the TMA store: "
                    f"the store reads through the async proxy, which does not see the generic proxy's writes "
                    f"without that fence")
        if not any("bar.sync" in lines[i] for i in range(fences[0], first_store)):
            return (f"slab {slab}: no bar.sync between the proxy fence and the TMA store: one thread stores the "
                    f"slab, and every thread's writes must come before it")
        start = commit
        if slab + 1 < len(commits):
            next_write = next((i for i in range(commit, commits[slab + 1])
                               if lines[i].lstrip().startswith("st.shared")), commits[slab + 1])
            between = range(commit, next_write)
            read_wait = next((i for i in between if _is_read_wait(lines[i])), None)
            if read_wait is None or not _is_read_wait(lines[read_wait], "0"):
                return (f"slab {slab + 1} overwrites sC while slab {slab}'s TMA store may still read it: the one "
                        f"buffer may be rewritten only after a cp.async.bulk.wait_group.read that leaves none of "
                        f"its stores pending")
            if not any("bar.sync" in lines[i] for i in range(read_wait, next_write)):
                return (f"slab {slab + 1}: the thread that waited for the store is alone in knowing sC is free; "
                        f"a bar.sync after its wait_group.read must hold the others back")
    if not any(_is_read_wait(line) for line in lines[commits[-1]:]):
        return ("no cp.async.bulk.wait_group.read after the last store: the CTA may exit, and its shared memory go, "
                "while TMA still reads the last slab")
    return None


#: What a TMA-store epilogue gets wrong when C is: said after the GEMM judge's hint.
SUSPECTS = ("; in a TMA-store epilogue also: is each slab written, fenced and synchronised before its store, and is "
            "the buffer free again before the next slab overwrites it?")


gemm_result_hint = L5.result_hint(True, SUSPECTS)
tma_store_ptx, tma_store_gemm = L5.kernel_checks("tma_store", "store_host", ptx_hint,
                                                 lambda: [ptx_case(d, a) for d, a in PTX_CASES],
                                                 lambda: cases(67, SHAPES, "float16"), True, SUSPECTS, gpu=90)
