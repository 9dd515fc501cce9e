"""Roofline and arithmetic intensity of a GEMM, of a CTA tile, and the GEMM's decomposition into tiles.

Arithmetic intensity = FLOPs ÷ bytes moved to or from DRAM. The roofline says a kernel of intensity I can reach at
most ``min(peak, bandwidth × I)``; the ridge point ``peak / bandwidth`` separates memory-bound from compute-bound.

>>> gemm_intensity(4096, 4096, 4096, elem_bytes=2)
1365.3333333333333
>>> attainable_tflops(989.5, 3.35, 64.0)
214.4
"""

from __future__ import annotations

import math


def _positive(**values: float) -> None:
    for name, v in values.items():
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not v > 0:
            raise ValueError(f"{name}={v!r}: must be a positive number (e.g. {name}=128)")


def gemm_flops(m: int, n: int, k: int) -> int:
    """FLOPs of C[M,N] = A[M,K] × B[K,N]: one multiply and one add per (m, n, k), so 2·M·N·K.

    >>> gemm_flops(2, 3, 4)
    48
    """
    _positive(m=m, n=n, k=k)
    return 2 * m * n * k


def gemm_bytes(m: int, n: int, k: int, elem_bytes: float = 2, c_bytes: float | None = None,
               read_c: bool = False) -> float:
    """The fewest DRAM bytes a GEMM moves: read A and B once, write C once (and read it too when β ≠ 0).

    `elem_bytes` is the size of an A/B element (2 for FP16), `c_bytes` of a C element (default: `elem_bytes`).

    >>> gemm_bytes(2, 3, 4, elem_bytes=2)  # (2·4 + 4·3) · 2 + 2·3 · 2
    52
    """
    c_bytes = elem_bytes if c_bytes is None else c_bytes
    _positive(m=m, n=n, k=k, elem_bytes=elem_bytes, c_bytes=c_bytes)
    return (m * k + k * n) * elem_bytes + m * n * c_bytes * (2 if read_c else 1)


def gemm_intensity(m: int, n: int, k: int, elem_bytes: float = 2, c_bytes: float | None = None,
                   read_c: bool = False) -> float:
    """Arithmetic intensity of a whole GEMM, FLOP/byte: ``2MNK / gemm_bytes``. For a square FP16 GEMM, n/3.

    >>> gemm_intensity(3, 3, 3, elem_bytes=1)
    2.0
    """
    return gemm_flops(m, n, k) / gemm_bytes(m, n, k, elem_bytes, c_bytes, read_c)


def cta_tile_intensity(bm: int, bn: int, bk: int, elem_bytes: float = 2, cluster: tuple[int, int] = (1, 1)) -> float:
    """Arithmetic intensity of one CTA's mainloop: FLOP per byte it loads from global memory.

    Per K step a CTA loads a bM×bK tile of A and a bK×bN tile of B into smem, and every element is reused from smem
    by bN (A) or bM (B) multiply-adds: ``2·bM·bN·bK / ((bM + bN)·bK·elem_bytes) = 2·bM·bN / ((bM + bN)·elem_bytes)``.
    bK cancels; the epilogue's C store is amortised over K and left out.

    ``cluster = (cluster_m, cluster_n)`` is a thread-block cluster (sm_90+) whose CTAs share tiles by TMA multicast:
    the cluster_n CTAs of one cluster row need the same A tile and the cluster_m CTAs of one column the same B tile,
    so each loads only its share of them from global memory.

    >>> cta_tile_intensity(128, 128, 32, elem_bytes=2)
    64.0
    >>> cta_tile_intensity(128, 256, 32, elem_bytes=2, cluster=(2, 1))  # 2 CTAs along M share every B tile
    128.0
    """
    _positive(bm=bm, bn=bn, bk=bk, elem_bytes=elem_bytes)
    if not (isinstance(cluster, tuple) and len(cluster) == 2
            and all(isinstance(c, int) and not isinstance(c, bool) and c > 0 for c in cluster)):
        raise ValueError(f"cluster={cluster!r}: give (cluster_m, cluster_n), positive CTA counts along M and N, "
                         f"e.g. cluster=(2, 1)")
    cluster_m, cluster_n = cluster
    return 2 * bm * bn * bk / ((bm * bk / cluster_n + bk * bn / cluster_m) * elem_bytes)


def ridge_point(peak_tflops: float, bandwidth_tbs: float) -> float:
    """FLOP per byte where the roofline bends: below it a kernel is memory-bound.

    >>> round(ridge_point(989.5, 3.35), 1)
    295.4
    """
    _positive(peak_tflops=peak_tflops, bandwidth_tbs=bandwidth_tbs)
    return peak_tflops / bandwidth_tbs


def attainable_tflops(peak_tflops: float, bandwidth_tbs: float, intensity: float) -> float:
    """The roofline: ``min(peak, bandwidth × intensity)`` in TFLOP/s (TB/s × FLOP/B = TFLOP/s).

    >>> attainable_tflops(312.0, 2.039, 1000.0)
    312.0
    """
    _positive(peak_tflops=peak_tflops, bandwidth_tbs=bandwidth_tbs, intensity=intensity)
    return round(min(peak_tflops, bandwidth_tbs * intensity), 6)


def gemm_decomposition(m: int, n: int, k: int, cta: tuple[int, int, int] = (128, 128, 32),
                       warp: tuple[int, int, int] = (64, 64, 32),
                       instruction: tuple[int, int, int] = (16, 8, 16)) -> dict[str, int]:
    """How a GEMM maps onto the hierarchy: ThreadblockShape → WarpShape → InstructionShape (CUTLASS's names).

    Returns the grid's CTA count (one CTA per C tile, edge tiles included), warps per CTA (the warp tiles that cover
    a CTA tile), MMA instructions per warp per CTA K step, the K steps of the mainloop, and the total MMAs issued.

    >>> gemm_decomposition(256, 256, 64)["mma_per_warp_per_kstep"]
    64
    """
    _positive(m=m, n=n, k=k)
    for label, shape in (("cta", cta), ("warp", warp), ("instruction", instruction)):
        if len(shape) != 3:
            raise ValueError(f"{label}={shape!r}: give three extents (M, N, K), e.g. {label}=(128, 128, 32)")
        _positive(**{f"{label}[{i}]": v for i, v in enumerate(shape)})
    for i, mode in enumerate("MNK"):
        if cta[i] % warp[i] or warp[i] % instruction[i]:
            raise ValueError(f"{mode} extents cta={cta[i]}, warp={warp[i]}, instruction={instruction[i]}: each level "
                             f"must divide the one above it; pick a warp {mode} that divides {cta[i]}")
    ctas = math.ceil(m / cta[0]) * math.ceil(n / cta[1])
    warps = (cta[0] // warp[0]) * (cta[1] // warp[1])
    per_warp = (warp[0] // instruction[0]) * (warp[1] // instruction[1]) * (cta[2] // instruction[2])
    ksteps = math.ceil(k / cta[2])
    return {"ctas": ctas, "warps_per_cta": warps, "threads_per_cta": 32 * warps, "mma_per_warp_per_kstep": per_warp,
            "k_steps": ksteps, "total_mma": ctas * warps * per_warp * ksteps}
