"""Checks of lesson 7 (mixed precision, accumulators and the epilogue), the two CPU exercises: a Tensor Core's
fp32 dot products as its block FMA computes them (blocks of products aligned to their largest term, truncated, the
sum truncated to fp32), and the layout that gives each accumulator of a TV layout its bias element (a broadcast is a
stride-0 layout). (The kernel exercises 7.3 and 7.4 have checks of their own.)

The judges compute their references: 7.1 runs the same model on integer significands (the learner's float64 steps
must match it bit for bit), and names the mistake when an answer matches a variant (rounding to nearest, no
alignment, one product per step, section 3's model); 7.2 reads each (thread, value)'s (m, n) off the C TV layout with
:mod:`cutecourse.fragments` (the eager algebra, checked against the DSL's TiledMMA). Their hints name the case and
what is off, not the answer.
"""

from __future__ import annotations

import random
from typing import Any

from cutecourse import fragments as F
from cutecourse.grading import wire
from cutecourse.grading.checks import Check
from cutecourse.grading.checks import l05_tiled_mma as L5
from cutecourse.layout import Layout, parse_layout

# --------------------------------------------------------------------------- 7.1 a Tensor Core's block FMA

#: (block, align_bits) of the block-FMA model for fp32 accumulation, per GPU and input type, simplified from the
#: published models (Fasi, Higham, Mikaitis and Pranesh 2021 for the V100 and A100; Khattak and Mikaitis 2025 for the
#: H100, whose fp8 path keeps 14 bits): how many products join the accumulator in one addition, and how many bits
#: below the largest term's leading bit (that bit included) survive the alignment.
PRESETS = {"V100 fp16": (4, 24), "A100 fp16": (8, 25), "H100 fp16": (16, 26), "H100 fp8": (32, 14)}
INPUTS = ("float16", "bfloat16", "float8_e4m3fn", "float8_e5m2")
FP32_BITS = 24  # the accumulator's significant bits


def block_fma(x: Any, y: Any, block: int, align_bits: int, nearest: bool = False, aligned: bool = True,
              accumulator_joins: bool = True) -> Any:
    """The block-FMA model of a Tensor Core's fp32 dot products, one per row of `x` and `y` (float64 arrays, rows × k,
    of values exact in the inputs' format): the accumulator starts at 0; each block of `block` consecutive products
    (the last one may be shorter) is added to it in one step, every term first truncated toward zero to the grid of
    the block's largest term (`align_bits` significant bits), the exact sum then truncated to fp32's 24 bits. It works
    on integer significands, so every step is exact.

    The keywords make the judge's variants: `nearest` rounds the sum to nearest (ties to even) instead of truncating,
    `aligned=False` skips the alignment, `accumulator_joins=False` aligns the products among themselves and adds the
    accumulator afterwards.

    >>> import numpy as np
    >>> ones = np.ones((1, 4))
    >>> float(block_fma(ones, np.array([[1.0, 2.0**-25, 2.0**-25, 2.0**-25]]), 4, 24)[0])
    1.0
    """
    import numpy as np

    products = x * y
    acc = np.zeros(products.shape[0])
    for lo in range(0, products.shape[1], block):
        part = products[:, lo:lo + block]
        if accumulator_joins:
            acc = _fp32(_aligned_sum(np.column_stack([part, acc]), align_bits, aligned), nearest)
        else:
            acc = _fp32(_aligned_sum(part, align_bits, aligned) + acc, nearest)
    return acc


def _aligned_sum(terms: Any, align_bits: int, aligned: bool) -> Any:
    """Each row's terms, each cut toward zero to multiples of 2^(top - align_bits) with 2^top above the row's largest
    magnitude, summed exactly (as float64: the sums stay far below 2^53)."""
    import numpy as np

    significand, exponent = np.frexp(terms)  # terms = significand · 2^exponent, |significand| in [0.5, 1)
    whole = np.ldexp(significand, 53).astype(np.int64)  # 53-bit integer significands, signed
    if not aligned:
        return np.ldexp(whole.astype(np.float64), exponent - 53).sum(axis=1)
    top = np.where(terms != 0, exponent, np.iinfo(np.int32).min).max(axis=1, keepdims=True)
    drop = np.clip(top - align_bits - (exponent - 53), 0, 63)  # the bits below the grid
    kept = np.sign(whole) * (np.abs(whole) >> drop)
    return np.ldexp(kept.astype(np.float64), exponent - 53 + drop).sum(axis=1)


def _fp32(total: Any, nearest: bool) -> Any:
    """`total` cut to 24 significant bits: toward zero, or to nearest (fp32's own rounding, ties to even)."""
    import numpy as np

    if nearest:
        return total.astype(np.float32).astype(np.float64)
    significand, exponent = np.frexp(total)
    return np.ldexp(np.fix(np.ldexp(significand, FP32_BITS)), exponent - FP32_BITS)


