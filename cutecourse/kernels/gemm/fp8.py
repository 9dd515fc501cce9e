"""fp8 operands for the Hopper steps: per-tensor scaling in and out.

An 8-bit float holds a narrow range (e4m3: ±448, e5m2: ±57344) with 3 or 2 mantissa bits, so a tensor is stored as
``q = x / scale`` rounded to fp8, with one fp32 ``scale = amax(|x|) / max`` per tensor that maps its largest value to
the format's largest. The GEMM then multiplies the fp8 values and folds both scales into the epilogue's alpha:
``(sa · qa) @ (sb · qb) = sa · sb · (qa @ qb)``.

    >>> import torch
    >>> q, scale = quantize(torch.tensor([[-896.0, 1.0]]), torch.float8_e4m3fn)
    >>> q.float().tolist(), scale
    ([[-448.0, 0.5]], 2.0)
"""

from __future__ import annotations

from typing import Any

import torch

DTYPES = (torch.float8_e4m3fn, torch.float8_e5m2)


def quantize(x: Any, dtype: Any = torch.float8_e4m3fn) -> tuple[torch.Tensor, float]:
    """`x` as fp8 with a per-tensor scale: (q, scale), ``x ≈ q.float() * scale``. The scale maps max|x| to the
    format's largest finite value, so nothing saturates."""
    if not isinstance(x, torch.Tensor) or not x.is_floating_point():
        raise ValueError(f"x must be a floating-point torch.Tensor, got {type(x).__name__}"
                         f"{'' if not isinstance(x, torch.Tensor) else ' of ' + str(x.dtype)}: x = x.float()")
    if dtype not in DTYPES:
        raise ValueError(f"dtype={dtype}: pick torch.float8_e4m3fn (more precision, ±448) or torch.float8_e5m2 "
                         "(more range, ±57344)")
    amax = float(x.detach().abs().max()) if x.numel() else 0.0
    if amax == 0.0 or amax != amax or amax == float("inf"):
        raise ValueError(f"x has max|x| = {amax}: a per-tensor scale needs a finite, nonzero largest value")
    scale = amax / torch.finfo(dtype).max
    return (x.float() / scale).to(dtype), scale


def dequantize(q: torch.Tensor, scale: float) -> torch.Tensor:
    """The float64 values a quantized tensor stands for: ``q · scale`` (what the references multiply)."""
    return q.double() * scale
