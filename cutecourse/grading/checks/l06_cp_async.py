"""Checks of exercise 6.4 (lesson 6): the cp.async multistage mainloop of a Tensor Core GEMM, a ring of `STAGES`
shared-memory K tiles kept STAGES - 1 deep in flight, one wait and one barrier per K tile. Its PTX on any machine;
real GEMMs on a GPU.

The PTX check wants what the pipeline is made of: m16n8k16 MMAs fed by ldmatrix.x4, 16-byte ``cp.async.cg`` copies
in commit groups (the prologue's and one per K tile), a single wait, inside the K loop and before the barrier that
comes before the loop's refill, no ``ld.global`` (A and B reach shared memory by cp.async only). The GEMMs are judged as
lesson 5's (l05's `gemm_cases` and `gemm_hint`: float64 products of the inputs as the learner's process held them);
the hidden tests (tests/hidden/test_06_smem_pipelines.py) use the same generators on shapes the notebook never
shows, chosen so that the pipeline's bookkeeping shows: K below one tile, K over 2·STAGES tiles, ragged tails.
"""

from __future__ import annotations

import random
import re
from typing import Any

from cutecourse.grading.checks import l05_tiled_mma as L5

TILE_M = 64  # the answer cell's CTA tile
TILE_N = 64
TILE_K = 64
STAGES = 3  # the answer cell's ring of K tiles
VECTOR = L5.VECTOR  # 16-bit elements per 16-byte cp.async: N and K are multiples of it
PTX_CASES = L5.PTX_GRID  # the hidden PTX test's; the check compiles L5.CHECK_PTX_CASES

_WAIT = re.compile(r"^\s*cp\.async\.wait_group\s+(\d+)\s*;", re.MULTILINE)
#: A global -> shared cp.async and its cache level and size: ``cp.async.cg.shared.global [dst], [src], 16, src_size;``
_CP_ASYNC = re.compile(r"^\s*(?:@!?%\w+\s+)?cp\.async\.(ca|cg)\.shared\.global\S*\s+\[[^\]]*\]\s*,\s*\[[^\]]*\]\s*,"
                       r"\s*(\d+)", re.MULTILINE)


def ptx_hint(code: Any) -> str | None:
    """What is missing from, or wrong in, the PTX of a multistage mainloop; None if it has what the exercise asks."""
    from cutecourse.kernels import ptx

    code = L5.ptx_text(code)
    if code is None:
        return "expected the PTX text (a str with an .entry)"
    if ptx.count(code, "ld.global"):
        return (f"the PTX has {ptx.count(code, 'ld.global')} ld.global: A and B must reach shared memory by cp.async "
                f"alone (copy_k_tile with the CopyG2SOp tiled copy), not through registers")
    started, copies = ptx.count(code, "cp.async.ca") + ptx.count(code, "cp.async.cg"), _CP_ASYNC.findall(code)
    if not started:
        return ("no cp.async in the PTX: the prologue and the mainloop start each K tile's copies with copy_k_tile "
                "(global -> shared, no registers in between)")
    if len(copies) != started or any(cache != "cg" or size != "16" for cache, size in copies):
        return ("every cp.async should be cp.async.cg.shared.global of 16 bytes (CopyG2SOp with cache GLOBAL, "
                "num_bits_per_copy=128): one vector of 8 16-bit elements, cached in L2 only")
    commits = ptx.count(code, "cp.async.commit_group")
    if commits < 2:
        return (f"the PTX has {commits} cp.async.commit_group: cp_async_wait_group counts commit groups, so the "
                f"prologue commits one group per K tile it starts (even an empty one past the last tile) and the "
                f"mainloop one per K tile it refills")
    waits = [int(n) for n in _WAIT.findall(code)]
    if not waits and not ptx.count(code, "cp.async.wait_all"):
        return ("no cp.async.wait_group in the PTX: nothing waits for the copies, so ldmatrix can read a slot "
                "before its K tile has landed (a barrier orders threads; it does not wait for cp.async)")
    if any(n > STAGES - 2 for n in waits):
        return (f"cp.async.wait_group {max(waits)} leaves {max(waits)} commit groups in flight; with "
                f"STAGES = {STAGES} and one group per K tile, the group of the tile about to be read is among them")
    ones = waits.count(STAGES - 2)
    if not ones:
        return ("the mainloop waits with cp.async.wait_group 0 (or wait_all): for every copy in flight, also those "
                "of the tiles needed only later, so only the copy issued after the wait overlaps the MMAs and the "
                "ring works as if it had a stage fewer; wait for the group of the tile about to be read only")
    every = len(waits) + ptx.count(code, "cp.async.wait_all")
    if every > 1:
        return (f"the PTX has {every} cp.async waits; this exercise waits once per K tile, at its top, before the "
                f"barrier, and nowhere else: one wait in a plain range(k_tiles) loop (a second wait, before the loop "
                f"or inside the tile, is for a register double buffer across tiles, as in the package's step 4; an "
                f"unrolled loop repeats the wait)")
    problem = _placement_hint(code)
    if problem:
        return problem
    k16, other = ptx.count(code, "mma.sync.aligned.m16n8k16"), ptx.count(code, "mma.sync") - ptx.count(
        code, "mma.sync.aligned.m16n8k16")
    if not k16 or other:
        return (f"the PTX has {k16} mma.sync.m16n8k16 and {other} other mma.sync: each k-block of every K tile "
                f"runs cute.gemm(tiled_mma, ...) on the registers ldmatrix filled")
    x4, ldsm = ptx.count(code, "ldmatrix.sync.aligned.m8n8.x4.shared"), ptx.count(code, "ldmatrix")
    if not x4 or ldsm != x4:
        return (f"the PTX has {x4} ldmatrix.x4 (no .trans) among {ldsm} ldmatrix: each k-block's A and B reach "
                f"the registers through the given tiled copies tiled_copy_s2r_a/b (cute.copy of tCsA/tCsB's slot)")
    return L5.common_ptx_hint(code)


