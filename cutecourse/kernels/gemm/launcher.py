"""What every GEMM step shares: the operand checks, the pointers the compiled kernels take, the layouts built from
them inside ``@cute.jit``, and a compile cache whose hits cost a few microseconds.

The steps compute ``c = a @ b`` in torch's terms: ``a`` is (M, K), ``b`` is (K, N), ``c`` is (M, N). Inside the
kernels they follow CuTe's convention instead: A is (M, K), B is (N, K), C is (M, N), so both operands are indexed
by K in their second mode and an MMA reads them alike. Each operand may be stored either way:

===========  =====================================  ==========================================
operand      K-major (K contiguous)                 MN-major (M or N contiguous)
===========  =====================================  ==========================================
``a`` (M,K)  ``a.is_contiguous()``: (M,K):(K,1)     ``a = at.t()``, ``at`` (K,M): (M,K):(1,M)
``b`` (K,N)  ``b = bt.t()``, ``bt`` (N,K): (N,K):(K,1)  ``b.is_contiguous()``: (N,K):(1,N)
===========  =====================================  ==========================================

C is row-major. The compiled kernels take raw pointers and M, N, K, not DLPack tensors: building three pointers
costs about 4 µs where three DLPack conversions cost about 30 µs, and the layouts above are then written out in the
host code, where a learner can read them.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import cutlass
import cutlass.cute as cute
import torch
from cutlass.cute.runtime import make_ptr

from cutecourse.kernels import epilogue, launch

GMEM = cute.AddressSpace.gmem

AB_DTYPES = ("float16", "bfloat16")
#: fp8 operands, which the Hopper TMA steps (9 and 10) also take: wgmma reads 8-bit operands K-major only.
FP8_DTYPES = ("float8_e4m3fn", "float8_e5m2")
#: The step that takes any shape and alignment (scalar accesses), and the last step that runs on sm_80: where the
#: checks send a call that a vector step or a Hopper step refuses.
ANY_SHAPE_STEP, SM80_STEP = "gemm02_smem", "gemm05_swizzle"
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


_capability: dict[Any, int] = {}


def check(a: Any, b: Any, c: Any, *, step: str, vector: bool, min_cc: int, fp8: bool = False) -> Operands:
    """`traits`, plus: all three on one GPU of compute capability `min_cc` or newer (80 or 90: the step's
    instructions do not exist before)."""
    for name, t in (("a", a), ("b", b), ("c", c)):
        if isinstance(t, torch.Tensor) and not t.is_cuda:
            raise ValueError(f"{name} is on {t.device}; move it to the GPU: {name} = {name}.cuda()")
        if isinstance(t, torch.Tensor) and t.device != a.device:
            raise ValueError(f"{name} is on {t.device} but a is on {a.device}; put all three on one GPU")
    ops = traits(a, b, c, step=step, vector=vector, fp8=fp8)
    if a.device not in _capability:
        major, minor = torch.cuda.get_device_capability(a.device)
        _capability[a.device] = major * 10 + minor
    cc = _capability[a.device]
    if cc < min_cc:
        way = f"use {SM80_STEP}" if min_cc > 80 else "every GEMM step needs an sm_80+ GPU (A100, L4, H100)"
        raise ValueError(f"{step} needs sm_{min_cc} or newer (its instructions do not exist before); this GPU is "
                         f"sm_{cc}: {way}")
    return ops


_DTYPES = {"float32": cutlass.Float32, "float16": cutlass.Float16, "bfloat16": cutlass.BFloat16,
           "float8_e4m3fn": cutlass.Float8E4M3FN, "float8_e5m2": cutlass.Float8E5M2}


def dtype(name: str) -> Any:
    """The cutlass type of a dtype name ("bfloat16" -> cutlass.BFloat16)."""
    return _DTYPES[name]


def pointers(ops: Operands, a: Any, b: Any, c: Any) -> tuple[Any, Any, Any]:
    """Global-memory pointers to the three operands' first elements, each promised 16-byte aligned when the step
    vectorizes (the checks above made sure)."""
    ab, cd = dtype(ops.ab), dtype(ops.c)
    vector = ops.vector > 1
    return (make_ptr(ab, a.data_ptr(), GMEM, assumed_align=16 if vector else a.element_size()),
            make_ptr(ab, b.data_ptr(), GMEM, assumed_align=16 if vector else b.element_size()),
            make_ptr(cd, c.data_ptr(), GMEM, assumed_align=16 if vector else c.element_size()))


def tensors(ops: Operands, pA: Any, pB: Any, pC: Any, m: Any, n: Any, k: Any) -> tuple[Any, Any, Any]:
    """Inside ``@cute.jit``: A (M, K), B (N, K) and C (M, N) as CuTe tensors over the pointers, with the strides the
    table in this module's docstring gives. Leading dimensions are promised divisible by ``ops.vector``."""
    def lead(x: Any) -> Any:
        return cute.assume(x, divby=ops.vector) if ops.vector > 1 else x

    c_vector = 16 // (dtype(ops.c).width // 8) if ops.vector > 1 else 1
    a_layout = cute.make_layout((m, k), stride=(lead(k), 1) if ops.a_major == "k" else (1, lead(m)))
    b_layout = cute.make_layout((n, k), stride=(lead(k), 1) if ops.b_major == "k" else (1, lead(n)))
    c_layout = cute.make_layout((m, n), stride=(cute.assume(n, divby=c_vector) if c_vector > 1 else n, 1))
    return cute.make_tensor(pA, a_layout), cute.make_tensor(pB, b_layout), cute.make_tensor(pC, c_layout)


