"""Checks of lesson 7 (mixed precision, accumulators and the epilogue), the two CPU exercises: the cheapest
accumulator that keeps a K-long dot product under a tolerance, and the layout that gives each accumulator of a TV
layout its bias element (a broadcast is a stride-0 layout). (The kernel exercises 7.3 and 7.4 have checks of their
own.)

The judges compute their references: 7.1 emulates the Tensor Core's accumulation (exact products, the running sum
rounded to the accumulator after every addition) on a fixed sample of random dot products; 7.2 reads each
(thread, value)'s (m, n) off the C TV layout with :mod:`cutecourse.fragments` (the eager algebra, checked against
the DSL's TiledMMA). Their hints name the case and what is off, not the answer.
"""

from __future__ import annotations

import functools
import random
from typing import Any

from cutecourse import fragments as F
from cutecourse.grading.checks import Check, rounded
from cutecourse.grading.checks import l05_tiled_mma as L5
from cutecourse.layout import Layout, parse_layout

# --------------------------------------------------------------------------- 7.1 the cheapest accumulator

INPUTS = ("float16", "bfloat16", "float8_e4m3fn", "float8_e5m2")
#: The accumulators a Tensor Core offers per input type, cheapest first: mma.sync and wgmma accumulate fp16 products
#: in f16 or f32, bf16 products in f32 only; Hopper's fp8 wgmma in f16 or f32.
OFFERED = {"float16": ("float16", "float32"), "bfloat16": ("float32",), "float8_e4m3fn": ("float16", "float32"),
           "float8_e5m2": ("float16", "float32")}
ROWS, SEED = 512, 707  # the judge's sample: 512 dot products; its noise is about 3 % of the error
#: Where the tolerance is within this factor of an accumulator's error, the sample cannot tell: both answers pass.
BAND = 1.25


@functools.lru_cache(maxsize=256)
def accumulation_error(k: int, dtype: str, accumulator: str) -> float:
    """The relative error ‖ŝ − d‖ / ‖d‖ over ROWS dot products of `k` random normal float32 pairs: d in float64 of
    the inputs as drawn, ŝ the Tensor Core's result on the inputs rounded to `dtype`, the exact products added one by
    one to a running sum rounded to `accumulator` after each addition.

    >>> accumulation_error(64, "float16", "float32") < 1e-3 < accumulation_error(4096, "float16", "float16")
    True
    """
    import numpy as np

    rng = np.random.default_rng(SEED)
    x, y = rng.standard_normal((2, k, ROWS), dtype=np.float32)  # (k, rows): each step adds one contiguous row
    exact = (x.astype(np.float64) * y).sum(axis=0)
    products = rounded(x, dtype) * rounded(y, dtype)  # exact in float64: at most 2 × 11 significant bits
    acc, s = np.dtype(accumulator), np.zeros(ROWS)
    for p in products:
        s = (s + p).astype(acc).astype(np.float64)  # the float64 sum is exact; one rounding per addition
    return float(np.linalg.norm(s - exact) / np.linalg.norm(exact))


def accepted(k: int, tolerance: float, dtype: str) -> set[str | None]:
    """The answers the judge accepts: the cheapest offered accumulator whose error is within the tolerance (None if
    none is), plus, where an error is within BAND of the tolerance, both sides of that comparison."""
    out: set[str | None] = set()
    for accumulator in OFFERED[dtype]:
        error = accumulation_error(k, dtype, accumulator)
        if error * BAND <= tolerance:
            return out | {accumulator}
        if error <= tolerance * BAND:
            out.add(accumulator)
    return out | {None}


def accumulator_hint(k: int, tolerance: float, dtype: str, value: Any) -> str | None:
    if value is not None and value not in ("float16", "float32"):
        return f"expected 'float16', 'float32' or None, got {value!r}"
    ok = accepted(k, tolerance, dtype)
    if value in ok:
        return None
    if value is not None and value not in OFFERED[dtype]:
        return (f"no Tensor Core accumulates {dtype} products in {value}: use only the accumulators the hardware "
                f"offers for {dtype} inputs")
    if value is None:
        return (f"None says no accumulator keeps a {k}-long {dtype} dot product within {tolerance:g}, but one of "
                f"those offered for {dtype} does; is the error of a wider accumulator smaller than you estimate?")
    if accumulation_error(k, dtype, value) > tolerance:
        return (f"accumulated in {value}, a {k}-long dot product of {dtype} inputs ends above the tolerance "
                f"{tolerance:g}: does your estimate count the rounding of the inputs themselves, which no accumulator "
                f"undoes, as well as the running sum's?")
    return (f"{value} keeps the error within {tolerance:g}, but it is not the cheapest accumulator that does: is your "
            f"estimate the worst case? The roundings of random inputs partly cancel, so the running sum's error grows "
            f"more slowly than K")


