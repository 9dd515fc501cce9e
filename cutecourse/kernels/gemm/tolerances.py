"""How close a GEMM's output must be to ``a @ b`` computed in float64 from the same inputs: `BOUNDS` per C dtype,
`error` (the measures), `within_bounds` (the verdict). The GPU tests, the lesson checks, the tuner and the benchmarks
judge every GEMM by these.
"""

from __future__ import annotations

from typing import Any

from cutecourse.kernels import launch


#: C dtype -> (bound on ‖c − ref‖/‖ref‖, bound on max|c − ref| / rms(ref)): fp32 accumulation over K ≤ 4096 stays
#: far inside the fp32 bounds; fp16 and bf16 C add one rounding (2^-11, 2^-8 relative) per element.
BOUNDS = {"float32": (1e-4, 1e-3), "float16": (2e-3, 8e-3), "bfloat16": (1e-2, 6e-2)}


def error(c: Any, a: Any, b: Any) -> tuple[float, float, int]:
    """How far `c` is from ``a @ b`` computed in float64 from the same (rounded) inputs: the relative Frobenius
    error, the largest elementwise error over the reference's RMS, and the number of NaN (never written) outputs."""

    ref = a.double() @ b.double()
    got = c.double()
    unwritten = int(got.isnan().sum())
    diff = (got - ref).nan_to_num(nan=float("inf"))
    scale = max(float(ref.norm()), 1e-300)
    rms = max(scale / max(ref.numel(), 1) ** 0.5, 1e-300)
    return float(diff.norm()) / scale, float(diff.abs().max()) / rms if diff.numel() else 0.0, unwritten


def within_bounds(c: Any, a: Any, b: Any) -> str | None:
    """None when `c` is ``a @ b`` within `BOUNDS` for its dtype, else what is wrong (for assertion messages)."""
    rel, worst, unwritten = error(c, a, b)
    frobenius, elementwise = BOUNDS[launch.dtype_name(c)]
    if unwritten:
        return f"{unwritten} of {c.numel()} outputs never written (still NaN)"
    if rel > frobenius or worst > elementwise:
        return (f"relative error {rel:.2e} (bound {frobenius:.0e}), "
                f"worst element {worst:.2e}·rms (bound {elementwise:.0e})")
    return None
