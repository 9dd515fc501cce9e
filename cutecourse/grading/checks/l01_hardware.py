"""Checks of lesson 1 (GPU hierarchy, Tensor Cores, arithmetic intensity, occupancy).

The references are computed in the judge's process, from :mod:`cutecourse.hw` or from the definitions below; hints
name the idea that is missing (a multiply-add is 2 FLOPs, C is written too, multicast shares a tile, registers are
allocated per warp, the last wave is partly empty, ...) and never print the answer. The hidden tests
(tests/hidden/test_01_gpu_hierarchy_tensor_cores.py) draw their random inputs with the generators below.
"""

from __future__ import annotations

import math
import random
from fractions import Fraction
from typing import Any

from cutecourse.grading.checks import Check


def _number(value: Any, what: str = "FLOP per byte") -> str | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return f"expected a finite number ({what}), got {value!r}"
    return None


def _close(a: float, b: float) -> bool:
    return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12)


# ---------------------------------------------------------------------------------------------------------------------
# 1.1 the smallest N at which an M×N×K GEMM is compute-bound


def _n_bound(m: int, k: int, elem_bytes: int, peak_tflops: float, bandwidth_tbs: float,
             bytes_of: Any = None) -> Fraction | None:
    """The real N where the GEMM's intensity reaches the ridge, in exact arithmetic on the floats given (None: it
    never does). `bytes_of(n)` replaces the bytes the GEMM moves, to name a wrong answer's mistake."""
    ridge = Fraction(peak_tflops) / Fraction(bandwidth_tbs)
    if bytes_of is None:  # reads A and B once, writes C once: bytes = elem_bytes * (MK + N (K + M))
        fixed, per_n = elem_bytes * m * k, elem_bytes * (k + m)
    else:
        fixed, per_n = bytes_of(0), bytes_of(1) - bytes_of(0)
    # 2·M·N·K >= ridge · (fixed + N · per_n)  <=>  N · (2MK − ridge · per_n) >= ridge · fixed
    slope = 2 * m * k - ridge * per_n
    if slope <= 0:
        return None
    return ridge * fixed / slope


def reference_min_n(m: int, k: int, elem_bytes: int, peak_tflops: float, bandwidth_tbs: float) -> int | None:
    """The smallest N >= 1 whose M×N×K GEMM is compute-bound under this roofline, or None if no N is."""
    bound = _n_bound(m, k, elem_bytes, peak_tflops, bandwidth_tbs)
    return None if bound is None else max(1, math.ceil(bound))


def near_tie(m: int, k: int, elem_bytes: int, peak_tflops: float, bandwidth_tbs: float) -> bool:
    """Whether float rounding could move the answer: the bound within 1e-6 of an integer, or the limit of the
    intensity within 1e-6 of the ridge. The generators leave such cases out."""
    ridge = Fraction(peak_tflops) / Fraction(bandwidth_tbs)
    if abs(2 * m * k - ridge * elem_bytes * (m + k)) <= Fraction(1, 10**6) * 2 * m * k:
        return True
    bound = _n_bound(m, k, elem_bytes, peak_tflops, bandwidth_tbs)
    return bound is not None and abs(bound - round(bound)) < Fraction(1, 10**6) * max(1, bound)


def random_min_n_case(rng: random.Random) -> tuple[int, int, int, float, float]:
    """A random (m, k, elem_bytes, peak_tflops, bandwidth_tbs), on a real GPU's roof or a made-up one, never near a
    tie."""
    from cutecourse import hw

    while True:
        m = rng.choice([64, 128, 256, 300, 512, 1000, 1024, 2048, 4096, 5120, 8192, 14336, 16384])
        k = rng.choice([64, 128, 256, 512, 768, 1024, 3000, 4096, 8192, 12288, 16384])
        if rng.random() < 0.25:  # a made-up GPU, so that no datasheet can be hard-coded
            peak, bw = rng.choice([1.5, 10.0, 55.5, 400.0, 2500.0, 9000.0]), rng.choice([0.25, 1.0, 3.0, 10.0])
            eb = rng.choice([1, 2, 4])
        else:
            spec = rng.choice(list(hw.SPECS.values()))
            fmt, eb = rng.choice([("fp32", 4), ("fp16", 2), ("bf16", 2), ("fp8", 1)])
            peak, bw = spec.peak(fmt), spec.bandwidth_tbs
        if peak is not None and not near_tie(m, k, eb, peak, bw):
            return m, k, eb, peak, bw


def _min_n_cases() -> list[tuple[Any, ...]]:
    return [(4096, 4096, 2, 989.5, 3.35), (8192, 8192, 2, 989.5, 3.35), (128, 128, 2, 989.5, 3.35),
            (4096, 14336, 1, 1979.0, 3.35), (1024, 1024, 4, 67.0, 3.35), (5120, 5120, 2, 312.0, 2.039),
            (512, 1024, 2, 989.5, 4.8)]


