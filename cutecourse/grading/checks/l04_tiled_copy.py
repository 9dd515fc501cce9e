"""Checks of lesson 4 (tiled copy, vectorization and predication): which thread holds an element of a 128-bit copy's
thread-value layout, the predicated copy kernel (its PTX on a CPU, its results on a GPU), and choosing the
thread/value split of a tile.

The owners come from the eager algebra's TV layouts (:func:`cutecourse.layout.make_layout_tv`); the split is judged
by its properties (several answers are right); the hidden tests (tests/hidden/test_04_tiled_copy.py) use the same
references and generators on random inputs.
"""

from __future__ import annotations

import random
from typing import Any

import cutecourse.layout as eager
from cutecourse.grading.checks import PTX_CASES, Check, exact_hint, input_of, matrix_cases, scalar_ptx_hint

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

# --------------------------------------------------------------------------- 4.2 the predicated copy

def predicated_ptx_hint(code: Any, dtype: str) -> str | None:
    """What is wrong with the predicated copy's PTX for `dtype` (None if nothing): 4 scalar global loads and 4 stores
    per thread, each behind a predicate."""
    return scalar_ptx_hint(
        code, dtype,
        moves="should copy its 4 elements of the 8x128 tile once: global -> registers -> global",
        unguarded="on a matrix whose sides are not multiples of the tile, the threads of the edge tiles would touch "
                  "memory outside it (partition the identity tensor like the data and compare each coordinate with "
                  "the shape)")


def _judge_ptx(case: tuple[Any, ...], value: Any, outputs: list[Any]) -> str | None:
    return predicated_ptx_hint(value, case[0])


predicated_ptx = Check("predicated_ptx", "predicated_ptx", lambda: PTX_CASES, _judge_ptx)


def _copy_cases() -> list[tuple[Any, ...]]:
    return matrix_cases(402, (((8, 128), "float32"), ((64, 256), "float32"), ((37, 53), "float32"),
                              ((100, 7), "float16"), ((129, 65), "bfloat16")))


def _judge_copy(case: tuple[Any, ...], value: Any, outputs: list[Any]) -> str | None:
    (out,) = outputs
    return exact_hint(input_of(case), out)


copy_predicated = Check("copy_predicated", "copy_predicated", _copy_cases, _judge_copy, gpu=80)

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
