"""Checks of lesson 4 (tiled copy, vectorization and predication): the thread-value layout of a 128-bit copy, the
predicated copy kernel (its PTX on a CPU, its results on a GPU), and choosing the thread/value split of a tile.

The expected TV layouts come from the eager algebra (:func:`cutecourse.layout.make_layout_tv`); the split is judged by
its properties (several answers are right); the hidden tests (tests/hidden/test_04_tiled_copy.py) use the same
references and generators on random inputs.
"""

from __future__ import annotations

import random
import re
from typing import Any

import cutecourse.layout as eager
from cutecourse.grading.checks import PTX_CASES, Check, exact_hint, input_of, matrix_cases, scalar_ptx_hint

# --------------------------------------------------------------------------- 4.1 the TV layout of a 128-bit copy


def reference_tv(dtype_bits: int, threads_m: int, threads_n: int, values_m: int) -> tuple[str, str]:
    """``(str(tiler_mn), str(layout_tv))`` of ``make_layout_tv(thr, val)`` for row-major threads
    ``(threads_m, threads_n)`` and row-major values ``(values_m, 128 // dtype_bits)``, from the eager algebra."""
    thr = eager.make_ordered_layout((threads_m, threads_n), order=(1, 0))
    val = eager.make_ordered_layout((values_m, 128 // dtype_bits), order=(1, 0))
    tiler, tv = eager.make_layout_tv(thr, val)
    return str(tuple(tiler)), str(tv)


def random_tv_case(rng: random.Random) -> tuple[int, int, int, int]:
    return rng.choice([8, 16, 32, 64]), rng.randint(1, 16), rng.choice([1, 2, 4, 8, 16, 32]), rng.randint(1, 4)


def _tv_cases() -> list[tuple[Any, ...]]:
    return [(32, 8, 32, 1), (16, 4, 8, 1), (32, 8, 32, 4), (16, 16, 16, 2), (8, 2, 16, 1), (64, 3, 5, 2)]


def _normal(s: Any) -> str:
    return re.sub(r"\s+", "", str(s))


def tv_hint(case: tuple[Any, ...], value: Any) -> str | None:
    bits, tm, tn, vm = case
    if not (isinstance(value, (tuple, list)) and len(value) == 2 and all(isinstance(v, str) for v in value)):
        return f"expected a pair of strings (str(tiler_mn), str(layout_tv)), got {value!r}"
    tiler, tv = (_normal(v) for v in value)
    want_tiler, want_tv = (_normal(v) for v in reference_tv(*case))
    vec = 128 // bits
    if tiler != want_tiler:
        return (f"tiler_mn {value[0]} is wrong: a 128-bit vector holds 128 // {bits} = {vec} elements, along n; "
                f"the tile is (threads along m x values along m, threads along n x values along n)")
    if tv != want_tv:
        return (f"layout_tv {value[1]} is wrong: are the threads ({tm},{tn}) and the values ({vm},{vec}) both "
                f"row-major (make_ordered_layout(..., order=(1, 0))), and passed in the order (thr, val)?")
    return None


def _judge_tv(case: tuple[Any, ...], value: Any, outputs: list[Any]) -> str | None:
    return tv_hint(case, value)


tv_for = Check("tv_for", "tv_for", _tv_cases, _judge_tv)

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
