"""The GEMM steps' fused epilogue: ``D = act(alpha · acc + beta · C + bias)``, one description that every step from 5
on compiles into its kernel.

An `Epilogue` says what to fuse (an activation, a bias broadcast along N or M, an auxiliary output of the
pre-activation); the launcher adds what the call's tensors fix (`Fused`: whether C is read at all, the bias's
dtype, whether alpha scales) and compiles one kernel per combination. Inside the kernel each accumulator goes
through `element` in fp32, in registers, before it is rounded to D's dtype and stored: no extra pass over memory.

The bias is a layout, not code: a (N,) vector seen as an (M, N) tensor with strides (0, 1) (every row reads the same
N values; ``"m"``: strides (1, 0)), indexed with the accumulator's own (m, n) coordinate, so broadcasting costs
nothing beyond the load. ``beta == 0`` never reads C: the load is not even traced, so C may hold NaN.

To add an activation, add one `Activation` to `ACTIVATIONS`: its device function (a ``@cute.jit`` on one Float32)
and its torch reference. Every step, the launcher's checks and the tests pick it up.

    >>> Epilogue("gelu_tanh", bias="n")
    Epilogue(activation='gelu_tanh', bias='n', aux=False)
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import cutlass
import cutlass.cute as cute
import torch

SQRT_2_OVER_PI = math.sqrt(2 / math.pi)
GELU_CUBIC = 0.044715  # the tanh approximation's cubic term (Hendrycks & Gimpel; cuBLASLt's GELU epilogue)


@cute.jit
def _identity(x: cutlass.Float32) -> cutlass.Float32:
    return x


@cute.jit
def _relu(x: cutlass.Float32) -> cutlass.Float32:
    return cute.arch.fmax(x, cutlass.Float32(0.0))


@cute.jit
def _gelu_tanh(x: cutlass.Float32) -> cutlass.Float32:
    # 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³))) written as h + h·tanh(x·(k + k·c·x²)) with h = x/2: three multiplies,
    # two FMAs and a tanh (the formula as written is five multiplies, two adds, an FMA and the tanh, since ptxas does
    # not contract the DSL's multiplies and adds into FMAs)
    inner = x * cute.math.fma(x * x, SQRT_2_OVER_PI * GELU_CUBIC, SQRT_2_OVER_PI)
    half = 0.5 * x
    return cute.math.fma(half, cute.math.tanh(inner, fastmath=True), half)


@cute.jit
def _gelu_erf(x: cutlass.Float32) -> cutlass.Float32:
    return 0.5 * x * (1.0 + cute.math.erf(x * (1 / math.sqrt(2)), fastmath=True))


@cute.jit
def _silu(x: cutlass.Float32) -> cutlass.Float32:
    return x * cute.math.rcp(1.0 + cute.math.exp(-x, fastmath=True), fastmath=True)


@dataclass(frozen=True)
class Activation:
    """One activation: `device` runs inside kernels on one fp32 value; `reference` is the same function in torch,
    what the tests and `reference` judge with."""

    device: Callable[[Any], Any]
    reference: Callable[[torch.Tensor], torch.Tensor]


ACTIVATIONS: dict[str, Activation] = {
    "none": Activation(_identity, lambda x: x),
    "relu": Activation(_relu, torch.relu),
    "gelu_tanh": Activation(_gelu_tanh, lambda x: torch.nn.functional.gelu(x, approximate="tanh")),
    "gelu_erf": Activation(_gelu_erf, torch.nn.functional.gelu),
    "silu": Activation(_silu, torch.nn.functional.silu),
}
BIAS = ("none", "n", "m")  # no bias; one per column (torch's addmm bias, broadcast down M); one per row


@dataclass(frozen=True)
class Epilogue:
    """What a GEMM step fuses after its mainloop: ``x = alpha · acc + beta · C + bias``, stored in D's dtype as
    ``act(x)``; with ``aux=True`` x itself is stored too (the pre-activation a backward pass needs)."""

    activation: str = "none"
    bias: str = "none"  # "none", "n": a (N,) vector, one value per column; "m": an (M,) vector, one per row
    aux: bool = False

    def __post_init__(self) -> None:
        if self.activation not in ACTIVATIONS:
            raise ValueError(f"activation={self.activation!r}: pick one of {', '.join(map(repr, ACTIVATIONS))}, or "
                             "add an Activation to cutecourse.kernels.gemm.epilogue.ACTIVATIONS")
        if self.bias not in BIAS:
            raise ValueError(f"bias={self.bias!r}: pick 'none', 'n' (a vector of N, one per column, as torch's addmm "
                             "bias) or 'm' (a vector of M, one per row)")
        if not isinstance(self.aux, bool):
            raise ValueError(f"aux={self.aux!r}: True (also store the pre-activation) or False")


@dataclass(frozen=True)
class Fused:
    """The compile-time part of one call's epilogue: the `Epilogue`, and what its tensors and scalars fix."""

    epilogue: Epilogue = Epilogue()
    source: bool = False  # beta != 0: C is read (never when beta == 0)
    scaled: bool = False  # alpha != 1
    bias_dtype: str = ""  # the bias's dtype name ("" without one)

    @property
    def identity(self) -> bool:
        """Nothing to do beyond rounding the accumulators: the plain GEMM's epilogue."""
        return self.epilogue == Epilogue() and not self.source and not self.scaled


