"""Checks of lesson 6 (shared-memory layouts and async pipelines), the three CPU exercises: a swizzle that makes a
tile's 16-byte column reads and row stores conflict-free, the slots, parities and releases of a persistent CTA's
full/empty mbarrier ring, and the deepest pipeline that fits a shared-memory budget. (The kernel exercises have their
own modules.)

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

# --------------------------------------------------------------------------- 6.2 a persistent CTA's ring


def _tile_plans(value: Any, tile_k_tiles: list[int], stages: int) -> list[tuple[list[tuple[Any, ...]], Any]] | str:
    """The learner's plan checked for form: per tile, (its k-tiles' (slot, full_parity, empty_parity, release), its
    drain), or a hint saying what is malformed."""
    def is_slot(x: Any) -> bool:
        return isinstance(x, int) and not isinstance(x, bool) and 0 <= x < stages

    if not isinstance(value, (list, tuple)) or len(value) != len(tile_k_tiles):
        return (f"expected a list of {len(tile_k_tiles)} plans, one per tile, each a dict with 'k_tiles' and "
                f"'drain'; got {value!r}"[:300])
    plans = []
    for t, (plan, k) in enumerate(zip(value, tile_k_tiles)):
        if not isinstance(plan, dict) or set(plan) != {"k_tiles", "drain"}:
            return f"tile {t}: expected a dict with the keys 'k_tiles' and 'drain', got {plan!r}"[:300]
        steps = plan["k_tiles"]
        if not isinstance(steps, (list, tuple)) or len(steps) != k:
            return f"tile {t} has {k} k-tile(s): expected its 'k_tiles' to list {k} tuples, got {steps!r}"[:300]
        for j, item in enumerate(steps):
            if not (isinstance(item, (list, tuple)) and len(item) == 4):
                return f"tile {t}, k-tile {j}: expected (slot, full_parity, empty_parity, release), got {item!r}"
            slot, full, empty, release = item
            if not is_slot(slot):
                return f"tile {t}, k-tile {j}: slot {slot!r} is not one of the ring's {stages} slots (0..{stages - 1})"
            if full not in (0, 1) or empty not in (0, 1) or isinstance(full, bool) or isinstance(empty, bool):
                return f"tile {t}, k-tile {j}: a parity is 0 or 1, got full_parity={full!r}, empty_parity={empty!r}"
            if not (release is None or is_slot(release)):
                return f"tile {t}, k-tile {j}: release is a slot (0..{stages - 1}) or None, got {release!r}"
        if not (plan["drain"] is None or is_slot(plan["drain"])):
            return f"tile {t}: drain is a slot (0..{stages - 1}) or None, got {plan['drain']!r}"
        plans.append(([tuple(step) for step in steps], plan["drain"]))
    return plans


def _passes(completed: int, parity: int) -> bool:
    """mbarrier.try_wait.parity: a barrier that has completed `completed` phases is in phase `completed`; waiting
    for `parity` returns once the phase of that parity before the current one is done, i.e. when the current
    phase's parity differs (a fresh barrier, in phase 0, lets a wait for parity 1 through at once)."""
    return completed % 2 != parity