def _judge_min_n(case: tuple[Any, ...], value: Any, outputs: list[Any]) -> str | None:
    m, k, eb, peak, bw = case
    right = reference_min_n(*case)
    if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
        return f"expected an int N (or None), got {value!r}"
    if value == right:
        return None
    if right is None:
        return (f"got {value}, but this GEMM is never compute-bound: as N grows its intensity approaches "
                f"2·M·K / ((M + K)·elem_bytes), which stays below the ridge peak / bandwidth; return None")
    if value is None:
        return ("got None, but a large enough N makes this GEMM compute-bound: its intensity grows towards "
                "2·M·K / ((M + K)·elem_bytes), which is above the ridge here")
    variants = {
        "count the bytes of writing C (M·N elements) too": lambda n: eb * (m * k + k * n),
        "with β = 0 the GEMM writes C but never reads it": lambda n: eb * (m * k + k * n + 2 * m * n),
        "count bytes, not elements: multiply by elem_bytes": lambda n: m * k + k * n + m * n,
    }
    for hint, bytes_of in variants.items():
        bound = _n_bound(m, k, eb, peak, bw, bytes_of)
        if bound is not None and value == max(1, math.ceil(bound)):
            return f"got {value}; {hint}"
    half = _n_bound(m, k, eb, 2 * peak, bw)  # a multiply-add counted as one FLOP: the ridge looks twice as high
    if half is not None and value == max(1, math.ceil(half)):
        return f"got {value}; a multiply-add counts as two FLOPs"
    if value == right - 1:
        return f"got {value}, whose intensity is still below the ridge: round the bound up, not down"
    return (f"got {value}; find where 2·M·N·K / (bytes moved) reaches the ridge peak / bandwidth (TFLOP/s ÷ TB/s "
            "is FLOP per byte) and solve for N")


min_n_compute_bound = Check("min_n_compute_bound", "min_n_compute_bound", _min_n_cases, _judge_min_n)


# ---------------------------------------------------------------------------------------------------------------------
# 1.2 arithmetic intensity of one CTA tile of a cluster with TMA multicast


def reference_cluster_tile(bm: int, bn: int, bk: int, cluster_m: int, cluster_n: int, elem_bytes: int) -> float:
    from cutecourse import hw

    return hw.cta_tile_intensity(bm, bn, bk, elem_bytes, cluster=(cluster_m, cluster_n))


def random_cluster_tile_case(rng: random.Random) -> tuple[int, int, int, int, int, int]:
    return (rng.choice([16, 32, 64, 96, 128, 192, 256]), rng.choice([8, 16, 64, 128, 160, 256]),
            rng.choice([8, 16, 32, 64, 128]), rng.choice([1, 1, 2, 4]), rng.choice([1, 1, 2, 4]),
            rng.choice([1, 2, 4]))


def _cluster_tile_cases() -> list[tuple[Any, ...]]:
    return [(128, 128, 64, 1, 2, 2), (256, 128, 64, 2, 2, 1), (128, 256, 32, 1, 1, 2), (64, 64, 32, 4, 1, 4),
            (128, 192, 64, 2, 1, 2), (192, 128, 32, 1, 2, 1)]


def _judge_cluster_tile(case: tuple[Any, ...], value: Any, outputs: list[Any]) -> str | None:
    if (bad := _number(value)) is not None:
        return bad
    bm, bn, bk, cm, cn, eb = case
    if _close(value, reference_cluster_tile(*case)):
        return None
    flops = 2 * bm * bn * bk
    if _close(value, flops / ((bm * bk / cm + bk * bn / cn) * eb)):
        return ("the cluster's CTAs along N (cluster_n) share the A tile, those along M (cluster_m) the B tile: "
                "you divided each tile by the other count")
    if _close(value, flops / ((bm * bk + bk * bn) * eb)):
        return "with multicast each CTA loads only its share of the tiles the cluster's CTAs have in common"
    if _close(value, flops / 2 / ((bm * bk / cn + bk * bn / cm) * eb)):
        return "off by a factor of 2: a multiply-add counts as two FLOPs"
    if _close(value, flops / (bm * bk / cn + bk * bn / cm)):
        return "count bytes, not elements: multiply by elem_bytes"
    return (f"got {value:.6g} FLOP/B; per K step, divide the CTA's multiply-add FLOPs by the bytes of its own share "
            "of the A and B tiles")


cluster_tile_intensity = Check("cluster_tile_intensity", "cluster_tile_intensity", _cluster_tile_cases,
                               _judge_cluster_tile)


# ---------------------------------------------------------------------------------------------------------------------
# 1.3 blocks per SM


def _occupancy_cases() -> list[tuple[Any, ...]]:
    from cutecourse import hw

    a100, h100, ada, t4, v100 = (hw.ARCH_LIMITS[a].as_dict() for a in ("sm_80", "sm_90", "sm_89", "sm_75", "sm_70"))
    return [(256, 32, 0, a100), (128, 64, 16384, h100), (256, 33, 0, a100), (256, 32, 41 * 1024, a100),
            (32, 16, 0, h100), (1024, 32, 0, t4), (96, 40, 8000, ada), (128, 168, 100_000, h100), (64, 24, 0, v100)]


