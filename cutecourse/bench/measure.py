"""Two measurements for the roofline, on the GPU this process sees: device copy bandwidth and torch.matmul TFLOP/s.

Timing uses CUDA events after a warm-up (`cutecourse.bench.median_ms`) and reports the median of `reps` runs;
lesson 1's ``%%gpu`` cell compares them with the datasheet row `cutecourse.hw.specs.spec_for` finds. torch is
imported on call, so ``import cutecourse.bench`` stays light.
"""

from __future__ import annotations

from cutecourse.bench import median_ms


def copy_bandwidth_tbs(megabytes: int = 1024, reps: int = 20) -> float:
    """Device-to-device copy bandwidth in TB/s: bytes read + bytes written, per second. Use far more than L2."""
    if megabytes < 64:
        raise ValueError(f"megabytes={megabytes}: use at least 64 so the copy does not fit in L2 (e.g. 1024)")
    import torch

    src = torch.empty(megabytes * 2**20, dtype=torch.uint8, device="cuda")
    dst = torch.empty_like(src)
    ms = median_ms(lambda _: dst.copy_(src), reps)
    return 2 * src.numel() / (ms * 1e-3) / 1e12


def matmul_tflops(n: int = 8192, dtype: str = "float16", reps: int = 20) -> float:
    """TFLOP/s of torch.matmul on two random n×n matrices of `dtype` ('float16', 'bfloat16', 'float32')."""
    if n < 256:
        raise ValueError(f"n={n}: use n >= 256 so the GEMM fills the GPU (e.g. 8192)")
    import torch

    if dtype not in ("float16", "bfloat16", "float32"):
        raise ValueError(f"dtype={dtype!r}: use 'float16', 'bfloat16' or 'float32'")
    a = torch.randn(n, n, device="cuda", dtype=getattr(torch, dtype))
    b, c = torch.randn_like(a), torch.empty_like(a)
    ms = median_ms(lambda _: torch.matmul(a, b, out=c), reps)
    return 2 * n**3 / (ms * 1e-3) / 1e12
