"""Checks of lesson 6 (shared-memory layouts and async pipelines), the three CPU exercises: a swizzle that makes a
tile's 16-byte column reads and row stores conflict-free, the slot and parity bookkeeping of a full/empty mbarrier
ring, and the deepest pipeline that fits a shared-memory budget. (The two kernel exercises have their own modules:
``l06_cp_async`` and ``l06_tma_pipeline``.)

The judges use the course's references: :mod:`cutecourse.hw.banks` counts wavefronts, a small model of mbarrier
phases runs the learner's ring schedule, and :func:`cutecourse.hw.occupancy` says how many CTAs fit an SM. A judge
accepts any answer with the property asked for (any conflict-free swizzle, any schedule that neither deadlocks nor
races), and its hint names the access, the k-tile or the limit that fails, not the answer.
"""

from __future__ import annotations

import random
from typing import Any

from cutecourse import hw
from cutecourse.grading.checks import Check
from cutecourse.hw import banks
from cutecourse.layout import Layout, make_composed_layout
from cutecourse.layout.swizzle import Swizzle

# --------------------------------------------------------------------------- 6.1 a conflict-free swizzle

ROW_BYTES = (16, 32, 64, 128)  # a row of the tile: one to eight 16-byte chunks
ELEMENT_BITS = (8, 16, 32, 64)
VECTOR_BYTES = 16  # what one thread reads (ldmatrix's row, a 128-bit load) or writes (cp.async) at once


def tile_layout(row_elements: int, rows: int) -> Layout:
    """The plain tile: `rows` rows of `row_elements` elements, row-major (the K-major smem tile of a GEMM)."""
    return Layout((rows, row_elements), (row_elements, 1))