def random_accumulator_case(rng: random.Random) -> tuple[int, float, str]:
    """A K, a dtype and a tolerance well away from every error (a factor of 3 or more), so that one answer is right:
    below the best error (None), between two, or above the cheapest."""
    while True:
        dtype = rng.choice(INPUTS)
        k = rng.choice((16, 48, 100, 256, 640, 1000, 2048, 3000, 4096, 8192, 12000))
        errors = sorted(accumulation_error(k, dtype, a) for a in OFFERED[dtype])
        bounds = [0.0] + errors + [1.0]
        gaps = [(lo, hi) for lo, hi in zip(bounds, bounds[1:]) if hi > 9 * lo]
        if gaps:
            lo, hi = rng.choice(gaps)
            return k, float(f"{(max(lo, hi / 100) * hi) ** 0.5:.2g}"), dtype


def _judge_accumulator(case: tuple[Any, ...], value: Any, outputs: list[Any]) -> str | None:
    return accumulator_hint(*case, value)


choose_accumulator = Check("choose_accumulator", "choose_accumulator", lambda: [
    (64, 0.01, "float16"), (4096, 0.002, "float16"), (1024, 0.05, "bfloat16"), (256, 1e-4, "float16"),
    (16384, 0.1, "float8_e4m3fn"), (4096, 0.01, "float8_e4m3fn")], _judge_accumulator)

# --------------------------------------------------------------------------- 7.2 the bias fragment

MODES = ("n", "m")  # "n": one bias value per column (torch's addmm bias); "m": one per row


def reference_bias(tv_layout_c: str, tile_m: int, tile_n: int, bias_mode: str) -> Any:
    """(threads, values): the bias element each (thread, value) of the C TV layout adds, its n for "n", its m for
    "m", read off the layout's (m, n) coordinates (index m + tile_m · n)."""
    at = F.coords(parse_layout(tv_layout_c), (tile_m, tile_n))
    return at[..., 1] if bias_mode == "n" else at[..., 0]


def bias_hint(case: tuple[Any, ...], value: Any) -> str | None:
    import numpy as np

    tv_layout_c, tile_m, tile_n, bias_mode = case
    if not (isinstance(value, (tuple, list)) and len(value) == 2):
        return f"expected (layout, loads): a Layout (thread, value) -> bias element and an int, got {value!r}"
    layout, loads = value
    want = reference_bias(*case)
    threads, values = want.shape
    got_layout, problem = L5.tv_layout(layout, threads, values, "the C layout", to="bias element")
    if problem:
        return problem
    got = np.array([[got_layout((t, v)) for v in range(values)] for t in range(threads)])
    wrong = got != want
    if wrong.any():
        t, v = (int(i) for i in np.argwhere(wrong)[0])
        along = "column (n)" if bias_mode == "n" else "row (m)"
        return (f"{layout} gives thread {t}'s accumulator {v} bias element {got[t, v]}, not the one of its {along} "
                f"({int(wrong.sum())} of {wrong.size} are off): C's TV layout maps (thread, value) to m + {tile_m}·n; "
                f"which layout of that {tile_m} x {tile_n} tile keeps only the {along[-2]} coordinate, and in which "
                f"order do you compose?")
    most = max(len(set(row.tolist())) for row in want)
    if isinstance(loads, bool) or not isinstance(loads, int) or loads != most:
        return (f"the layout is right, but loads={loads!r}: how many different bias elements do one thread's "
                f"{values} accumulators need (the thread that needs the most)?")
    return None


def _judge_bias(case: tuple[Any, ...], value: Any, outputs: list[Any]) -> str | None:
    return bias_hint(case, value)


def tiled_c(warps_m: int, warps_n: int, k: int, row_major: bool, permute_n: bool) -> tuple[str, int, int]:
    """A TiledMMA's C TV layout (text) and tile: m16n8k`k` atoms over a warps_m x warps_n grid (row- or column-major),
    N permuted to 16 per warp or not."""
    grid = Layout((warps_m, warps_n, 1), (warps_n, 1, 0) if row_major else (1, warps_m, 0))
    tile = (16 * warps_m, (16 if permute_n else 8) * warps_n, k)
    t = F.tiled_mma(F.mma_atom(k), grid, tile)
    return str(t.tv_layout_C_tiled), tile[0], tile[1]


def random_bias_case(rng: random.Random) -> tuple[str, int, int, str]:
    if rng.random() < 0.3:
        n = rng.choice(F.WGMMA_NS)
        return str(F.wgmma_atom(n).layout_c), 64, n, rng.choice(MODES)
    layout, tile_m, tile_n = tiled_c(rng.choice((1, 2, 4)), rng.choice((1, 2, 4)), rng.choice(F.MMA_KS),
                                     rng.random() < 0.5, rng.random() < 0.5)
    return layout, tile_m, tile_n, rng.choice(MODES)


def _bias_cases() -> list[tuple[Any, ...]]:
    atom = str(F.mma_atom(16).layout_c)
    return [(atom, 16, 8, "n"), (atom, 16, 8, "m"), (*tiled_c(2, 2, 16, True, True), "n"),
            (*tiled_c(2, 2, 16, True, True), "m"), (str(F.wgmma_atom(64).layout_c), 64, 64, "n")]


bias_fragment = Check("bias_fragment", "bias_fragment", _bias_cases, _judge_bias)
