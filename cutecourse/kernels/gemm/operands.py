"""Launch-time validation of a GEMM step's torch tensors: dtypes, shapes, majors, alignment and the GPU's arch, each
error naming the fix; `Operands`, what the checks found (the compile-time traits the launcher keys its cache by).

The steps compute ``c = a @ b`` in torch's terms: ``a`` is (M, K), ``b`` is (K, N), ``c`` is (M, N). Inside the
kernels they follow CuTe's convention instead: A is (M, K), B is (N, K), C is (M, N), so both operands are indexed
by K in their second mode and an MMA reads them alike. Each operand may be stored either way:

===========  =====================================  ==========================================
operand      K-major (K contiguous)                 MN-major (M or N contiguous)
===========  =====================================  ==========================================
``a`` (M,K)  ``a.is_contiguous()``: (M,K):(K,1)     ``a = at.t()``, ``at`` (K,M): (M,K):(1,M)
``b`` (K,N)  ``b = bt.t()``, ``bt`` (N,K): (N,K):(K,1)  ``b.is_contiguous()``: (N,K):(1,N)
===========  =====================================  ==========================================

C is row-major, except where a step stores a column-major C too (step 11, ``column_major_out``: what its swap-AB
runs into, ``Cᵀ = Bᵀ·Aᵀ`` stored as the transposed view of a row-major C). Any leading dimension at least the
operand's extent is taken as it is (``a = wide[:, :K]``, strides (K + 1, 1), is K-major with ``lda = K + 1``):
the kernels are launched with each operand's leading dimension (`leading_dims`), and
`cutecourse.kernels.gemm.device.tensors` writes these layouts out inside ``@cute.jit``. A step that moves 16-byte
vectors also needs each leading dimension a whole number of vectors and each start 16-byte
aligned; where they are not, `cutecourse.gemm` runs a step that does not (step 2).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

import torch

from cutecourse.kernels import launch

AB_DTYPES = ("float16", "bfloat16")
#: fp8 operands, which steps 10 and 11 (clusters, the TMA store) also take: wgmma reads 8-bit operands K-major only.
FP8_DTYPES = ("float8_e4m3fn", "float8_e5m2")
#: The step that takes any shape and alignment (scalar accesses), and the last step that runs on sm_80: where the
#: checks send a call that a vector step or a Hopper step refuses.
ANY_SHAPE_STEP = "gemm02_smem"
SM80_STEP = "gemm05_swizzle"
#: The largest M or N any step launches: 65535 (CUDA's grid y limit) blocks of step 1's 16 columns (its grid's y
#: dimension counts N's tiles; every other step's grid counts fewer blocks along y).
MAX_EXTENT = 65535 * 16
C_DTYPES = ("float32", "float16", "bfloat16")


@dataclass(frozen=True)
class Operands:
    """The compile-time traits of one call (the cache key with a step's Config) and its extents (runtime)."""

    ab: str  # "float16" or "bfloat16"
    c: str  # "float32", "float16" or "bfloat16"
    a_major: str  # "k" or "m"
    b_major: str  # "k" or "n"
    vector: int = 1  # elements per access the step may assume the leading dimensions are divisible by
    c_major: str = "n"  # "n": C row-major (N contiguous); "m": column-major (M contiguous), where the step takes it


def _lead(t: Any, rows_contiguous: bool, elems: int) -> int | None:
    """The leading dimension of `t` (rows, cols) stored row-major (`rows_contiguous`: each row contiguous) or
    column-major, or None where its strides are neither with a leading dimension at least the extent. A mode of one
    element has no stride that matters (torch gives it any): then the leading dimension is never used to address, and
    is the extent rounded up to whole 16-byte vectors of `elems` elements."""
    (rows, cols), (row_stride, col_stride) = t.shape, t.stride()
    outer, inner, outer_stride, inner_stride = (rows, cols, row_stride, col_stride) if rows_contiguous else (
        cols, rows, col_stride, row_stride)
    if inner > 1 and inner_stride != 1:
        return None
    if outer <= 1:
        return max(-(-inner // elems) * elems, elems)
    return outer_stride if outer_stride >= max(inner, 1) else None


def _majors(name: str, t: Any, contiguous: str, transposed: str, elems: int) -> dict[str, int]:
    """The majors `t`'s strides allow, each with its leading dimension: one, or both when a dimension is 1."""
    majors = {major: ld for major, ld in ((contiguous, _lead(t, True, elems)), (transposed, _lead(t, False, elems)))
              if ld is not None}
    if not majors:
        raise ValueError(f"{name} has shape {tuple(t.shape)} and strides {t.stride()}: neither row- nor column-major "
                         f"with a leading dimension at least its extent (a stride of 0 or a view that steps over "
                         f"elements). Pass {name}.contiguous()")
    return majors


def traits(a: Any, b: Any, c: Any, *, step: str, vector: bool, fp8: bool = False, out: str = "c",
           column_major_out: bool = False) -> Operands:
    """The dtypes, shapes, majors and alignment of ``c = a @ b`` for `step`, checked on any device (CPU tensors
    too: compiling without a GPU goes through here).

    `vector`: the step moves 16-byte vectors, so each operand's contiguous extent must hold whole vectors and its base
    must be 16-byte aligned. `fp8`: the step also takes fp8 operands (K-major both). `out`: what the caller names
    `c` (``d`` in a step's launcher, ``out`` in cutecourse.gemm), for the errors. `column_major_out`: the step also
    stores a column-major `c` (a row-major one is taken as row-major wherever its strides allow).
    """
    for name, t in (("a", a), ("b", b), (out, c)):
        tensor_check(name, t)
        if t.dim() != 2:
            raise ValueError(f"{name} must be 2-D, got shape {tuple(t.shape)}")
        if t.numel() >= 2**31:
            raise ValueError(f"{name} has {t.numel()} elements, 2**31 or more; split the GEMM (32-bit indexing)")
    for name, t in (("a", a), ("b", b)):
        if launch.dtype_name(t) in FP8_DTYPES and not fp8:
            raise ValueError(f"{name} has dtype {t.dtype}; {step} takes float16 or bfloat16 operands, and fp8 ones "
                             "only steps 10 and 11 (Hopper): use gemm11_pingpong")
        if launch.dtype_name(t) not in AB_DTYPES + FP8_DTYPES:
            raise ValueError(f"{name} has dtype {t.dtype}; the GEMM steps take float16 or bfloat16 operands: "
                             f"{name} = {name}.to(torch.bfloat16)")
    if b.dtype != a.dtype:
        raise ValueError(f"b has dtype {b.dtype} but a has {a.dtype}: b = b.to({a.dtype})")
    if launch.dtype_name(c) not in C_DTYPES:
        raise ValueError(f"{out} has dtype {c.dtype}; pick float32, float16 or bfloat16")
    (m, k), (kb, n) = a.shape, b.shape
    if kb != k:
        raise ValueError(f"a is {tuple(a.shape)} and b is {tuple(b.shape)}: a's columns (K={k}) must equal b's rows")
    if tuple(c.shape) != (m, n):
        raise ValueError(f"{out} has shape {tuple(c.shape)}; a @ b is ({m}, {n}): "
                         f"{out} = torch.empty({m}, {n}, dtype=..., device='cuda')")
    if max(m, n) > MAX_EXTENT:
        raise ValueError(f"a @ b is ({m}, {n}); the steps launch a tile per block along M and N, and CUDA allows "
                         f"65535 blocks in a grid's y dimension: keep M and N at most {MAX_EXTENT} and split the "
                         f"GEMM, e.g. c[i:i + {MAX_EXTENT}] = a[i:i + {MAX_EXTENT}] @ b")
    elems = 16 // a.element_size()
    c_major, c_lead = _c_major(c, column_major_out, vector)
    if c_lead is None:
        either = " or a column-major one (out = torch.empty(N, M, ...).t())" if column_major_out else ""
        raise ValueError(f"{out} has shape {tuple(c.shape)} and strides {c.stride()}; pass a row-major output (its "
                         f"leading dimension at least N){either}: {out} = torch.empty({m}, {n}, ...)")
    a_majors = _majors("a", a, "k", "m", elems)
    b_majors = _majors("b", b, "n", "k", elems)
    lead = {"k": k, "m": m, "n": n}
    if vector:  # of two possible majors (a dimension of 1), take one whose extent and leading dimension hold vectors
        a_majors = dict(sorted(a_majors.items(), key=lambda kv: (lead[kv[0]] % elems != 0, kv[1] % elems != 0)))
        b_majors = dict(sorted(b_majors.items(), key=lambda kv: (lead[kv[0]] % elems != 0, kv[1] % elems != 0)))
    a_major, b_major = next(iter(a_majors)), next(iter(b_majors))
    if launch.dtype_name(a) in FP8_DTYPES and (a_major, b_major) != ("k", "k"):
        if "k" not in a_majors or "k" not in b_majors:
            raise ValueError(f"a is {a_major.upper()}-major and b {b_major.upper()}-major; wgmma reads fp8 operands "
                             "K-major only: a row-major (M, K), and b = bt.t() with bt a row-major (N, K) "
                             "(bt = b.t().contiguous())")
        a_major, b_major = "k", "k"
    overlap("a", a, out, c)
    overlap("b", b, out, c)
    if vector:
        extents = (("a", a, lead[a_major], a_majors[a_major], a_major.upper(), elems),
                   ("b", b, lead[b_major], b_majors[b_major], b_major.upper(), elems),
                   (out, c, lead[c_major], c_lead, c_major.upper(), 16 // c.element_size()))
        for name, t, extent, ld, what, per in extents:
            if extent % per:
                raise ValueError(
                    f"{name}'s contiguous extent is {what}={extent} elements, not a multiple of {per} elements: the "
                    f"16-byte vector {step} moves. Pad {what} (torch.nn.functional.pad) or use {ANY_SHAPE_STEP}, "
                    "which takes any shape")
            if ld % per:
                raise ValueError(
                    f"{name}'s leading dimension is {ld} elements, not a multiple of {per} elements: its rows (or "
                    f"columns) do not start on the 16-byte boundaries that {step}'s vectors need. Pass "
                    f"{name}.contiguous() or use {ANY_SHAPE_STEP}, which takes any leading dimension")
            if t.data_ptr() % 16:
                raise ValueError(
                    f"{name} starts {t.data_ptr() % 16} bytes past a 16-byte boundary: {step} moves 16-byte vectors, "
                    f"which must be aligned. Pass {name}.clone() (torch allocates aligned) or use {ANY_SHAPE_STEP}, "
                    "which takes any alignment")
    return Operands(launch.dtype_name(a), launch.dtype_name(c), a_major, b_major, elems if vector else 1, c_major)


def _c_major(c: Any, column_major: bool, vector: bool) -> tuple[str, int | None]:
    """(major, leading dimension) of the output `c`: row-major ("n") wherever its strides allow, else column-major
    ("m") where the step stores that (`column_major`); (row, None) where neither. With `vector`, of two possible
    majors (a dimension of 1) one whose extent and leading dimension hold whole 16-byte vectors."""
    per = 16 // c.element_size()
    majors = {"n": _lead(c, True, per)}
    if column_major:
        majors["m"] = _lead(c, False, per)
    found = [(major, ld) for major, ld in majors.items() if ld is not None]
    if vector:
        extent = dict(zip("mn", c.shape))
        found.sort(key=lambda kv: (extent[kv[0]] % per != 0, kv[1] % per != 0))
    return found[0] if found else ("n", None)


def tensor_check(name: str, t: Any) -> None:
    """`t`, the argument `name`, is a torch.Tensor; else a ValueError naming it, what it is and the fix."""
    if not isinstance(t, torch.Tensor):
        raise ValueError(f"{name} is {t!r:.60} ({type(t).__name__}); pass a 2-D torch.Tensor on the GPU, e.g. "
                         f"{name} = torch.randn(rows, cols, dtype=torch.bfloat16, device='cuda')")


def _rows(t: Any) -> tuple[str, int, int]:
    """("rows" or "columns", pitch, width) of a row- or column-major matrix: the bytes between its rows (columns) and
    the bytes each covers; ("", 0, 0) for any other strides."""
    (rows, cols), (row_stride, col_stride) = t.shape, t.stride()
    if col_stride == 1 and rows > 1:
        return "rows", row_stride * t.element_size(), cols * t.element_size()
    if row_stride == 1 and cols > 1:
        return "columns", col_stride * t.element_size(), rows * t.element_size()
    return "", 0, 0


def overlap(x_name: str, x: Any, y_name: str, y: Any) -> None:
    """A ValueError where the output `y` shares memory with the input `x`: the kernel would read what it has already
    overwritten (torch refuses such an ``out=`` too). Their byte ranges meet on one device, and unless both are
    slices of one padded matrix (the same pitch between rows) whose columns are apart, they share bytes."""
    if x.numel() == 0 or y.numel() == 0 or x.device != y.device or x.device.type == "meta":
        return

    def span(t: Any) -> tuple[int, int]:
        last = sum((size - 1) * stride for size, stride in zip(t.shape, t.stride()))
        return t.data_ptr(), t.data_ptr() + (last + 1) * t.element_size()

    (x0, x1), (y0, y1) = span(x), span(y)
    if x1 <= y0 or y1 <= x0:
        return
    (kind, pitch, x_width), (y_kind, y_pitch, y_width) = _rows(x), _rows(y)
    side_by_side = kind and (kind, pitch) == (y_kind, y_pitch)
    if side_by_side and (y0 - x0) % pitch >= x_width and (x0 - y0) % pitch >= y_width:
        return  # side by side in the rows of one wider matrix, e.g. x = wide[:, :K] and y = wide[:, K:]
    raise ValueError(f"{y_name} (bytes {y0:#x}-{y1:#x}) overlaps the input {x_name} (bytes {x0:#x}-{x1:#x}): the "
                     f"kernel would read what it has already written. Pass an output of its own: {y_name} = "
                     f"torch.empty({', '.join(map(str, y.shape))}, dtype={y.dtype}, device='{y.device}')")


def leading_dims(ops: Operands, a: Any, b: Any, c: Any) -> tuple[int, int, int]:
    """The leading dimensions (lda, ldb, ldc) the kernels are launched with, for the majors `traits` chose: the
    stride between a's rows (K-major) or columns (M-major), b's columns (K-major) or rows (N-major), c's rows (or
    columns: column-major)."""
    elems = 16 // a.element_size()
    return (_lead(a, ops.a_major == "k", elems), _lead(b, ops.b_major == "n", elems),
            _lead(c, ops.c_major == "n", 16 // c.element_size()))


@functools.cache
def capability(device: Any) -> int:
    """`device`'s compute capability as major * 10 + minor (90 for an H100 or H200), asked of the driver once."""
    major, minor = torch.cuda.get_device_capability(device)
    return major * 10 + minor


def check(a: Any, b: Any, c: Any, *, step: str, vector: bool, min_cc: int, fp8: bool = False, out: str = "c",
          column_major_out: bool = False) -> Operands:
    """`traits`, plus: all three on one GPU of compute capability `min_cc` or newer (80 or 90: the step's
    instructions do not exist before)."""
    for name, t in (("a", a), ("b", b), (out, c)):
        tensor_check(name, t)
    for name, t in (("a", a), ("b", b), (out, c)):
        if not t.is_cuda:
            raise ValueError(f"{name} is on {t.device}; move it to the GPU: {name} = {name}.cuda()")
        if t.device != a.device:
            raise ValueError(f"{name} is on {t.device} but a is on {a.device}; put all three on one GPU")
    ops = traits(a, b, c, step=step, vector=vector, fp8=fp8, out=out, column_major_out=column_major_out)
    cc = capability(a.device)
    if cc < min_cc:
        way = f"use {SM80_STEP}" if min_cc > 80 else "every GEMM step needs an sm_80+ GPU (A100, L4, H100)"
        raise ValueError(f"{step} needs sm_{min_cc} or newer (its instructions do not exist before); this GPU is "
                         f"sm_{cc}: {way}")
    return ops
