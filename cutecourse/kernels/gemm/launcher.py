"""The launcher every GEMM step is called through: check the torch tensors (`operands`), compile once per
(operand traits, Config, epilogue), remember each call's verdict (`plans`), then call with raw pointers; a compile
cache whose hits cost a few microseconds.

The compiled kernels take raw pointers and M, N, K, not DLPack tensors: building three pointers costs about 4 µs
where three DLPack conversions cost about 30 µs, and the layouts are then written out in the host code
(`device.tensors`), where a learner can read them.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import cutlass
import cutlass.cute as cute
import torch
from cutlass.cute.runtime import make_ptr

from cutecourse.kernels import launch
from cutecourse.kernels.gemm import budget, device, epilogue, operands
from cutecourse.kernels.gemm.plans import Plans

GMEM = cute.AddressSpace.gmem


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
    """

    def __init__(self, host: Any, config_type: Callable[..., Any], *, vector: bool, min_cc: int,
                 for_device: Callable[[Any, Any], Any] | None = None, epilogue: bool = False,
                 fp8: bool = False) -> None:
        super().__init__(self._compile, self._arguments)
        self.host = host
        self.config_type = config_type
        self.default = config_type()
        self.step = host.__module__.rpartition(".")[2]
        self.vector = vector
        self.min_cc = min_cc
        self.fp8 = fp8
        self.fuses = epilogue  # the host takes the epilogue's arguments
        self.for_device = for_device  # (config, torch device) -> the config compiled for that device
        self.plans = Plans()  # the call's key -> (compiled kernel, operands' traits, fused epilogue)

    def _compile(self, key: tuple[Any, ...], a: Any, b: Any, c: Any, stream: Any, **tensors: Any) -> Any:
        ops, config, fused = key
        return compile_for(self.host, config, ops, a, b, c, stream, fused=fused if self.fuses else None, **tensors)

    @staticmethod
    def _arguments(key: tuple[Any, ...], a: Any, b: Any, c: Any) -> tuple[Any, ...]:
        return (*pointers(key[0], a, b, c), *extents(key[0], a, b, c))

    def plan(self, a: Any, b: Any, c: Any, config: Any, epilogue_: Any = None, alpha: Any = 1.0, beta: Any = 0.0,
             source: Any = None, bias: Any = None, aux: Any = None) -> tuple[Any, operands.Operands, Any] | None:
        """Check the call, compile if needed, and return the compiled kernel, the operands' traits and the fused
        epilogue (None: nothing to launch)."""
        asked = [name for name, value in (("epilogue", epilogue_), ("c", source), ("bias", bias), ("aux", aux))
                 if value is not None] + [name for name, value, plain in (("alpha", alpha, 1), ("beta", beta, 0))
                                          if not isinstance(value, (int, float)) or value != plain]
        if not self.fuses and asked:
            raise ValueError(f"{self.step} stores the plain product, so it takes no {', '.join(asked)}: fused "
                             f"epilogues are in every step from {operands.SM80_STEP} on")
        ops = operands.check(a, b, c, step=self.step, vector=self.vector, min_cc=self.min_cc, fp8=self.fp8,
                             out="d")
        fused = epilogue.plan(epilogue_, alpha, beta, source, bias, aux, c)
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
        tensors = {"source": source, "bias": bias, "aux": aux} if self.fuses else {}
        return self.kernel((ops, config, fused), a, b, c, stream=launch.current_stream(), **tensors), ops, fused

    def __call__(self, a: Any, b: Any, d: Any = None, config: Any = None, *,  # type: ignore[override]
                 epilogue: Any = None, alpha: Any = 1.0, beta: Any = 0.0, c: Any = None, bias: Any = None,
                 aux: Any = None) -> Any:
        if d is None and isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) and a.dim() == b.dim() == 2:
            dtype = torch.bfloat16 if launch.dtype_name(a) in operands.FP8_DTYPES else a.dtype
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
            self.plans.put(key, plan)
        fn, ops, fused = plan
        args = self._arguments((ops, config), a, b, d)  # pA, pB, pD, m, n, k, lda, ldb, ldc
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