def reference_blocks(threads: int, regs: int, smem: int, limits: dict) -> int:
    from cutecourse import hw

    return hw.occupancy(threads, regs, smem, hw.ArchLimits(**limits)).blocks_per_sm


def _variants(case: tuple[Any, ...]) -> dict[str, int]:
    """Blocks per SM with one rule of the model left out, to name the rule a wrong answer forgot."""
    threads, regs, smem, limits = case
    out = {}
    for rule, change in (("registers are allocated per warp, rounded up to reg_alloc_unit registers",
                          {"reg_alloc_unit": 1}),
                         ("every block also pays smem_reserved_per_block bytes", {"smem_reserved_per_block": 0}),
                         ("smem is allocated in units of smem_alloc_unit bytes", {"smem_alloc_unit": 1}),
                         ("resident blocks per SM are capped at max_blocks_per_sm", {"max_blocks_per_sm": 10**6})):
        out[rule] = reference_blocks(threads, regs, smem, {**limits, **change})
    return out


def _judge_blocks(case: tuple[Any, ...], value: Any, outputs: list[Any]) -> str | None:
    if isinstance(value, bool) or not isinstance(value, int):
        return f"expected an int number of blocks, got {value!r}"
    right = reference_blocks(*case)
    if value == right:
        return None
    for rule, without in _variants(case).items():
        if without != right and value == without:
            return f"got {value}; remember that {rule}"
    return (f"got {value}; work out blocks per SM under each of the four limits (threads, blocks, registers, smem) "
            "and take the smallest")


blocks_per_sm = Check("blocks_per_sm", "blocks_per_sm", _occupancy_cases, _judge_blocks)


# ---------------------------------------------------------------------------------------------------------------------
# 1.4 tile and wave quantization


def reference_wave_efficiency(m: int, n: int, bm: int, bn: int, sms: int, blocks_per_sm: int) -> float:
    """Useful work ÷ the work the launched waves could do: M·N over (waves · SMs · blocks per SM · bM · bN)."""
    from cutecourse import hw

    tiles = hw.gemm_decomposition(m, n, 1, cta=(bm, bn, 1), warp=(bm, bn, 1), instruction=(1, 1, 1))["ctas"]
    slots = sms * blocks_per_sm
    return float(Fraction(m * n, -(-tiles // slots) * slots * bm * bn))


def random_wave_case(rng: random.Random) -> tuple[int, int, int, int, int, int]:
    return (rng.choice([1, 100, 512, 1000, 1024, 2048, 3000, 4096, 8192]),
            rng.choice([8, 128, 384, 1000, 1024, 4096, 5120, 12288]), rng.choice([64, 128, 256]),
            rng.choice([64, 128, 192, 256]), rng.choice([40, 58, 80, 108, 114, 132, 148]), rng.choice([1, 1, 2, 3]))


def _wave_cases() -> list[tuple[Any, ...]]:
    return [(4096, 4096, 128, 128, 132, 1), (4096, 4096, 256, 128, 108, 1), (1000, 1000, 128, 128, 108, 2),
            (8192, 1000, 128, 256, 132, 2), (100, 5000, 64, 128, 80, 3), (6144, 6144, 256, 128, 114, 1)]


def _judge_waves(case: tuple[Any, ...], value: Any, outputs: list[Any]) -> str | None:
    if (bad := _number(value, "a fraction between 0 and 1")) is not None:
        return bad
    m, n, bm, bn, sms, bps = case
    if _close(value, reference_wave_efficiency(*case)):
        return None
    # The classic slips, each the reference on a changed problem: whole edge tiles (M and N rounded up to the tile),
    # a full last wave (one slot: as many waves as tiles), one tile per SM.
    whole = reference_wave_efficiency(-(-m // bm) * bm, -(-n // bn) * bn, bm, bn, sms, bps)
    if _close(value, whole):
        return ("edge tiles that hang over M or N do partial work: count useful work as M·N elements, not as whole "
                "tiles")
    if _close(value, reference_wave_efficiency(m, n, bm, bn, 1, 1)):
        return "the last wave may be partly empty: the launch takes whole waves of SMs × blocks per SM tiles"
    if _close(value, reference_wave_efficiency(m, n, bm, bn, sms, 1)):
        return "each SM holds blocks_per_sm tiles at once: a wave is SMs × blocks per SM tiles"
    if not 0 < value <= 1:
        return f"got {value:.6g}; an efficiency is a fraction of the machine's work, between 0 and 1"
    return (f"got {value:.6g}; count the tiles (rounded up in each mode), the waves they take, and compare the useful "
            "M·N with what those waves could compute")


wave_efficiency = Check("wave_efficiency", "wave_efficiency", _wave_cases, _judge_waves)
