"""Checks of lesson 4 (tiled copy, vectorization and predication): which thread holds an element of a 128-bit copy's
thread-value layout, a predicated, vectorized fp32 -> 16-bit cast kernel (its PTX on a CPU, its results on a GPU),
choosing the thread/value split of a tile, and the 32-byte sectors a warp's copy touches.

The owners and the sectors come from the eager algebra's TV layouts (:func:`cutecourse.layout.make_layout_tv`); the
split is judged by its properties (several answers are right); the hidden tests (tests/hidden/test_04_tiled_copy.py)
use the same references and generators on random inputs.
"""

from __future__ import annotations

import random
import re
from typing import Any

import cutecourse.layout as eager
from cutecourse.grading import wire
from cutecourse.grading.checks import Check, exact_hint, input_of, rounded

# --------------------------------------------------------------------------- 4.1 who holds an element of a TV layout


def _tv(dtype_bits: int, thr_shape: tuple[int, int], thr_order: tuple[int, int], values_m: int):
    thr = eager.make_ordered_layout(thr_shape, order=thr_order)
    val = eager.make_ordered_layout((values_m, 128 // dtype_bits), order=(1, 0))
    return eager.make_layout_tv(thr, val)


def reference_owner(dtype_bits: int, thr_shape: tuple[int, int], thr_order: tuple[int, int], values_m: int,
                    m: int, n: int) -> tuple[int, int]:
    """``(thread, value)`` whose ``layout_tv`` maps to element (m, n) of the tile, searched in the eager algebra's
    ``make_layout_tv(thr, val)`` (threads `thr_shape` ordered by `thr_order`, values ``(values_m, 128 // bits)``
    row-major)."""
    tiler, tv = _tv(dtype_bits, thr_shape, thr_order, values_m)
    target = m + n * tiler[0]  # layout_tv's codomain: column-major offsets in the tile
    threads, values = eager.size(eager.get(tv, 0)), eager.size(eager.get(tv, 1))
    return next((t, v) for v in range(values) for t in range(threads) if tv((t, v)) == target)


def _owner_or_none(*case: Any) -> tuple[int, int] | None:
    try:
        return reference_owner(*case)
    except StopIteration:  # (m, n) lies outside that tile
        return None


def random_owner_case(rng: random.Random) -> tuple[int, tuple[int, int], tuple[int, int], int, int, int]:
    bits = rng.choice([8, 16, 32, 64])
    thr_shape = (rng.randint(1, 8), rng.choice([1, 2, 4, 8, 16, 32]))
    order, values_m = rng.choice([(1, 0), (0, 1)]), rng.randint(1, 4)
    m, n = rng.randrange(thr_shape[0] * values_m), rng.randrange(thr_shape[1] * (128 // bits))
    return bits, thr_shape, order, values_m, m, n


def _owner_cases() -> list[tuple[Any, ...]]:
    return [(32, (8, 32), (1, 0), 4, 9, 70), (16, (2, 4), (1, 0), 1, 1, 17), (32, (8, 32), (0, 1), 1, 6, 101),
            (8, (4, 8), (1, 0), 2, 7, 100), (64, (3, 16), (0, 1), 3, 8, 31), (16, (16, 16), (0, 1), 2, 31, 127),
            (32, (1, 1), (1, 0), 1, 0, 3)]


def owner_hint(case: tuple[Any, ...], value: Any) -> str | None:
    bits, thr_shape, order, values_m, m, n = case
    if not (isinstance(value, (tuple, list)) and len(value) == 2
            and all(isinstance(x, int) and not isinstance(x, bool) for x in value)):
        return f"expected a pair of ints (thread, value), got {value!r}"
    want = reference_owner(*case)
    got = tuple(value)
    if got == want:
        return None
    if got == want[::-1]:
        return f"got {got}: the pair is (thread, value), in that order"
    threads = thr_shape[0] * thr_shape[1]
    if not (0 <= got[0] < threads and 0 <= got[1] < values_m * 128 // bits):
        return (f"got {got}: the tile has {threads} threads of {values_m * 128 // bits} values each; a thread's row of "
                f"values is one 128-bit vector, 128 // {bits} = {128 // bits} elements")
    for other in (8, 16, 32, 64, 128):  # the owner if a vector held 128 // other elements instead
        if other != bits and got == _owner_or_none(other, thr_shape, order, values_m, m, n):
            return (f"got {got}: a thread's row of values is one 128-bit vector, 128 // {bits} = {128 // bits} "
                    f"elements of {bits} bits")
    if got[1] != want[1]:
        return (f"the value index {got[1]} is wrong: a thread's values are numbered by its row-major "
                f"({values_m}, {128 // bits}) value layout, one 128-bit vector of {128 // bits} elements per row")
    major = "row-major" if order == (1, 0) else "column-major"
    return (f"the thread index {got[0]} is wrong: find the thread's (row, column) in the {thr_shape} thread grid, "
            f"then its index in the {major} thread layout (thr_order={order})")


def _judge_owner(case: tuple[Any, ...], value: Any, outputs: list[Any]) -> str | None:
    return owner_hint(case, value)


tv_owner = Check("tv_owner", "tv_owner", _owner_cases, _judge_owner)

# --------------------------------------------------------------------------- 4.2 the predicated, vectorized cast

#: (output dtype, arch) of the cast's PTX checks: both 16-bit types, both archs.
CAST_PTX_CASES = [("bfloat16", "sm_80"), ("float16", "sm_80"), ("bfloat16", "sm_90a")]
VECTOR = 4  # fp32 values per 128-bit load


def cast_ptx_hint(code: Any) -> str | None:
    """What is wrong with the cast's PTX (None if nothing): per thread one 128-bit load of 4 floats, a conversion to
    16 bits, one 64-bit store of 4 halves, both behind a predicate; no scalar global accesses."""
    from cutecourse.kernels import ptx

    if not isinstance(code, str) or ".entry" not in code:
        return f"expected the PTX text (a str with an .entry), got {type(code).__name__}"
    loads, stores = ptx.count(code, "ld.global.v4"), ptx.count(code, "st.global.v2")
    scalar = ptx.count(code, "ld.global.b32") + ptx.count(code, "ld.global.f32") + ptx.count(code, "st.global.b16")
    if scalar:
        return ("the PTX moves single elements (ld.global.b32 / st.global.b16): build both tiled copies on atoms of "
                "4 elements (num_bits_per_copy = 4 x the element's width)")
    if loads != 1 or stores != 1:
        return (f"the PTX has {loads} ld.global.v4 and {stores} st.global.v2; each thread should load one vector of 4 "
                f"floats (128 bits) and store one of 4 halves (64 bits)")
    if not re.search(r"\bcvt\.rn\.(bf16|f16)", code):
        return "no conversion to 16 bits in the PTX: convert the register fragment (.load().to(...)) before storing"
    if ptx.guarded(code) < loads + stores:
        return ("the vector load or store is not behind a predicate: on a matrix whose sides are not multiples of the "
                "tile, the edge tiles' threads would touch memory outside it (one predicate per vector)")
    return None


def cast_ptx_case(dtype: str, arch: str) -> tuple[Any, ...]:
    """A PTX case: the arch, then stand-ins of A (64, 96) fp32 and B in `dtype`, on the CPU."""
    import numpy as np

    zeros = np.zeros((64, 96), dtype=np.float32)
    return (arch, wire.tensor(zeros, "float32", "cpu"), wire.tensor(zeros, dtype, "cpu"))


def _judge_ptx(case: tuple[Any, ...], value: Any, outputs: list[Any]) -> str | None:
    return cast_ptx_hint(value)


cast_ptx = Check("cast_ptx", "cast_host", lambda: [cast_ptx_case(d, a) for d, a in CAST_PTX_CASES], _judge_ptx,
                 via="ptx", options=(("vector", VECTOR),))


def cast_cases(seed: int, shapes: list[tuple[tuple[int, int], str]]) -> list[tuple[Any, ...]]:
    """Random fp32 (m, n) inputs and NaN-poisoned (m, n) outputs of the given 16-bit dtypes (n a multiple of 4)."""
    import numpy as np

    rng = np.random.default_rng(seed)
    return [(wire.tensor(rng.standard_normal(shape).astype(np.float32), "float32"), wire.poisoned(shape, dtype))
            for shape, dtype in shapes]


def cast_hint(case: tuple[Any, ...], out: Any) -> str | None:
    """`out` against torch's cast of the input to the output's dtype: exact, NaN counting as never written."""
    return exact_hint(rounded(input_of(case), case[1]["$poisoned"]["dtype"]), out)


def _copy_cases() -> list[tuple[Any, ...]]:
    return cast_cases(402, [((8, 128), "bfloat16"), ((64, 256), "float16"), ((37, 52), "bfloat16"),
                            ((100, 8), "float16"), ((129, 68), "bfloat16")])


def _judge_copy(case: tuple[Any, ...], value: Any, outputs: list[Any]) -> str | None:
    (out,) = outputs
    return cast_hint(case, out)


cast_copy = Check("cast_copy", "cast_host", _copy_cases, _judge_copy, gpu=80, via="launch",
                  options=(("vector", VECTOR),))

# --------------------------------------------------------------------------- 4.3 the thread/value split of a tile


def split_hint(tile_m: int, tile_n: int, dtype_bits: int, threads: int, value: Any) -> str | None:
    """What is wrong with `value` = (thr_shape, val_shape) as the split of a row-major (tile_m, tile_n) tile for a
    128-bit copy by `threads` threads (None if it is right). Several answers are right; these are the properties:

    - the threads make a (thr_m, thr_n) grid of exactly `threads`;
    - each thread's values are (val_m, V) with V = 128 // dtype_bits: one 128-bit vector along the contiguous n;
    - the tiler (thr_m * val_m, thr_n * V) divides the tile (the tiled copy covers it, repeated if need be);
    - coalesced rows: the threads along n read at least one whole 128-byte line per row (thr_n * 16 bytes >= 128),
      or the whole row of the tile.
    """
    ok = (isinstance(value, (tuple, list)) and len(value) == 2
          and all(isinstance(s, (tuple, list)) and len(s) == 2 for s in value)
          and all(isinstance(x, int) and not isinstance(x, bool) and x > 0 for s in value for x in s))
    if not ok:
        return f"expected ((thr_m, thr_n), (val_m, val_n)) of positive ints, got {value!r}"
    (tm, tn), (vm, vn) = value
    vec = 128 // dtype_bits
    if tm * tn != threads:
        return f"the thread shape ({tm}, {tn}) holds {tm * tn} threads, not {threads}"
    if vn != vec:
        return (f"each thread should move one 128-bit vector per row along n, the contiguous mode: "
                f"{128 // dtype_bits} elements of {dtype_bits} bits, not {vn}")
    if tile_m % (tm * vm) or tile_n % (tn * vn):
        return (f"the tiler ({tm * vm}, {tn * vn}) = thread shape x value shape does not divide the "
                f"({tile_m}, {tile_n}) tile")
    if tn * 16 < 128 and tn * vn != tile_n:
        return (f"{tn} threads along n read {tn * 16} contiguous bytes of a row: less than a 128-byte line; put more "
                f"threads along n (or all the row)")
    return None


def random_split_case(rng: random.Random) -> tuple[int, int, int, int]:
    """A tile that has an answer: thr_n (>= 8, or the whole row) 128-bit vectors along n, repeated."""
    bits = rng.choice([8, 16, 32, 64])
    threads = rng.choice([32, 64, 128, 256, 512])
    tn = rng.choice([t for t in (8, 16, 32, 64) if threads % t == 0])
    tm = threads // tn
    tile_n = tn * (128 // bits) * rng.choice([1, 2, 3, 4])
    tile_m = tm * rng.choice([1, 2, 3, 4, 5, 8])
    return tile_m, tile_n, bits, threads


def _split_cases() -> list[tuple[Any, ...]]:
    return [(32, 128, 32, 256), (64, 64, 16, 128), (16, 256, 8, 64), (96, 48, 64, 256), (8, 512, 16, 512)]


def _judge_split(case: tuple[Any, ...], value: Any, outputs: list[Any]) -> str | None:
    return split_hint(*case, value)


split = Check("split", "split", _split_cases, _judge_split)

# --------------------------------------------------------------------------- 4.4 the sectors a warp's copy touches

SECTOR, LINE = 32, 128  # bytes: what the memory system moves, and what the L1 and L2 cache


def reference_sectors(dtype_bits: int, thr_shape: tuple[int, int], thr_order: tuple[int, int], values_m: int,
                      pitch: int, warp: int) -> tuple[int, int]:
    """(sectors, lines): the 32-byte sectors and 128-byte lines that warp `warp`'s first instruction of a 128-bit
    tiled copy touches, on a row-major matrix of rows `pitch` elements apart whose first byte is 128-byte aligned.
    Each thread's first instruction moves the first vector of its block, value 0 of the eager TV layout
    (``make_layout_tv`` of `_tv`, offsets ``m + n * tile_m``)."""
    tiler, tv = _tv(dtype_bits, thr_shape, thr_order, values_m)
    starts = []
    for t in range(32 * warp, 32 * warp + 32):
        m, n = divmod(tv((t, 0)), tiler[0])[::-1]
        starts.append((m * pitch + n) * dtype_bits // 8)
    sectors = {b // SECTOR for s in starts for b in (s, s + 15)}
    lines = {b // LINE for s in starts for b in (s, s + 15)}
    return len(sectors), len(lines)


def random_sectors_case(rng: random.Random) -> tuple[int, tuple[int, int], tuple[int, int], int, int, int]:
    """A whole number of warps of threads, a pitch that holds the tile's row and starts every row 16-byte aligned
    (often not 32- or 128-byte aligned), and one of the warps."""
    bits = rng.choice([8, 16, 32, 64])
    threads = 32 * rng.choice([1, 2, 4, 8])
    thr_n = rng.choice([d for d in (1, 2, 4, 8, 16, 32, 64, 128) if threads % d == 0])
    thr_shape, values_m = (threads // thr_n, thr_n), rng.randint(1, 4)
    per_16_bytes = 128 // bits
    pitch = per_16_bytes * (thr_n + rng.randint(0, 64))  # elements: the tile's row, and more
    return bits, thr_shape, rng.choice([(1, 0), (0, 1)]), values_m, pitch, rng.randrange(threads // 32)


def sectors_hint(case: tuple[Any, ...], value: Any) -> str | None:
    bits, thr_shape, order, values_m, pitch, warp = case
    if not (isinstance(value, (tuple, list)) and len(value) == 2
            and all(isinstance(x, int) and not isinstance(x, bool) for x in value)):
        return f"expected a pair of ints (sectors, lines), got {value!r}"
    want, got = reference_sectors(*case), tuple(value)
    if got == want:
        return None
    other_order = (order[1], order[0])
    if got == reference_sectors(bits, thr_shape, other_order, values_m, pitch, warp):
        return (f"got {got}: that is the warp of a thread layout ordered {other_order}; with thr_order={order}, "
                f"which (row, column) of the thread grid does each of threads {32 * warp}..{32 * warp + 31} have?")
    if got[0] == want[0]:
        return (f"the sectors are right, the lines ({got[1]}) are not: a line is 128 bytes, four sectors; count the "
                f"lines the warp's 32 vectors fall in")
    aligned = reference_sectors(bits, thr_shape, order, values_m, -(-pitch * bits // LINE) * LINE // bits, warp)
    if got == aligned and aligned != want:
        return (f"got {got}, which would be right if every row started 128-byte aligned; row r starts at "
                f"r * {pitch} * {bits // 8} bytes: where does each thread's vector start?")
    return (f"got {got}: list the warp's 32 threads, each one's first vector (the first row of its "
            f"{values_m} x {128 // bits} block) and its byte address (row * pitch + column) * {bits // 8}; count the "
            f"distinct 32-byte sectors and 128-byte lines")


def _sectors_cases() -> list[tuple[Any, ...]]:
    return [(16, (32, 8), (0, 1), 1, 1024, 0), (32, (16, 16), (0, 1), 1, 1028, 1), (8, (4, 64), (1, 0), 2, 8192, 2),
            (64, (16, 16), (1, 0), 1, 520, 3), (16, (64, 4), (1, 0), 3, 200, 1)]


def _judge_sectors(case: tuple[Any, ...], value: Any, outputs: list[Any]) -> str | None:
    return sectors_hint(case, value)


warp_sectors = Check("warp_sectors", "warp_sectors", _sectors_cases, _judge_sectors)
