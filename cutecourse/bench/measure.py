"""Two measurements for the roofline, on the GPU this process sees: device copy bandwidth and torch.matmul TFLOP/s.

Timing uses CUDA events after a warm-up (`cutecourse.bench.median_ms`) and reports the median of `reps` runs;
lesson 1's ``%%gpu`` cell compares them with the datasheet row `spec_for` finds (`cutecourse.hw.specs`). torch is
imported on call, so ``import cutecourse.bench`` stays light.
"""

from __future__ import annotations

import re

from cutecourse.bench import median_ms
from cutecourse.hw.specs import SPECS, GPUSpec


def spec_for(device_name: str) -> GPUSpec | None:
    """The datasheet entry for a device name as torch reports it (e.g. 'NVIDIA H100 80GB HBM3'), or None.

    Every word of the entry's name but its form factor must be a whole word of the device name, so an RTX 3090 is
    not an RTX 4090 nor an L40S an L4. The table's rows are the SXM parts (or the only form a GPU comes in), so a
    device named PCIe or NVL, which runs at other clocks and bandwidths, has no row.

    >>> spec_for("NVIDIA H200").name, spec_for("Tesla T4").name, spec_for("NVIDIA GeForce RTX 4090").name
    ('H200', 'T4', 'RTX 4090')
    >>> spec_for("NVIDIA GeForce RTX 3090"), spec_for("NVIDIA L40S"), spec_for("NVIDIA H100 PCIe")
    (None, None, None)
    """
    words = set(re.split(r"[^0-9A-Z]+", device_name.upper()))
    if words & {"PCIE", "NVL"}:
        return None
    for name, spec in SPECS.items():
        if all(w in words for w in name.upper().split() if not w.startswith("SXM")):
            return spec
    return None


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
