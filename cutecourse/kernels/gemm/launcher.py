"""The launcher every GEMM step is called through: check the torch tensors (`operands`), compile once per
(operand traits, Config, epilogue), remember each call's verdict (`plans`), then call with raw pointers; a compile
cache whose hits cost a few microseconds.

The compiled kernels take raw pointers and M, N, K, not DLPack tensors: the layouts are then written out in the host
code (`device.tensors`), where a learner can read them. They are compiled for TVM FFI (``--enable-tvm-ffi``, the
`apache-tvm-ffi` package) and called through its C entry point with plain ints: the tensors' ``data_ptr()``, the
extents and the stream's handle, each argument's type checked in C. On an H200 a call through it cost 4.5-5.9 µs of
host time, where the DSL's own Python call path with pointer objects cost 30-41 µs, and torch.matmul 11-14 µs
(benchmarks/RESULTS.md): on a small GEMM the host's time per call, not the kernel, was what lost to cuBLAS.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable
from dataclasses import replace
from typing import Any, NamedTuple

import cutlass
import cutlass.cute as cute
import torch
from cutlass.cute.runtime import make_ptr

from cutecourse.kernels import launch
from cutecourse.kernels.gemm import budget, device, epilogue, operands
from cutecourse.kernels.gemm.plans import Plans

GMEM = cute.AddressSpace.gmem
#: What the launcher compiles its kernels with: a TVM FFI function, called with ints (the module's docstring).
TVM_FFI = "--enable-tvm-ffi"


def pointers(ops: operands.Operands, a: Any, b: Any, c: Any) -> tuple[Any, Any, Any]:
    """Global-memory pointers to the three operands' first elements, each promised 16-byte aligned when the step
    vectorizes (the checks above made sure)."""
    ab, cd = device.dtype(ops.ab), device.dtype(ops.c)
    vector = ops.vector > 1
    return (make_ptr(ab, a.data_ptr(), GMEM, assumed_align=16 if vector else a.element_size()),
            make_ptr(ab, b.data_ptr(), GMEM, assumed_align=16 if vector else b.element_size()),
            make_ptr(cd, c.data_ptr(), GMEM, assumed_align=16 if vector else c.element_size()))


def epilogue_pointers(fused: epilogue.Fused, ops: operands.Operands, pD: Any, c: Any = None, bias: Any = None,
                      aux: Any = None) -> tuple[Any, Any, Any]:
    """Pointers to the epilogue's C (source), bias and aux. One the epilogue does not read or write is `pD`, D's own
    pointer (with C's dtype, which a missing bias is compiled with too): the kernel never dereferences it."""
    cd = device.dtype(ops.c)
    return (make_ptr(cd, c.data_ptr(), GMEM, assumed_align=c.element_size()) if fused.source else pD,
            make_ptr(device.dtype(fused.bias_dtype), bias.data_ptr(), GMEM, assumed_align=bias.element_size())
            if fused.bias_dtype else pD,
            make_ptr(cd, aux.data_ptr(), GMEM, assumed_align=aux.element_size()) if fused.epilogue.aux else pD)


def compile_for(host: Any, config: Any, ops: operands.Operands, a: Any, b: Any, c: Any, stream: Any,
                options: str = "", fused: epilogue.Fused | None = None, source: Any = None, bias: Any = None,
                aux: Any = None) -> Any:
    """``cute.compile`` a step's ``host(pA, pB, pC, m, n, k, lda, ldb, ldc, stream, ops, config)`` for these
    operands; a step with a fused epilogue (`fused` given) is ``host(pA, pB, pC, m, n, k, lda, ldb, ldc, stream,
    pSrc, pBias, pAux, alpha, beta, ops, config, fused)``, whose C (`source`), bias and aux `epilogue_pointers` points
    at (no `fused`: the plain GEMM). Works on CPU tensors too, so every step compiles (and shows its PTX) without a
    GPU."""
    head = (*pointers(ops, a, b, c), *(cutlass.Int32(x) for x in extents(ops, a, b, c)), stream)
    if fused is None and "fused" in inspect.signature(host).parameters:
        fused = epilogue.PLAIN  # a step with a fused epilogue, compiled as the plain GEMM
    if fused is None:
        return cute.compile(host, *head, ops, config, options=options)
    return cute.compile(host, *head, *epilogue_pointers(fused, ops, head[2], source, bias, aux), cutlass.Float32(1.0),
                        cutlass.Float32(0.0), ops, config, fused, options=options)


def extents(ops: operands.Operands, a: Any, b: Any, c: Any) -> tuple[int, ...]:
    """What a step's host takes after the pointers: M, N, K and the leading dimensions (lda, ldb, ldc)."""
    (m, k), n = a.shape, b.shape[1]
    return (m, n, k, *operands.leading_dims(ops, a, b, c))


def _traits_of(t: Any) -> Any:
    """What of an optional epilogue tensor the launcher's cached verdict depends on."""
    return None if t is None else (t.dtype, t.device, t.shape, t.stride())


class Plan(NamedTuple):
    """What one call's checks decided, kept for the calls like it: the compiled kernel's TVM FFI function, the fused
    epilogue, and the extents it is called with (M, N, K, lda, ldb, ldc: fixed by the shapes and strides the plan's
    key holds)."""

    fn: Any
    fused: Any
    extents: tuple[int, ...]
    swapped: bool = False  # swap-AB: the kernel computes Cᵀ = Bᵀ·Aᵀ, called with b's address first


class Launcher(launch.Launcher):
    """One step's launcher: validate, compile once per (operand traits, config, epilogue), then call with raw
    pointers.

    ``gemm = Launcher(host, Config, vector=True, min_cc=80)`` in a step's module; ``gemm(a, b, d)`` or
    ``gemm(a, b, d, Config(...))``. The step's name (in error messages) is the module's. The checks' verdict is kept
    per (config, dtypes, devices, shapes, strides, alignment), so a repeated call costs that key, three pointers and
    the call: a few microseconds of host time.

    A step built with ``epilogue=True`` fuses ``D = act(alpha · acc + beta · C + bias)``:
    ``gemm(a, b, d, epilogue=Epilogue("gelu_tanh", bias="n"), bias=bias, alpha=1.0, beta=0.0, c=None, aux=None)``
    (`cutecourse.kernels.gemm.epilogue`). ``fp8=True``: it also takes fp8 operands, K-major.
    ``column_major_out=True``: it also stores a column-major D, and runs a Config with ``swap_ab`` as Dᵀ = Bᵀ·Aᵀ: the
    checks and the call's key are those of a @ b, then the plan is made for ``(b.t(), a.t(), d.t())`` (Dᵀ is the
    transposed view of a row-major D, column-major) with the epilogue transposed (`epilogue.transposed`), and the
    kernel is called with b's address where a's goes.
    """

    def __init__(self, host: Any, config_type: Callable[..., Any], *, vector: bool, min_cc: int,
                 for_device: Callable[[Any, Any], Any] | None = None, epilogue: bool = False,
                 fp8: bool = False, column_major_out: bool = False) -> None:
        super().__init__(self._compile)  # it launches itself: `__call__`
        self.host = host
        self.config_type = config_type
        self.default = config_type()
        self.step = host.__module__.rpartition(".")[2]
        self.vector = vector
        self.min_cc = min_cc
        self.fp8 = fp8
        self.column_major_out = column_major_out
        self.fuses = epilogue  # the host takes the epilogue's arguments
        self.for_device = for_device  # (config, torch device) -> the config compiled for that device
        self.plans = Plans()  # the call's key -> (compiled kernel, operands' traits, fused epilogue)

    def _compile(self, key: tuple[Any, ...], a: Any, b: Any, c: Any, stream: Any, **tensors: Any) -> Any:
        ops, config, fused = key
        return compile_for(self.host, config, ops, a, b, c, stream, options=TVM_FFI,
                           fused=fused if self.fuses else None, **tensors)

    def plan(self, a: Any, b: Any, c: Any, config: Any, epilogue_: Any = None, alpha: Any = 1.0, beta: Any = 0.0,
             source: Any = None, bias: Any = None, aux: Any = None) -> Plan | None:
        """Check the call, compile if needed, and return its `Plan` (None: nothing to launch)."""
        asked = [name for name, value in (("epilogue", epilogue_), ("c", source), ("bias", bias), ("aux", aux))
                 if value is not None] + [name for name, value, plain in (("alpha", alpha, 1), ("beta", beta, 0))
                                          if not isinstance(value, (int, float)) or value != plain]
        if not self.fuses and asked:
            raise ValueError(f"{self.step} stores the plain product, so it takes no {', '.join(asked)}: fused "
                             f"epilogues are in every step from {operands.SM80_STEP} on")
        ops = operands.check(a, b, c, step=self.step, vector=self.vector, min_cc=self.min_cc, fp8=self.fp8,
                             out="d", column_major_out=self.column_major_out)
        fused = epilogue.plan(epilogue_, alpha, beta, source, bias, aux, c, ops.c_major)
        if fused.epilogue.aux:
            for name, t in (("a", a), ("b", b), ("d", c)):
                operands.overlap(name, t, "aux", aux)
        if c.numel() == 0:
            return None
        if a.shape[1] == 0:  # no products: D is the epilogue of zero accumulators, which torch computes
            epilogue.store(torch.zeros(c.shape, device=c.device), fused, alpha, beta, source, bias, aux, c)
            return None
        if self.for_device is not None:
            config = self.for_device(config, a.device)
        budget.check(self.step, config, ops.ab, ops.c, operands.capability(a.device))
        swapped = bool(getattr(config, "swap_ab", False))
        if swapped:  # Dᵀ = Bᵀ·Aᵀ, checked again as the kernel will see it (the transposed views)
            a, b = b.t(), a.t()
            c = c.t()
            source, aux = (None if t is None else t.t() for t in (source, aux))
            fused = epilogue.transposed(fused)
            ops = operands.check(a, b, c, step=self.step, vector=self.vector, min_cc=self.min_cc, fp8=self.fp8,
                                 out="d", column_major_out=self.column_major_out)
        tensors = {"source": source, "bias": bias, "aux": aux} if self.fuses else {}
        compiled = self.kernel((ops, config, fused), a, b, c, stream=launch.current_stream(), **tensors)
        # The bare TVM FFI function: the DSL's wrapper around it would walk the arguments in Python for pointer
        # objects to convert, and these are ints already. `self.compiled` keeps the wrapper, which owns the code.
        return Plan(compiled.__tvm_ffi_object__(), fused, extents(ops, a, b, c), swapped)

    def __call__(self, a: Any, b: Any, d: Any = None, config: Any = None, *,  # type: ignore[override]
                 epilogue: Any = None, alpha: Any = 1.0, beta: Any = 0.0, c: Any = None, bias: Any = None,
                 aux: Any = None) -> Any:
        d = output(a, b) if d is None else d
        config = self.default if config is None else config
        if not isinstance(config, self.config_type):
            given = f"{type(config).__module__.rpartition('.')[2]}.{type(config).__qualname__}"
            raise ValueError(f"config is a {given}; {self.step} takes its own: {self.step}.Config(...)")
        key = call_key(config, a, b, d, epilogue, alpha, beta, c, bias, aux)
        plan = self.plans.get(key) if key is not None else None
        if plan is None:
            plan = self.plan(a, b, d, config, epilogue, alpha, beta, c, bias, aux)
            if plan is None:
                return d
            if key is not None:
                self.plans.put(key, plan)
        self.launch(plan, a, b, d, alpha, beta, c, bias, aux)
        return d

    def launch(self, plan: Plan, a: Any, b: Any, d: Any, alpha: Any = 1.0, beta: Any = 0.0, c: Any = None,
               bias: Any = None, aux: Any = None) -> None:
        """Call `plan`'s kernel on these tensors (the ones `plan` was made for, or like them: `call_key`) on torch's
        current stream: the addresses, the plan's extents, the stream's handle, and for a fused step its epilogue's
        tensors (one it does not read or write is D's address, never dereferenced), alpha and beta."""
        pd, stream = d.data_ptr(), launch.raw_stream(a.get_device())
        pa, pb = (b.data_ptr(), a.data_ptr()) if plan.swapped else (a.data_ptr(), b.data_ptr())
        if self.fuses:
            fused = plan.fused
            plan.fn(pa, pb, pd, *plan.extents, stream, c.data_ptr() if fused.source else pd,
                    bias.data_ptr() if fused.bias_dtype else pd, aux.data_ptr() if fused.epilogue.aux else pd,
                    float(alpha), float(beta))
        else:
            plan.fn(pa, pb, pd, *plan.extents, stream)


def output(a: Any, b: Any) -> Any:
    """The D a call without one gets: (M, N) row-major, of a's dtype (bfloat16 for fp8 operands), on a's device; None
    where `a` and `b` are no matrices (the checks then say what is wrong)."""
    if not (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) and a.dim() == b.dim() == 2):
        return None
    dtype = torch.bfloat16 if launch.dtype_name(a) in operands.FP8_DTYPES else a.dtype
    return torch.empty(a.shape[0], b.shape[1], dtype=dtype, device=a.device)