_LABEL = re.compile(r"^(\$\w+):", re.MULTILINE)


def _placement_hint(code: str) -> str | None:
    """The wait must sit in the K loop (between a label and a branch back to it), and a barrier must come between
    it and the next copy the loop starts (the refill of the slot the previous tile used)."""
    lines = code.splitlines()
    at = next(i for i, line in enumerate(lines) if "cp.async.wait_" in line)
    labels = {m.group(1): i for i, line in enumerate(lines[:at]) for m in [_LABEL.match(line.strip())] if m}
    looped = any(re.search(rf"\bbra(?:\.uni)?\s+{re.escape(label)}\s*;", line)
                 for label in labels for line in lines[at + 1:])
    if not looped:
        return ("the wait sits outside the K loop: each K tile must wait for its own group at the top of its "
                "iteration, or the tiles after the first are read before they land")
    nxt = next((i for i in range(at + 1, len(lines)) if "cp.async.cg" in lines[i]), len(lines))
    if not any("bar.sync" in line or "barrier.sync" in line for line in lines[at + 1:nxt]):
        return ("the loop starts its next copies before the barrier after its wait: a fast warp then refills the slot "
                "the previous K tile used while a slow warp may still be reading it; the barrier comes first")
    return None


def ptx_case(dtype: str, arch: str) -> tuple[Any, ...]:
    """A PTX case: the arch, then CPU stand-ins of A (M, K), B (N, K) in `dtype` and C (M, N) in fp32."""
    return L5.gemm_ptx_case(dtype, arch, False)


def cases(seed: int, shapes: list[tuple[int, int, int]], dtype: str) -> list[tuple[Any, ...]]:
    """(A, B, poisoned C) per (M, N, K): random normal A (M, K) and B (N, K) in `dtype`, C (M, N) fp32 NaN."""
    return L5.gemm_cases(seed, [(1, m, n, k) for m, n, k in shapes], dtype, False)


#: What a pipeline gets wrong when its products are: said after the GEMM judge's hint.
SUSPECTS = ("; in a pipeline: is each K tile read from the slot it was copied into, after its group landed, and does "
            "every K tile get copied once?")


gemm_result_hint = L5.result_hint(False, SUSPECTS)


def random_shapes(rng: random.Random, count: int) -> list[tuple[int, int, int]]:
    """(M, N, K): M any, N and K multiples of 8 (the launcher's promise) and mostly not of the tile."""
    return [(rng.randint(1, 300), VECTOR * rng.randint(1, 40), VECTOR * rng.randint(1, 100)) for _ in range(count)]


_rng = random.Random(604)
#: The hidden tests' shapes (M, N, K). K = 8 and 24: below one K tile (the prologue's copies only, the second
#: group empty); K = 64: exactly one tile; K of exactly STAGES - 1 and STAGES tiles (the first refill, the first
#: wrap); K over 2 * STAGES tiles with a ragged tail (the ring wraps twice); single rows and columns of tiles; then
#: random ones.
SHAPES = [(1, 8, 8), (65, 72, 24), (64, 64, 64), (65, 72, (STAGES - 1) * TILE_K), (33, 40, STAGES * TILE_K - 8),
          (127, 136, 2 * STAGES * TILE_K + 40), (3, 264, 16), (200, 8, 9 * TILE_K + 8),
          (130, 200, 520)] + random_shapes(_rng, 5)
#: The notebook's check: fewer and smaller, the same kinds.
CHECK_SHAPES = [(64, 64, 32), (100, 72, 40), (7, 8, 8), (130, 136, 264)]


cp_async_ptx, cp_async_gemm = L5.kernel_checks("cp_async", "multistage_host", ptx_hint,
                                               lambda: [ptx_case(d, a) for d, a in L5.CHECK_PTX_CASES],
                                               lambda: cases(607, CHECK_SHAPES, "float16"), False, SUSPECTS, gpu=80)