def block_fma_variants(x: Any, y: Any, block: int, align_bits: int) -> dict[str, Any]:
    """What common mistakes compute instead of the model, each under the hint that names it."""
    import numpy as np

    exact = (x * y).sum(axis=1)
    one_by_one = np.zeros(x.shape[0])
    for column in (x * y).T:
        one_by_one = (one_by_one + column).astype(np.float32).astype(np.float64)
    return {
        "the block's sum rounded to nearest; the model cuts it toward zero": block_fma(x, y, block, align_bits, True),
        "the terms added without the alignment; the model drops every bit below the largest term's grid first":
            block_fma(x, y, block, align_bits, aligned=False),
        "the accumulator added after the products are aligned and summed; it is one of the block's terms, aligned "
        "with them": block_fma(x, y, block, align_bits, accumulator_joins=False),
        "one product per step; a whole block of products joins the accumulator in one step":
            block_fma(x, y, 1, align_bits),
        "the alignment keeping one bit more than align_bits (the largest term's leading bit counts as one of them)":
            block_fma(x, y, block, align_bits + 1),
        "the alignment keeping one bit fewer than align_bits": block_fma(x, y, block, align_bits - 1),
        "section 3's model, one rounding to nearest after every addition": one_by_one,
        "the exact dot product rounded once to fp32": exact.astype(np.float32).astype(np.float64),
    }


def case_arrays(case: tuple[Any, ...]) -> tuple[Any, Any, int, int]:
    """(x, y, block, align_bits) of a case, x and y as the float64 numpy arrays the learner's tensors hold."""
    x, y, block, align_bits = case
    return wire.decode(x["$tensor"]["array"]), wire.decode(y["$tensor"]["array"]), block, align_bits


def block_fma_hint(case: tuple[Any, ...], value: Any) -> str | None:
    """What is wrong with `value` as the model's dot products of `case` (x, y as tensor requests, block,
    align_bits), or None."""
    import numpy as np

    x, y, block, align_bits = case_arrays(case)
    want = block_fma(x, y, block, align_bits)
    try:
        got = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError):
        return f"expected an array of {len(want)} dot products, got {type(value).__name__}"
    if got.shape != want.shape:
        return f"expected {len(want)} dot products, one per row of x (shape {want.shape}), got shape {got.shape}"
    if not np.isfinite(got).all():
        return f"{int((~np.isfinite(got)).sum())} of the {len(want)} results are not finite"
    if np.array_equal(got, want):
        return None
    for mistake, variant in block_fma_variants(x, y, block, align_bits).items():
        if np.array_equal(got, variant):
            return f"every result matches {mistake}"
    wrong = np.nonzero(got != want)[0]
    row = int(wrong[0])
    ulp = np.ldexp(1.0, np.frexp(want[row])[1] - FP32_BITS) if want[row] else np.ldexp(1.0, -149)
    off = (abs(got[row]) - abs(want[row])) / ulp
    return (f"{len(wrong)} of the {len(want)} results differ from the model's; the first, row {row}, is "
            f"{abs(off):.3g} units of fp32's last place {'larger' if off > 0 else 'smaller'} in magnitude (is "
            f"the last, shorter block added? is each step's grid set by its own largest term?)")


def inputs(x: Any, y: Any, block: int, align_bits: int) -> tuple[Any, ...]:
    """A case: x and y (float64 arrays, rows × k) as requests for float64 CPU tensors, then block and align_bits."""
    return wire.tensor(x, "float64", "cpu"), wire.tensor(y, "float64", "cpu"), block, align_bits


def block_fma_case(rng: Any, rows: int, k: int, preset: str, dtype: str, spread: int = 0) -> tuple[Any, ...]:
    """A case of random normal inputs rounded to `dtype`, rows scaled by powers of two up to 2^±`spread` (terms of
    very different magnitudes), the first row all zeros when there are several."""
    import numpy as np

    from cutecourse.grading.checks import rounded

    x, y = rng.standard_normal((2, rows, k)).astype(np.float32)
    if spread:
        x = x * np.ldexp(1.0, rng.integers(-spread, spread + 1, (rows, k))).astype(np.float32)
    if rows > 1:
        x[0] = 0.0
    return inputs(rounded(x, dtype), rounded(y, dtype), *PRESETS[preset])


def _block_fma_cases() -> list[tuple[Any, ...]]:
    """The check's cases: a hand-made block where the alignment matters, then each preset on random inputs of its
    formats, k a multiple of the block."""
    import numpy as np

    rng = np.random.default_rng(707)
    # Row 0: three products of 0.75 units of the largest's last place, each dropped by the alignment; row 1: a sum
    # that cancels to what the alignment dropped.
    small, unit = np.ldexp(1.0, -12), np.ldexp(1.0, -23)
    x = np.array([[1.0, small, small, small], [1.0, -1.0, small, 0.5]])
    y = np.array([[1.0, 1.5 * small, 1.5 * small, 1.5 * small], [1.0, 1.0, small, unit]])
    hand = inputs(x, y, 4, 24)
    return [hand, block_fma_case(rng, 32, 64, "V100 fp16", "float16"),
            block_fma_case(rng, 32, 96, "A100 fp16", "bfloat16", 6),
            block_fma_case(rng, 32, 256, "H100 fp16", "float16"),
            block_fma_case(rng, 32, 128, "H100 fp8", "float8_e4m3fn")]


def random_block_fma_case(rng: Any) -> tuple[Any, ...]:
    """A hidden case: any preset and input format, k mostly not a multiple of the block, magnitudes spread or not."""
    preset = str(rng.choice(list(PRESETS)))
    k = int(rng.choice((1, 3, 17, 40, 77, 130, 300, 1000, 2050)))
    return block_fma_case(rng, int(rng.integers(1, 48)), k, preset, str(rng.choice(INPUTS)),
                          int(rng.choice((0, 0, 4, 12))))


def _judge_block_fma(case: tuple[Any, ...], value: Any, outputs: list[Any]) -> str | None:
    return block_fma_hint(case, value)


block_fma_dot = Check("block_fma_dot", "block_fma_dot", _block_fma_cases, _judge_block_fma)

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