def call_key(config: Any, a: Any, b: Any, d: Any, epilogue_: Any, alpha: Any, beta: Any, c: Any, bias: Any, aux: Any
             ) -> tuple[Any, ...] | None:
    """What a call's checks and compiled kernel depend on, as the plan caches' key (a step's launcher's, and
    `cutecourse.gemm`'s, whose `config` may be None: its own choice): the config, the epilogue, the tensors' dtypes,
    devices, shapes, strides and 16-byte alignment, and the epilogue tensors' traits. None where the checks must say
    what is wrong (not tensors, or alpha and beta no finite numbers); a key that does not hash (a config or an
    epilogue of the wrong kind) finds no plan (`Plans.get`).

    The shapes and strides are laid out as plain ints, each shape closed by -1 (no extent is negative, and the shapes
    give the strides' counts): the key is built and hashed on every call, and a tuple of ints hashes several times
    faster than torch.Size objects (3.0 µs for the key and its lookup, where 5.0 µs with the Size objects, on this
    repository's 2-core development machine)."""
    try:
        if isinstance(alpha, bool) or isinstance(beta, bool) or not math.isfinite(alpha) * math.isfinite(beta):
            return None
        return (config, epilogue_, a.dtype, b.dtype, d.dtype, a.device, b.device, d.device, *a.shape, -1, *b.shape,
                -1, *d.shape, -1, *a.stride(), *b.stride(), *d.stride(), a.data_ptr() % 16, b.data_ptr() % 16,
                d.data_ptr() % 16, alpha != 1, beta != 0, _traits_of(c), _traits_of(bias), _traits_of(aux))
    except (AttributeError, TypeError):
        return None


def for_device(config: Any, device: Any) -> Any:
    """A persistent step's `config` with ``sms`` no larger than `device`'s SM count: a persistent grid larger than
    the GPU runs its last CTAs after the others have finished, twice as long."""
    sms = torch.cuda.get_device_properties(device).multi_processor_count
    return config if config.sms <= sms else replace(config, sms=sms)