def ring_hint(tile_k_tiles: list[int], stages: int, value: Any) -> str | None:
    """Run the plan on a model of a persistent CTA's ring, initialised once for all its tiles. The producer loads
    every tile's k-tiles in order, each into its slot after waiting on that slot's `empty`; the load completes the
    slot's `full`. The consumer, per k-tile, waits on `full`, starts the k-tile's MMA batch, learns that every batch
    but that one has finished (one batch in flight), and releases the slot it names (one arrival on its `empty`); at
    the end of a tile it waits for every batch and releases the slot of the tile's `drain`, then runs the epilogue.
    The producer's tail waits for every slot's last release. The scheduler lets each wait through as early as its
    parity allows and lands loads as late as it can, so a wait that passes too early is caught as a race, one that
    never passes as a deadlock, and a release of a slot still being read as a race."""
    plans = _tile_plans(value, tile_k_tiles, stages)
    if isinstance(plans, str):
        return plans
    order = [(t, j) for t, k in enumerate(tile_k_tiles) for j in range(k)]  # the producer's loads, in order
    full, empty = [0] * stages, [0] * stages  # completed phases of each slot's barriers
    holds: list[int | None] = [None] * stages  # the load (index into `order`) each slot holds or receives
    landed = [False] * stages
    released: set[int] = set()  # loads whose slot the consumer has handed back
    in_flight: list[int] = []  # slots whose loads were issued and have not landed
    # The consumer's actions in program order: per k-tile ("wait", its load) then ("release", slot, who), and
    # ("drain", slot, who) at each tile's end.
    actions: list[tuple[str, int, str]] = []
    loads = iter(range(len(order)))
    for t, (steps, drain) in enumerate(plans):
        for j, (_, _, _, release) in enumerate(steps):
            actions.append(("wait", next(loads), ""))
            if release is not None:
                actions.append(("release", release, f"tile {t}, k-tile {j}"))
        if drain is not None:
            actions.append(("drain", drain, f"tile {t}'s drain"))
    flat = [step for steps, _ in plans for step in steps]
    started: list[int] = []  # loads whose MMA batch the consumer has started
    produced = consumed = 0

    def where(i: int) -> str:
        return f"tile {order[i][0]}, k-tile {order[i][1]}"

    def hand_back(slot: int, finished: list[int], what: str) -> str | None:
        held = holds[slot]
        if held is None or held not in started:
            return (f"{what} releases slot {slot}, which holds no k-tile the consumer has read "
                    f"({'nothing yet' if held is None else where(held) + ', not yet read'}): the producer may "
                    f"overwrite a slot before its data is used")
        if held in released:
            return (f"{what} releases slot {slot} a second time for {where(held)}: each use of a slot is released "
                    f"once, or its empty barrier runs a phase ahead and the producer overwrites a slot still in use")
        if held not in finished:
            return (f"race: {what} releases slot {slot} while the MMA batch of {where(held)}, which reads it, may "
                    f"still be running: only batches before the one in flight have finished")
        released.add(held)
        empty[slot] += 1
        return None

    while consumed < len(actions):
        if produced < len(order):
            slot, _, wait_empty, _ = flat[produced]
            if _passes(empty[slot], wait_empty):
                previous = holds[slot]
                if previous is not None and previous not in released:
                    return (f"race: the producer's wait for {where(produced)} (empty[{slot}], parity {wait_empty}) "
                            f"passes while slot {slot} still holds {where(previous)}, which the consumer has not "
                            f"released: that load would overwrite it")
                holds[slot], landed[slot] = produced, False
                in_flight.append(slot)
                produced += 1
                continue
        kind, arg, who = actions[consumed]
        if kind == "wait":
            i = arg
            slot, wait_full, _, _ = flat[i]
            if _passes(full[slot], wait_full):
                if holds[slot] != i or not landed[slot]:
                    what = ("its load has not landed" if holds[slot] == i else
                            f"the slot holds {'nothing yet' if holds[slot] is None else where(holds[slot])}")
                    return (f"race: the consumer's wait for {where(i)} (full[{slot}], parity {wait_full}) passes "
                            f"while {what}: it would multiply the wrong data")
                started.append(i)
                consumed += 1
                continue
        else:  # a release finds every batch but the one in flight finished; a drain, every batch
            problem = hand_back(arg, started[:-1] if kind == "release" else started, who)
            if problem:
                return problem
            consumed += 1
            continue
        if in_flight:  # nothing can move until a load lands: land the oldest
            done = in_flight.pop(0)
            landed[done] = True
            full[done] += 1
            continue
        blocked = flat[produced][0] if produced < len(order) else None
        held = holds[blocked] if blocked is not None else None
        if held is not None and held in started and held not in released:
            return (f"deadlock: the producer waits for {where(produced)} on empty[{blocked}], and slot {blocked} still "
                    f"holds {where(held)}, read and never released; the consumer waits for {where(i)} on "
                    f"full[{slot}]. When is each slot handed back, the last of a tile's included?")
        who = (f"the producer waits for {where(produced)} on empty[{blocked}] (parity {flat[produced][2]}) and "
               if blocked is not None else "")
        return (f"deadlock: {who}the consumer waits for {where(i)} on full[{slot}] (parity {wait_full}), after "
                f"full[{slot}] completed {full[slot]} phase(s) and empty[{slot}] {empty[slot]}; neither wait can "
                f"pass. How many times has the ring wrapped before this k-tile, counting the tiles before it?")
    unreleased = [i for i in started if i not in released]
    if unreleased:
        slot = flat[unreleased[0]][0]
        return (f"deadlock: {len(unreleased)} k-tile(s) are never released, the first {where(unreleased[0])} in slot "
                f"{slot}: the producer's tail (and, in a longer run, its next load into the slot) waits for that "
                f"release forever")
    return None


def random_ring_case(rng: random.Random) -> tuple[list[int], int]:
    """A persistent CTA's tiles (1 to 6, some of no k-tiles) and a ring of 2 to 8 slots."""
    stages = rng.randint(2, 8)
    return [rng.choice([0, 1, rng.randint(1, 3 * stages)]) for _ in range(rng.randint(1, 6))], stages


def _judge_ring(case: tuple[Any, ...], value: Any, outputs: list[Any]) -> str | None:
    return ring_hint(*case, value)


ring_schedule = Check("ring_schedule", "ring_schedule",
                      lambda: [([4], 4), ([3, 5, 2], 2), ([7, 0, 6], 3), ([1, 1, 1, 1, 1], 3)], _judge_ring)

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