PLAIN = Fused()


def _vector_check(name: str, t: Any, length: int, what: str, d: Any) -> None:
    if not isinstance(t, torch.Tensor):
        raise ValueError(f"{name} must be a torch.Tensor of {length} values ({what}), got {type(t).__name__}")
    if t.dim() != 1 or t.shape[0] != length:
        raise ValueError(f"{name} has shape {tuple(t.shape)}; this epilogue wants ({length},), {what}: "
                         f"{name} = torch.randn({length}, dtype={d.dtype}, device='{d.device}')")
    if t.dtype not in (d.dtype, torch.float32):
        raise ValueError(f"{name} has dtype {t.dtype}; pass D's dtype ({d.dtype}) or float32: "
                         f"{name} = {name}.to({d.dtype})")
    if t.stride(0) != 1 and length > 1:
        raise ValueError(f"{name} has stride {t.stride(0)}; pass a contiguous vector: {name} = {name}.contiguous()")


def _matrix_check(name: str, t: Any, d: Any, why: str, major: str) -> None:
    if not isinstance(t, torch.Tensor):
        raise ValueError(f"{name} must be a torch.Tensor ({why}), got {type(t).__name__}")
    if tuple(t.shape) != tuple(d.shape) or t.dtype != d.dtype:
        raise ValueError(f"{name} is {tuple(t.shape)} {t.dtype}; it must match D, {tuple(d.shape)} {d.dtype}: "
                         f"{name} = torch.empty_like(d)")
    if major == "n" and not t.is_contiguous():
        raise ValueError(f"{name} has strides {t.stride()}; pass a row-major tensor: {name} = {name}.contiguous()")
    if major == "m" and not t.t().is_contiguous():
        raise ValueError(f"{name} has strides {t.stride()}; D is column-major, so pass a column-major tensor: "
                         f"{name} = {name}.t().contiguous().t()")


def plan(epilogue: Any, alpha: Any, beta: Any, c: Any, bias: Any, aux: Any, d: Any, major: str = "n") -> Fused:
    """Check one call's epilogue arguments against D (`d`, already checked; `major` is "m" where the step stores it
    column-major) and say what the kernel must do. C and aux are contiguous in D's major. Every tensor must sit on
    D's device; errors name the argument and the fix."""
    epilogue = Epilogue() if epilogue is None else epilogue
    if not isinstance(epilogue, Epilogue):
        raise ValueError(f"epilogue is a {type(epilogue).__name__}; pass an Epilogue(activation=..., bias=..., "
                         "aux=...) from cutecourse.kernels.gemm.epilogue")
    for name, value in (("alpha", alpha), ("beta", beta)):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise ValueError(f"{name}={value!r}: pass a finite Python float, e.g. {name}=1.0")
    m, n = d.shape
    if beta != 0:
        _matrix_check("c", c, d, f"beta={beta} reads it: D = alpha·acc + beta·C", major)
    if epilogue.bias == "none" and bias is not None:
        raise ValueError("bias is given but the epilogue has bias='none': Epilogue(..., bias='n') for one value per "
                         "column (N), bias='m' for one per row (M)")
    if epilogue.bias != "none":
        length, what = (n, "one per column") if epilogue.bias == "n" else (m, "one per row")
        _vector_check("bias", bias, length, what, d)
    if epilogue.aux:
        _matrix_check("aux", aux, d, "Epilogue(aux=True) stores the pre-activation there", major)
    elif aux is not None:
        raise ValueError("aux is given but the epilogue has aux=False: Epilogue(..., aux=True) stores the "
                         "pre-activation in it")
    used = [("c", c if beta != 0 else None), ("bias", bias), ("aux", aux)]
    for name, t in used:
        if t is not None and t.device != d.device:
            raise ValueError(f"{name} is on {t.device} but D is on {d.device}: {name} = {name}.to('{d.device}')")
    bias_dtype = str(bias.dtype).removeprefix("torch.") if epilogue.bias != "none" else ""
    return Fused(epilogue, source=beta != 0, scaled=alpha != 1, bias_dtype=bias_dtype)


