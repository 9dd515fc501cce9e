"""Checks of lesson 4 (tiled copy, vectorization and predication): the thread-value layout of a 128-bit copy, a
predicated, vectorized fp32 -> 16-bit cast kernel (its PTX on a CPU, its results on a GPU), and choosing the
thread/value split of a tile.

The expected TV layouts come from the eager algebra (:func:`cutecourse.layout.make_layout_tv`); the split is judged by
its properties (several answers are right); the hidden tests (tests/hidden/test_04_tiled_copy.py) use the same
references and generators on random inputs.
"""

from __future__ import annotations

import random
import re
from typing import Any

import cutecourse.layout as eager
from cutecourse.grading import sandbox
from cutecourse.grading.checks import Check, exact_hint, input_of, rounded

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
    return (arch, sandbox.tensor(zeros, "float32", "cpu"), sandbox.tensor(zeros, dtype, "cpu"))


def _judge_ptx(case: tuple[Any, ...], value: Any, outputs: list[Any]) -> str | None:
    return cast_ptx_hint(value)


cast_ptx = Check("cast_ptx", "cast_host", lambda: [cast_ptx_case(d, a) for d, a in CAST_PTX_CASES], _judge_ptx,
                 via="ptx", options=(("vector", VECTOR),))


def cast_cases(seed: int, shapes: list[tuple[tuple[int, int], str]]) -> list[tuple[Any, ...]]:
    """Random fp32 (m, n) inputs and NaN-poisoned (m, n) outputs of the given 16-bit dtypes (n a multiple of 4)."""
    import numpy as np

    rng = np.random.default_rng(seed)
    return [(sandbox.tensor(rng.standard_normal(shape).astype(np.float32), "float32"), sandbox.poisoned(shape, dtype))
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