def column_reads(rows: int, row_elements: int, element_bits: int) -> list[tuple[str, list[list[tuple[int, int]]]]]:
    """Every 16-byte column read of an aligned group of 8 rows (one ldmatrix 8x8 matrix, or a quarter warp's 128-bit
    loads): for each group and each 16-byte chunk of a row, one phase."""
    vec = VECTOR_BYTES * 8 // element_bits
    out = []
    for first in range(0, rows, 8):
        for chunk in range(row_elements // vec):
            phase = [(r, chunk * vec + j) for r in range(first, first + 8) for j in range(vec)]
            out.append((f"the 16-byte column {chunk} of rows {first}..{first + 7}", [phase]))
    return out


def row_stores(rows: int, row_elements: int, element_bits: int) -> list[tuple[str, list[list[tuple[int, int]]]]]:
    """A warp's 16-byte stores sweeping the tile row by row (how cp.async fills it): 8 threads, 128 bytes, a phase."""
    vec = VECTOR_BYTES * 8 // element_bits
    elements = [divmod(i, row_elements) for i in range(rows * row_elements)]
    per_phase = 8 * vec
    return [(f"the 128-bit row-major stores of elements {p}..{p + per_phase - 1}", [elements[p:p + per_phase]])
            for p in range(0, len(elements), per_phase)]


def _as_swizzle(value: Any) -> tuple[Swizzle | None, str | None]:
    if not (isinstance(value, (tuple, list)) and len(value) == 3 and all(
            isinstance(x, int) and not isinstance(x, bool) for x in value)):
        return None, f"expected three ints (B, M, S), got {value!r}"
    try:
        return Swizzle(*value), None
    except ValueError as exc:
        return None, f"{tuple(value)} is not a swizzle: {exc}"


def swizzle_hint(row_elements: int, element_bits: int, value: Any, rows_list: tuple[int, ...] = (8, 16)) -> str | None:
    """Is S<B,M,S> (value) a swizzle of the `rows x row_elements` tile that keeps 16-byte vectors whole, stays in the
    tile, and makes every column read and every row store take the fewest wavefronts?"""
    sw, problem = _as_swizzle(value)
    if sw is None:
        return problem
    vec = VECTOR_BYTES * 8 // element_bits
    name = f"S<{sw.bits},{sw.base},{sw.shift}>"
    for v in range(0, 8 * row_elements, vec):  # a 16-byte vector must stay 16 contiguous, aligned bytes
        got = [sw(v + j) for j in range(vec)]
        if got != list(range(got[0], got[0] + vec)) or got[0] % vec:
            return (f"{name} splits the 16-byte vector at element {v} (its elements land at {got[:4]}...): a "
                    f"cp.async or ldmatrix row would no longer be one aligned 16-byte access; which bits must it "
                    f"leave alone for {element_bits}-bit elements?")
    for rows in rows_list:
        size = rows * row_elements
        outside = next((x for x in range(size) if sw(x) >= size), None)
        if outside is not None:
            return (f"{name} sends offset {outside} to {sw(outside)}, outside the {rows} x {row_elements} tile "
                    f"({size} elements): its bits reach beyond the tile's")
        layout = make_composed_layout(sw, 0, tile_layout(row_elements, rows))
        for what, phases in column_reads(rows, row_elements, element_bits) + row_stores(rows, row_elements,
                                                                                       element_bits):
            cost = banks.wavefronts(layout, element_bits, phases)
            ideal = banks.ideal_wavefronts(phases, element_bits)
            if cost > ideal:
                return (f"with {name} on a {rows} x {row_elements} tile of {element_bits}-bit elements, {what} "
                        f"take {cost} wavefronts (the fewest possible is {ideal}): some of those addresses still "
                        f"share a bank; which address bits tell the 128-byte lines apart, and which pick the 16-byte "
                        f"chunk?")
    return None


def _judge_swizzle(case: tuple[Any, ...], value: Any, outputs: list[Any]) -> str | None:
    return swizzle_hint(*case, value)


choose_swizzle = Check("choose_swizzle", "choose_swizzle", lambda: [(64, 16), (32, 16), (32, 32), (8, 16)],
                       _judge_swizzle)

# --------------------------------------------------------------------------- 6.2 the ring's slots and parities


def _parity_pair(value: Any, k_tiles: int, stages: int) -> list[tuple[int, int, int]] | str:
    if not isinstance(value, (list, tuple)) or len(value) != k_tiles:
        return f"expected a list of {k_tiles} (slot, full_parity, empty_parity) triples, one per k-tile; got {value!r}"
    out = []
    for kt, item in enumerate(value):
        if not (isinstance(item, (list, tuple)) and len(item) == 3 and all(
                isinstance(x, int) and not isinstance(x, bool) for x in item)):
            return f"k-tile {kt}: expected (slot, full_parity, empty_parity), three ints, got {item!r}"
        slot, full, empty = item
        if not 0 <= slot < stages:
            return f"k-tile {kt}: slot {slot} is not one of the ring's {stages} slots (0..{stages - 1})"
        if full not in (0, 1) or empty not in (0, 1):
            return f"k-tile {kt}: a parity is 0 or 1, got full_parity={full}, empty_parity={empty}"
        out.append((slot, full, empty))
    return out


def _passes(completed: int, parity: int) -> bool:
    """mbarrier.try_wait.parity: a barrier that has completed `completed` phases is in phase `completed`; waiting
    for `parity` returns once the phase of that parity before the current one is done, i.e. when the current
    phase's parity differs (a fresh barrier, in phase 0, lets a wait for parity 1 through at once)."""
    return completed % 2 != parity


def ring_hint(k_tiles: int, stages: int, value: Any) -> str | None:
    """Run the schedule on a model of the ring: a producer loads k-tile kt into its slot after waiting on that slot's
    empty barrier, the load completes the slot's full barrier, the consumer waits on full, computes, and completes
    empty. The scheduler lets each wait through as early as its parity allows and lands loads as late as it can,
    so a wait that passes too early is caught as a race and one that never passes as a deadlock."""
    schedule = _parity_pair(value, k_tiles, stages)
    if isinstance(schedule, str):
        return schedule
    full, empty = [0] * stages, [0] * stages  # completed phases of each slot's barriers
    holds: list[int | None] = [None] * stages  # the k-tile each slot holds (loaded or on its way)
    landed = [False] * stages
    produced = consumer = 0  # the k-tiles before `consumer` are consumed: the consumer takes them in order
    in_flight: list[int] = []  # slots whose loads were issued and have not landed
    while consumer < k_tiles:
        if produced < k_tiles:
            slot, _, wait_empty = schedule[produced]
            if _passes(empty[slot], wait_empty):
                previous = holds[slot]
                if previous is not None and previous >= consumer:
                    return (f"race: the producer's wait for k-tile {produced} (empty[{slot}], parity {wait_empty}) "
                            f"passes while slot {slot} still holds k-tile {previous}, which the consumer has not "
                            f"read: that load would overwrite it")
                holds[slot], landed[slot] = produced, False
                in_flight.append(slot)
                produced += 1
                continue
        slot, wait_full, _ = schedule[consumer]
        if _passes(full[slot], wait_full):
            if holds[slot] != consumer or not landed[slot]:
                what = ("its load has not landed" if holds[slot] == consumer else
                        f"the slot holds {'nothing yet' if holds[slot] is None else f'k-tile {holds[slot]}'}")
                return (f"race: the consumer's wait for k-tile {consumer} (full[{slot}], parity {wait_full}) passes "
                        f"while {what}: it would multiply the wrong data")
            empty[slot] += 1
            consumer += 1
            continue
        if in_flight:  # nothing can move until a load lands: land the oldest
            done = in_flight.pop(0)
            landed[done] = True
            full[done] += 1
            continue
        who = (f"the producer waits for k-tile {produced} on empty[{schedule[produced][0]}] (parity "
               f"{schedule[produced][2]}) and " if produced < k_tiles else "")
        return (f"deadlock: {who}the consumer waits for k-tile {consumer} on full[{slot}] (parity {wait_full}), "
                f"after full[{slot}] completed {full[slot]} phase(s) and empty[{slot}] {empty[slot]}; neither wait "
                f"can pass. Which phase has each barrier just finished when k-tile {consumer} comes round?")
    return None


def random_ring_case(rng: random.Random) -> tuple[int, int]:
    stages = rng.randint(1, 9)
    return rng.randint(1, 4 * stages + 3), stages


def _judge_ring(case: tuple[Any, ...], value: Any, outputs: list[Any]) -> str | None:
    return ring_hint(*case, value)


ring_schedule = Check("ring_schedule", "ring_schedule", lambda: [(4, 4), (10, 4), (7, 3), (2, 5)], _judge_ring)

# --------------------------------------------------------------------------- 6.3 the deepest pipeline that fits

ARCHS = ("sm_80", "sm_86", "sm_89", "sm_90")
HOPPER_RESERVE = 1024  # sm_90: the mbarriers and the 1024-byte alignment of the swizzled rings (cf. gemm07)


def reference_max_stages(tile_m: int, tile_n: int, tile_k: int, element_bits: int, arch: str,
                         epilogue_bytes: int = 0, ctas_per_sm: int = 1) -> int:
    """The most stages of A and B tiles such that a CTA's shared memory (stages, the epilogue's buffer, and on sm_90
    the barriers' kilobyte) fits one CTA's limit and `ctas_per_sm` such CTAs fit an SM; 0 if not even one stage."""
    limits = hw.ARCH_LIMITS[arch]
    stage = (tile_m + tile_n) * tile_k * element_bits // 8
    fixed = epilogue_bytes + (HOPPER_RESERVE if arch == "sm_90" else 0)
    best = 0
    for stages in range(1, limits.smem_per_block_max // stage + 1):
        smem = stages * stage + fixed
        if smem > limits.smem_per_block_max or hw.occupancy(128, 32, smem, limits).limits["smem"] < ctas_per_sm:
            break
        best = stages
    return best


def stages_hint(case: tuple[Any, ...], value: Any) -> str | None:
    want = reference_max_stages(*case)
    if isinstance(value, bool) or not isinstance(value, int):
        return f"expected an int (a number of stages), got {value!r}"
    if value == want:
        return None
    tile_m, tile_n, tile_k, bits, arch, epilogue, ctas = case
    if value > want:
        return (f"{value} stages do not fit: {ctas} CTA(s) of that size exceed what a CTA or an {arch} SM may "
                f"use; count every byte a CTA holds, and what the runtime keeps per CTA, in whole allocation units")
    return (f"{value} stages leave room for more: {value + 1} would still fit {ctas} CTA(s) per SM on {arch}; is a "
            f"reserve counted twice, or on an arch that does not need it?")


def random_stages_case(rng: random.Random) -> tuple[Any, ...]:
    arch = rng.choice(ARCHS)
    bits = rng.choice((8, 16, 32))
    tile_k = rng.choice((64, 128)) * 8 // bits  # a k-tile row of 64 or 128 bytes
    return (rng.choice((64, 128, 256)), rng.choice((64, 128, 192, 256)), tile_k, bits, arch,
            rng.choice((0, 0, 8192, 16384 + 128, 32768)), rng.choice((1, 1, 2, 3)))


def _judge_stages(case: tuple[Any, ...], value: Any, outputs: list[Any]) -> str | None:
    return stages_hint(case, value)


max_stages = Check("max_stages", "max_stages", lambda: [
    (128, 128, 64, 16, "sm_90", 0, 1), (128, 256, 64, 16, "sm_90", 32768, 1), (128, 128, 32, 16, "sm_80", 0, 2),
    (64, 64, 64, 16, "sm_86", 0, 3)], _judge_stages)