def reference(acc: torch.Tensor, epilogue: Epilogue, alpha: float = 1.0, beta: float = 0.0, c: Any = None,
              bias: Any = None) -> tuple[torch.Tensor, torch.Tensor]:
    """What the kernels compute, in float64 on `acc`'s device (e.g. ``a.double() @ b.double()``): (D, x), x being
    the pre-activation the aux output holds. beta == 0 ignores `c`, as the kernels do."""
    x = alpha * acc.double()
    if beta != 0:
        x = x + beta * c.double()
    if epilogue.bias == "n":
        x = x + bias.double()[None, :]
    elif epilogue.bias == "m":
        x = x + bias.double()[:, None]
    return ACTIVATIONS[epilogue.activation].reference(x), x


def store(acc: torch.Tensor, fused: Fused, alpha: float, beta: float, c: Any, bias: Any, aux: Any, d: Any) -> None:
    """The epilogue computed by torch on the accumulators `acc` (on D's device) and stored in `d` (and `aux`): for a
    call no kernel fuses, K = 0 (no products: the accumulators are zeros) or operands that only step 2, which stores
    the plain product, can take (its float32 product is `acc`)."""
    x_d, x = reference(acc, fused.epilogue, alpha, beta, c, bias)
    d.copy_(x_d)
    if fused.epilogue.aux:
        aux.copy_(x)


# Inside kernels: plain functions, called while a step's ``@cute.jit`` host or kernel is traced ----------------------

def tensors(fused: Fused, pSrc: cute.Pointer, pBias: cute.Pointer, pAux: cute.Pointer, m: Any, n: Any,
            major: str = "n") -> tuple[cute.Tensor, cute.Tensor, cute.Tensor]:
    """In a host: C (the source), the bias and aux as (M, N) tensors, contiguous like D: row-major, or column-major
    where `major` is "m" (D's ``Operands.c_major``: swap-AB's Cᵀ, the transposed view of row-major tensors). The
    bias's layout broadcasts it: strides (0, 1) repeat one row of N values down M, (1, 0) one column of M values
    along N."""
    like_d = cute.make_layout((m, n), stride=(n, 1) if major == "n" else (1, m))
    bias_stride = (0, 1) if fused.epilogue.bias == "n" else (1, 0)
    return (cute.make_tensor(pSrc, like_d), cute.make_tensor(pBias, cute.make_layout((m, n), stride=bias_stride)),
            cute.make_tensor(pAux, like_d))


def transposed(fused: Fused) -> Fused:
    """`fused` for Cᵀ = Bᵀ·Aᵀ (swap-AB): the same epilogue with M and N exchanged, a bias along N becoming one along
    M and the other way round."""
    swap = {"n": "m", "m": "n", "none": "none"}
    return replace(fused, epilogue=replace(fused.epilogue, bias=swap[fused.epilogue.bias]))


def element(fused: Fused, acc: Any, coord: Any, mSrc: cute.Tensor, mBias: cute.Tensor, mAux: cute.Tensor,
            alpha: Any, beta: Any, clipped: bool = False) -> Any:
    """In a kernel: one fp32 accumulator at (m, n) = `coord` (inside the matrix) through the epilogue. The aux
    output is stored here; the caller rounds the result to D's dtype and stores it. What `fused` leaves out is not
    traced at all: without a source (beta == 0) no instruction reads C.

    `clipped`: the caller's store drops every output outside the matrix (steps 10 and 11 store D with TMA, which
    clips a box at the tensor's edge), so `coord` may lie outside it unchecked. C and the bias are then read at the
    nearest (m, n) inside, a ``min`` an index instead of a compare and a branch a value, so that no load waits
    behind a branch; only the aux store, which nothing clips, checks `coord`."""
    x = acc
    at = coord
    if clipped:
        rows, cols = mSrc.shape
        if fused.source:
            at = (cutlass.min(coord[0], rows - 1), cutlass.min(coord[1], cols - 1))
        elif fused.epilogue.bias == "n":  # the bias's layout ignores m: clamp n only
            at = (coord[0], cutlass.min(coord[1], cols - 1))
        elif fused.epilogue.bias == "m":
            at = (cutlass.min(coord[0], rows - 1), coord[1])
    if fused.scaled:
        x = alpha * x
    if fused.source:
        x = x + beta * mSrc[at].to(cutlass.Float32)
    if fused.epilogue.bias != "none":
        x = x + mBias[at].to(cutlass.Float32)
    if fused.epilogue.aux:
        if clipped:
            _store_inside(mAux, coord, x.to(mAux.element_type))
        else:
            mAux[coord] = x.to(mAux.element_type)
    return ACTIVATIONS[fused.epilogue.activation].device(x)


@cute.jit
def _store_inside(t: cute.Tensor, coord: Any, value: Any) -> None:
    """``t[coord] = value`` where `coord` lies inside `t`."""
    if cute.elem_less(coord, t.shape):
        t[coord] = value
