"""Checks of lesson 1 (GPU hierarchy, Tensor Cores, arithmetic intensity, occupancy).

The references come from :mod:`cutecourse.hw`, computed in the judge's process; hints name the idea that is missing
(a multiply-add is 2 FLOPs, C is written too, registers are allocated per warp, ...) and never print the answer.
"""

from __future__ import annotations

import math
from typing import Any

from cutecourse.grading.checks import Check


def _number(value: Any) -> str | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return f"expected a finite number (FLOP per byte), got {value!r}"
    return None


def _close(a: float, b: float) -> bool:
    return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12)


# ---------------------------------------------------------------------------------------------------------------------
# 1.1 arithmetic intensity of a whole GEMM


def _gemm_cases() -> list[tuple[Any, ...]]:
    return [(4096, 4096, 4096, 2), (8192, 8192, 64, 2), (4096, 16, 4096, 2), (1000, 3000, 500, 4), (5120, 512, 1024, 1)]


def _judge_gemm(case: tuple[Any, ...], value: Any, outputs: list[Any]) -> str | None:
    from cutecourse import hw

    if (bad := _number(value)) is not None:
        return bad
    m, n, k, eb = case
    if _close(value, hw.gemm_intensity(m, n, k, eb)):
        return None
    flops, ab, c = 2 * m * n * k, (m * k + k * n) * eb, m * n * eb
    if _close(value, flops / 2 / (ab + c)):
        return "off by a factor of 2: a multiply-add counts as two FLOPs"
    if _close(value, flops / ab):
        return "too high: the bytes must include writing C (M·N elements) once"
    if _close(value, flops / (ab + 2 * c)):
        return "too low: with β = 0 the GEMM writes C but never reads it"
    if _close(value, flops / (m * k + k * n + m * n)):
        return "count bytes, not elements: multiply by elem_bytes"
    return f"got {value:.6g} FLOP/B; divide the GEMM's FLOPs by the bytes of reading A and B once and writing C once"


gemm_intensity = Check("gemm_intensity", "gemm_intensity", _gemm_cases, _judge_gemm)


# ---------------------------------------------------------------------------------------------------------------------
# 1.2 arithmetic intensity of one CTA tile (smem reuse)


def _tile_cases() -> list[tuple[Any, ...]]:
    return [(128, 128, 32, 2), (128, 256, 64, 2), (64, 64, 64, 4), (256, 128, 32, 1), (16, 256, 16, 2)]


def _judge_tile(case: tuple[Any, ...], value: Any, outputs: list[Any]) -> str | None:
    from cutecourse import hw

    if (bad := _number(value)) is not None:
        return bad
    bm, bn, bk, eb = case
    if _close(value, hw.cta_tile_intensity(bm, bn, bk, eb)):
        return None
    flops, loads = 2 * bm * bn * bk, (bm * bk + bk * bn) * eb
    if _close(value, flops / 2 / loads):
        return "off by a factor of 2: a multiply-add counts as two FLOPs"
    if _close(value, flops / (bm * bk * eb)) or _close(value, flops / (bk * bn * eb)):
        return "each K step loads both an A tile and a B tile from global memory"
    if _close(value, flops / (loads + bm * bn * eb)):
        return "leave C out: it is stored once, after all K steps, so it is amortised away"
    if _close(value, flops / (bm * bk + bk * bn)):
        return "count bytes, not elements: multiply by elem_bytes"
    return (f"got {value:.6g} FLOP/B; per K step, divide the tile's multiply-add FLOPs by the bytes of the A and B "
            "tiles it loads into smem")


cta_tile_intensity = Check("cta_tile_intensity", "cta_tile_intensity", _tile_cases, _judge_tile)


# ---------------------------------------------------------------------------------------------------------------------
# 1.3 blocks per SM, 1.4 the binding limits


def _occupancy_cases() -> list[tuple[Any, ...]]:
    from cutecourse import hw

    a100, h100, ada, t4 = (hw.ARCH_LIMITS[a].as_dict() for a in ("sm_80", "sm_90", "sm_89", "sm_75"))
    return [(256, 32, 0, a100), (128, 64, 16384, h100), (256, 33, 0, a100), (256, 32, 41 * 1024, a100),
            (32, 16, 0, h100), (1024, 32, 0, t4), (96, 40, 8000, ada), (128, 168, 100_000, h100)]


def _reference(case: tuple[Any, ...]):  # noqa: ANN202 - an hw.Occupancy
    from cutecourse import hw

    threads, regs, smem, limits = case
    return hw.occupancy(threads, regs, smem, hw.ArchLimits(**limits))


def _variants(case: tuple[Any, ...]) -> dict[str, int]:
    """Blocks per SM with one rule of the model left out, to name the rule a wrong answer forgot."""
    from cutecourse import hw

    threads, regs, smem, limits = case
    out = {}
    for rule, change in (("registers are allocated per warp, rounded up to reg_alloc_unit registers",
                          {"reg_alloc_unit": 1}),
                         ("every block also pays smem_reserved_per_block bytes", {"smem_reserved_per_block": 0}),
                         ("smem is allocated in units of smem_alloc_unit bytes", {"smem_alloc_unit": 1}),
                         ("resident blocks per SM are capped at max_blocks_per_sm", {"max_blocks_per_sm": 10**6})):
        lim = hw.ArchLimits(**{**limits, **change})
        out[rule] = hw.occupancy(threads, regs, smem, lim).blocks_per_sm
    return out


def _judge_blocks(case: tuple[Any, ...], value: Any, outputs: list[Any]) -> str | None:
    if isinstance(value, bool) or not isinstance(value, int):
        return f"expected an int number of blocks, got {value!r}"
    right = _reference(case).blocks_per_sm
    if value == right:
        return None
    for rule, without in _variants(case).items():
        if without != right and value == without:
            return f"got {value}; remember that {rule}"
    return (f"got {value}; work out blocks per SM under each of the four limits (threads, blocks, registers, smem) "
            "and take the smallest")


blocks_per_sm = Check("blocks_per_sm", "blocks_per_sm", _occupancy_cases, _judge_blocks)

_NAMES = ("threads", "blocks", "registers", "smem")


def _judge_binding(case: tuple[Any, ...], value: Any, outputs: list[Any]) -> str | None:
    if not isinstance(value, (tuple, list)) or any(not isinstance(v, str) for v in value):
        return f"expected a tuple of limit names, got {value!r}"
    if unknown := [v for v in value if v not in _NAMES]:
        return f"{unknown[0]!r} is not a limit name; use {', '.join(map(repr, _NAMES))}"
    if len(set(value)) != len(value):
        return f"got {value!r}: name each limit once"
    right = set(_reference(case).binding)
    if set(value) == right:
        return None
    if set(value) < right:
        return f"got {tuple(value)!r}: more than one limit gives the same, smallest, number of blocks here"
    return (f"got {tuple(value)!r}: a limit binds when the blocks it allows equal the final blocks per SM; "
            "compare all four")


binding_limits = Check("binding_limits", "binding_limits", _occupancy_cases, _judge_binding)
