"""How close a GEMM's output must be to ``a @ b`` computed in float64 from the same inputs: `BOUNDS` per C dtype,
`error` (the measures), `within_bounds` (the verdict); and for a fused epilogue or fp8 operands, where the reference is
act(x) of a pre-activation x, `within_epilogue_bounds`. The GPU tests, the lesson checks, the tuner, the winners race
and the benchmarks judge every GEMM by these.
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


#: activation -> its Lipschitz constant: an error e in the pre-activation x moves act(x) by at most L·e (the largest
#: slope: both GELUs' 1.129 at x ≈ 1.41, SiLU's 1.0998 at x ≈ 2.40).
LIPSCHITZ = {"none": 1.0, "relu": 1.0, "gelu_tanh": 1.13, "gelu_erf": 1.13, "silu": 1.10}
#: How far fast fp32 math may move act(x), relative to |x|: tanh.approx.f32 errs by about 2^-11 of its result at
#: most (PTX ISA), and GELU and SiLU put a 1/2 in front of their tanh, erf or logistic: x/2 · (1 + f(x)). The loosest
#: such approximation sets the allowance of every transcendental activation; none and ReLU are exact.
FAST_MATH = {"none": 0.0, "relu": 0.0, "gelu_tanh": 2**-12, "gelu_erf": 2**-12, "silu": 2**-12}
#: The dtype whose bounds judge an fp8 GEMM's D, whatever D's dtype: Hopper's fp8 wgmma keeps about 14 bits of its
#: running sums (DeepSeek-V3 report, section 3.3.2), so at K = 4096 the error reaches 2e-3, past fp16's bound.
FP8_PRECISION = "bfloat16"


def within_epilogue_bounds(d: Any, d_ref: Any, x_ref: Any, activation: str = "none", precision: str | None = None
                           ) -> str | None:
    """None when `d` is the float64 reference `d_ref` = act(`x_ref`) within bounds, else what is wrong.

    Errors are measured on the scale of the pre-activation x, the scale they come with (ReLU zeroes half of D, not
    its errors): ‖d − d_ref‖ / ‖x_ref‖ ≤ L·b₁ + f, and max(|d − d_ref| − f·|x_ref|) / rms(x_ref) ≤ L·b₂, with (b₁, b₂)
    `BOUNDS` of d's dtype (or of the dtype `precision` names), L the activation's `LIPSCHITZ` constant
    (an error of x, amplified; |act(x)| ≤ |x|, so d's own rounding stays inside b) and f its `FAST_MATH` allowance.
    NaN in d is named: an output never written, or C read though beta is 0 (its NaN times 0)."""
    frobenius, elementwise = BOUNDS[precision or launch.dtype_name(d)]
    lipschitz, fast = LIPSCHITZ[activation], FAST_MATH[activation]
    got = d.double()
    ref = d_ref.double()
    x = x_ref.double()
    nans = int(got.isnan().sum())
    if nans:
        return f"{nans} of {d.numel()} outputs are NaN (never written, or C read with beta = 0)"
    diff = (got - ref).abs()
    scale = max(float(x.norm()), 1e-300)
    rms = max(scale / max(x.numel(), 1) ** 0.5, 1e-300)
    rel = float(diff.norm()) / scale
    worst = float((diff - fast * x.abs()).clamp(min=0).max()) / rms if diff.numel() else 0.0
    if rel > lipschitz * frobenius + fast or worst > lipschitz * elementwise:
        return (f"relative error {rel:.2e} (bound {lipschitz * frobenius + fast:.1e}), worst element "
                f"{worst:.2e}·rms (bound {lipschitz * elementwise:.1e}), against the pre-activation's scale")
    return None
