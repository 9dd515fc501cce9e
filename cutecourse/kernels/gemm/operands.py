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

C is row-major. `cutecourse.kernels.gemm.device.tensors` writes these layouts out inside ``@cute.jit``.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

import torch

from cutecourse.kernels import launch

AB_DTYPES = ("float16", "bfloat16")
#: fp8 operands, which the Hopper TMA steps (9 and 10) also take: wgmma reads 8-bit operands K-major only.
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


def _majors(name: str, t: Any, contiguous: str, transposed: str, how: str) -> list[str]:
    """The majors `t`'s strides allow: one, or both when a dimension is 1 (torch ignores the stride of such a mode)."""
    majors = [major for major, ok in ((contiguous, t.is_contiguous()), (transposed, t.t().is_contiguous())) if ok]
    if not majors:
        raise ValueError(f"{name} has shape {tuple(t.shape)} and strides {t.stride()}: neither row- nor column-major. "
                         f"Pass {name}.contiguous() ({how})")
    return majors


def traits(a: Any, b: Any, c: Any, *, step: str, vector: bool, fp8: bool = False) -> Operands:
    """The dtypes, shapes, majors and alignment of ``c = a @ b`` for `step`, checked on any device (CPU tensors
    too: compiling without a GPU goes through here).

    `vector`: the step moves 16-byte vectors, so each operand's contiguous extent must hold whole vectors and its base
    must be 16-byte aligned. `fp8`: the step also takes fp8 operands (K-major both).
    """
    for name, t in (("a", a), ("b", b), ("c", c)):
        if not isinstance(t, torch.Tensor):
            raise ValueError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
        if t.dim() != 2:
            raise ValueError(f"{name} must be 2-D, got shape {tuple(t.shape)}")
        if t.numel() >= 2**31:
            raise ValueError(f"{name} has {t.numel()} elements, 2**31 or more; split the GEMM (32-bit indexing)")
    for name, t in (("a", a), ("b", b)):
        if launch.dtype_name(t) in FP8_DTYPES and not fp8:
            raise ValueError(f"{name} has dtype {t.dtype}; {step} takes float16 or bfloat16 operands, and fp8 ones "
                             "only steps 9 and 10 (Hopper): use gemm10_pingpong")
        if launch.dtype_name(t) not in AB_DTYPES + FP8_DTYPES:
            raise ValueError(f"{name} has dtype {t.dtype}; the GEMM steps take float16 or bfloat16 operands: "
                             f"{name} = {name}.to(torch.bfloat16)")
    if b.dtype != a.dtype:
        raise ValueError(f"b has dtype {b.dtype} but a has {a.dtype}: b = b.to({a.dtype})")
    if launch.dtype_name(c) not in C_DTYPES:
        raise ValueError(f"c has dtype {c.dtype}; pick float32, float16 or bfloat16")
    (m, k), (kb, n) = a.shape, b.shape
    if kb != k:
        raise ValueError(f"a is {tuple(a.shape)} and b is {tuple(b.shape)}: a's columns (K={k}) must equal b's rows")
    if tuple(c.shape) != (m, n):
        raise ValueError(f"c has shape {tuple(c.shape)}; a @ b is ({m}, {n}): "
                         f"c = torch.empty({m}, {n}, dtype=..., device='cuda')")
    if max(m, n) > MAX_EXTENT:
        raise ValueError(f"a @ b is ({m}, {n}); the steps launch a tile per block along M and N, and CUDA allows "
                         f"65535 blocks in a grid's y dimension: keep M and N at most {MAX_EXTENT} and split the "
                         f"GEMM, e.g. c[i:i + {MAX_EXTENT}] = a[i:i + {MAX_EXTENT}] @ b")
    if not c.is_contiguous():
        raise ValueError(f"c has strides {c.stride()}; pass a row-major output: c = torch.empty({m}, {n}, ...)")
    a_majors = _majors("a", a, "k", "m", "or a = at.t() with at a contiguous (K, M) tensor")
    b_majors = _majors("b", b, "n", "k", "or b = bt.t() with bt a contiguous (N, K) tensor")
    elems = 16 // a.element_size()
    lead = {"k": k, "m": m, "n": n}
    if vector:  # of two possible majors (a dimension of 1), take one whose contiguous extent holds whole vectors
        a_majors = sorted(a_majors, key=lambda major: lead[major] % elems != 0)
        b_majors = sorted(b_majors, key=lambda major: lead[major] % elems != 0)
    a_major, b_major = a_majors[0], b_majors[0]
    if launch.dtype_name(a) in FP8_DTYPES and (a_major, b_major) != ("k", "k"):
        if "k" not in a_majors or "k" not in b_majors:
            raise ValueError(f"a is {a_major.upper()}-major and b {b_major.upper()}-major; wgmma reads fp8 operands "
                             "K-major only: a row-major (M, K), and b = bt.t() with bt a row-major (N, K) "
                             "(bt = b.t().contiguous())")
        a_major, b_major = "k", "k"
    if vector:
        extents = (("a", a, lead[a_major], a_major.upper(), elems), ("b", b, lead[b_major], b_major.upper(), elems),
                   ("c", c, n, "N", 16 // c.element_size()))
        for name, t, extent, what, per in extents:
            if extent % per:
                raise ValueError(
                    f"{name}'s contiguous extent is {what}={extent} elements, not a multiple of {per} elements: the "
                    f"16-byte vector {step} moves. Pad {what} (torch.nn.functional.pad) or use {ANY_SHAPE_STEP}, "
                    "which takes any shape")
            if t.data_ptr() % 16:
                raise ValueError(
                    f"{name} starts {t.data_ptr() % 16} bytes past a 16-byte boundary: {step} moves 16-byte vectors, "
                    f"which must be aligned. Pass {name}.clone() (torch allocates aligned) or use {ANY_SHAPE_STEP}, "
                    "which takes any alignment")
    return Operands(launch.dtype_name(a), launch.dtype_name(c), a_major, b_major, elems if vector else 1)


@functools.cache
def capability(device: Any) -> int:
    """`device`'s compute capability as major * 10 + minor (90 for an H100 or H200), asked of the driver once."""
    major, minor = torch.cuda.get_device_capability(device)
    return major * 10 + minor


def check(a: Any, b: Any, c: Any, *, step: str, vector: bool, min_cc: int, fp8: bool = False) -> Operands:
    """`traits`, plus: all three on one GPU of compute capability `min_cc` or newer (80 or 90: the step's
    instructions do not exist before)."""
    for name, t in (("a", a), ("b", b), ("c", c)):
        if isinstance(t, torch.Tensor) and not t.is_cuda:
            raise ValueError(f"{name} is on {t.device}; move it to the GPU: {name} = {name}.cuda()")
        if isinstance(t, torch.Tensor) and t.device != a.device:
            raise ValueError(f"{name} is on {t.device} but a is on {a.device}; put all three on one GPU")
    ops = traits(a, b, c, step=step, vector=vector, fp8=fp8)
    cc = capability(a.device)
    if cc < min_cc:
        way = f"use {SM80_STEP}" if min_cc > 80 else "every GEMM step needs an sm_80+ GPU (A100, L4, H100)"
        raise ValueError(f"{step} needs sm_{min_cc} or newer (its instructions do not exist before); this GPU is "
                         f"sm_{cc}: {way}")
    return ops