@cute.jit
def cta_tiles(mA: cute.Tensor, mB: cute.Tensor, mC: cute.Tensor, tiler: cute.Tile, coord: cute.Coord):
    """Inside a kernel: the CTA at `coord` = (m-tile, n-tile, None)'s tiles of a (bm, bn, bk) `tiler`: gA (bm, bk,
    k-tiles), gB (bn, bk, k-tiles) and gC (bm, bn), then their identity twins cA, cB, cC, which hold each element's
    coordinate in the whole matrix (for predicates at the M, N and K tails)."""
    identities = [cute.make_identity_tensor(t.shape) for t in (mA, mB, mC)]
    projections = ((1, None, 1), (None, 1, 1), (1, 1, None)) * 2
    return tuple(cute.local_tile(t, tiler, coord, proj=p) for t, p in zip((mA, mB, mC, *identities), projections))


def tiled_copy_ab(atom: Any, major_is_k: bool, rows: int, tile_k: int, threads: int, vector: int = 8
                  ) -> cute.TiledCopy:
    """Host side: a tiled copy of a (rows, tile_k) tile of A or B with `atom` (universal copies or ``cp.async``) of
    `vector` elements (8 16-bit elements: 16 bytes) along the operand's contiguous mode, the threads next to each
    other along it too, so that a warp reads neighbouring addresses (whole 32-byte sectors)."""
    if major_is_k:
        lanes = tile_k // vector
        return cute.make_tiled_copy_tv(atom, cute.make_layout((threads // lanes, lanes), stride=(lanes, 1)),
                                       cute.make_layout((1, vector)))
    lanes = rows // vector
    return cute.make_tiled_copy_tv(atom, cute.make_layout((lanes, threads // lanes), stride=(1, lanes)),
                                   cute.make_layout((vector, 1)))


@cute.jit
def store_inside(acc: cute.Tensor, tCgC: cute.Tensor, tCcC: cute.Tensor, shape: cute.Shape):
    """The simplest epilogue, inside a kernel: each of this thread's accumulators `acc`, rounded to C's dtype, goes
    straight from its register to `tCgC` if its coordinate (`tCcC`, the same partition of an identity tensor) lies
    inside `shape`. One element at a time: a whole-fragment conversion (``acc.load().to(...)``) let LLVM hoist the
    conversions above a ``wgmma.wait_group``, reading accumulators the Tensor Cores were still writing."""
    for i in cutlass.range(cute.size(acc), unroll_full=True):
        if cute.elem_less(tCcC[i], shape):
            tCgC[i] = acc[i].to(tCgC.element_type)


def epilogue_pointers(fused: epilogue.Fused, ops: Operands, pD: Any, c: Any = None, bias: Any = None,
                      aux: Any = None) -> tuple[Any, Any, Any]:
    """Pointers to the epilogue's C (source), bias and aux. One the epilogue does not read or write is `pD`, D's own
    pointer (with C's dtype, which a missing bias is compiled with too): the kernel never dereferences it."""
    cd = dtype(ops.c)
    return (make_ptr(cd, c.data_ptr(), GMEM, assumed_align=c.element_size()) if fused.source else pD,
            make_ptr(dtype(fused.bias_dtype), bias.data_ptr(), GMEM, assumed_align=bias.element_size())
            if fused.bias_dtype else pD,
            make_ptr(cd, aux.data_ptr(), GMEM, assumed_align=aux.element_size()) if fused.epilogue.aux else pD)


def compile_for(host: Any, config: Any, ops: Operands, a: Any, b: Any, c: Any, stream: Any,
                options: str = "", fused: epilogue.Fused | None = None, source: Any = None, bias: Any = None,
                aux: Any = None) -> Any:
    """``cute.compile`` a step's ``host(pA, pB, pC, m, n, k, stream, ops, config)`` for these operands; a step with
    a fused epilogue (`fused` given) is ``host(pA, pB, pC, m, n, k, stream, pSrc, pBias, pAux, alpha, beta, ops,
    config, fused)``, whose C (`source`), bias and aux `epilogue_pointers` points at (no `fused`: the plain GEMM).
    Works on CPU tensors too, so every step compiles (and shows its PTX) without a GPU."""
    m, k = a.shape
    n = b.shape[1]
    pA, pB, pC = pointers(ops, a, b, c)
    head = (pA, pB, pC, cutlass.Int32(m), cutlass.Int32(n), cutlass.Int32(k), stream)
    if fused is None and "fused" in inspect.signature(host).parameters:
        fused = epilogue.PLAIN  # a step with a fused epilogue, compiled as the plain GEMM
    if fused is None:
        return cute.compile(host, *head, ops, config, options=options)
    return cute.compile(host, *head, *epilogue_pointers(fused, ops, pC, source, bias, aux), cutlass.Float32(1.0),
                        cutlass.Float32(0.0), ops, config, fused, options=options)


def _traits_of(t: Any) -> Any:
    """What of an optional epilogue tensor the launcher's cached verdict depends on."""
    return None if t is None else (t.dtype, t.device, t.shape, t.stride())


class Launcher(launch.Launcher):
    """One step's launcher: validate, compile once per (operand traits, config, epilogue), then call with raw
    pointers.

    ``gemm = Launcher(host, Config, vector=True, min_cc=80)`` in a step's module; ``gemm(a, b, d)`` or
    ``gemm(a, b, d, Config(...))``. The step's name (in error messages) is the module's. The checks' verdict is kept
    per (config, dtypes, devices, shapes, strides, alignment), so a repeated call costs that key, three pointers and
    the call: a few microseconds of host time.

    A step built with ``epilogue=True`` fuses ``D = act(alpha · acc + beta · C + bias)``:
    ``gemm(a, b, d, epilogue=Epilogue("gelu_tanh", bias="n"), bias=bias, alpha=1.0, beta=0.0, c=None, aux=None)``
    (`cutecourse.kernels.epilogue`). ``fp8=True``: it also takes fp8 operands, K-major.
    """

    def __init__(self, host: Any, config_type: Callable[..., Any], *, vector: bool, min_cc: int,
                 for_device: Callable[[Any, Any], Any] | None = None, epilogue: bool = False,
                 fp8: bool = False) -> None:
        super().__init__(self._compile, self._arguments)
        self.host, self.config_type, self.default = host, config_type, config_type()
        self.step = host.__module__.rpartition(".")[2]
        self.vector, self.min_cc, self.fp8 = vector, min_cc, fp8
        self.fuses = epilogue  # the host takes the epilogue's arguments
        self.for_device = for_device  # (config, torch device) -> the config compiled for that device
        self.plans: dict[tuple[Any, ...], tuple[Any, Operands, Any]] = {}

    def _compile(self, key: tuple[Any, ...], a: Any, b: Any, c: Any, stream: Any, **tensors: Any) -> Any:
        ops, config, fused = key
        return compile_for(self.host, config, ops, a, b, c, stream, fused=fused if self.fuses else None, **tensors)

    @staticmethod
    def _arguments(key: tuple[Any, ...], a: Any, b: Any, c: Any) -> tuple[Any, ...]:
        (m, k), n = a.shape, b.shape[1]
        return (*pointers(key[0], a, b, c), m, n, k)

    def plan(self, a: Any, b: Any, c: Any, config: Any, epilogue_: Any = None, alpha: Any = 1.0, beta: Any = 0.0,
             source: Any = None, bias: Any = None, aux: Any = None) -> tuple[Any, Operands, Any] | None:
        """Check the call, compile if needed, and return the compiled kernel, the operands' traits and the fused
        epilogue (None: nothing to launch)."""
        asked = [name for name, value in (("epilogue", epilogue_), ("c", source), ("bias", bias), ("aux", aux))
                 if value is not None] + [name for name, value, plain in (("alpha", alpha, 1), ("beta", beta, 0))
                                          if not isinstance(value, (int, float)) or value != plain]
        if not self.fuses and asked:
            raise ValueError(f"{self.step} stores the plain product, so it takes no {', '.join(asked)}: fused "
                             f"epilogues are in {SM80_STEP}, gemm09_multicast and gemm10_pingpong")
        ops = check(a, b, c, step=self.step, vector=self.vector, min_cc=self.min_cc, fp8=self.fp8)
        fused = epilogue.plan(epilogue_, alpha, beta, source, bias, aux, c)
        if c.numel() == 0:
            return None
        if a.shape[1] == 0:  # no products: D is the epilogue of zero accumulators, which torch computes
            d, x = epilogue.reference(torch.zeros(c.shape, device=c.device), fused.epilogue, alpha, beta, source, bias)
            c.copy_(d)
            if fused.epilogue.aux:
                aux.copy_(x)
            return None
        if self.for_device is not None:
            config = self.for_device(config, a.device)
        tensors = {"source": source, "bias": bias, "aux": aux} if self.fuses else {}
        return self.kernel((ops, config, fused), a, b, c, stream=launch.current_stream(), **tensors), ops, fused

    def __call__(self, a: Any, b: Any, d: Any = None, config: Any = None, *,  # type: ignore[override]
                 epilogue: Any = None, alpha: Any = 1.0, beta: Any = 0.0, c: Any = None, bias: Any = None,
                 aux: Any = None) -> Any:
        if d is None and isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) and a.dim() == b.dim() == 2:
            dtype = torch.bfloat16 if launch.dtype_name(a) in FP8_DTYPES else a.dtype
            d = torch.empty(a.shape[0], b.shape[1], dtype=dtype, device=a.device)
        config = self.default if config is None else config
        if not isinstance(config, self.config_type):
            given = f"{type(config).__module__.rpartition('.')[2]}.{type(config).__qualname__}"
            raise ValueError(f"config is a {given}; {self.step} takes its own: {self.step}.Config(...)")

        try:
            key = (config, a.dtype, b.dtype, d.dtype, a.device, b.device, d.device, a.shape, b.shape, d.shape,
                   a.stride(), b.stride(), d.stride(), a.data_ptr() % 16, b.data_ptr() % 16, d.data_ptr() % 16,
                   epilogue, alpha != 1, beta != 0, _traits_of(c), _traits_of(bias), _traits_of(aux))
            if isinstance(alpha, bool) or isinstance(beta, bool) or not math.isfinite(alpha) * math.isfinite(beta):
                key = None  # the checks say what is wrong
        except (AttributeError, TypeError):  # not tensors, or not numbers: the checks say so
            key = None
        plan = self.plans.get(key) if key is not None else None
        if plan is None:
            plan = self.plan(a, b, d, config, epilogue, alpha, beta, c, bias, aux)
            if plan is None:
                return d
            if len(self.plans) > 4096:
                self.plans.clear()
            self.plans[key] = plan
        fn, ops, fused = plan
        args = self._arguments((ops, config), a, b, d)  # pA, pB, pD, m, n, k
        stream = launch.current_stream(a.get_device())
        if self.fuses:
            fn(*args, stream, *epilogue_pointers(fused, ops, args[2], c, bias, aux), float(alpha), float(beta))
        else:
            fn(*args, stream)
        return d


def for_device(config: Any, device: Any) -> Any:
    """A persistent step's `config` with ``sms`` no larger than `device`'s SM count: a persistent grid larger than
    the GPU runs its last CTAs after the others have finished, twice as long."""
    sms = torch.cuda.get_device_properties(device).multi_processor_count
    return config if config.sms <= sms else replace(config, sms=sms)


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
