"""Torch tensors in, CuTe tensors out: checks whose errors name the fix, the vector width, the current stream, and
the one launcher every kernel of `cutecourse.kernels` is called through (compile once per configuration, then call).

Every launcher goes through these, so a learner's mistake (a CPU tensor, a transposed view, a float64 tensor) gets
the same clear message everywhere.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import cuda.bindings.driver as cuda
import torch
from cutlass.cute.runtime import from_dlpack

DTYPES = ("float32", "float16", "bfloat16")


def dtype_name(t: Any) -> str:
    return str(t.dtype).removeprefix("torch.")


def check_matrix(name: str, t: Any, like: Any = None, same_dtype: bool = True, shape: tuple[int, int] | None = None
                 ) -> None:
    """`t` must be a contiguous row-major 2-D CUDA tensor of a course dtype, on `like`'s device, with `like`'s shape
    or `shape` (and `like`'s dtype, when `same_dtype`)."""
    if not isinstance(t, torch.Tensor):
        raise ValueError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
    if not t.is_cuda:
        raise ValueError(f"{name} is on {t.device}; move it to the GPU: {name}.cuda()")
    if t.dim() != 2:
        raise ValueError(f"{name} must be 2-D, got shape {tuple(t.shape)}: reshape it, e.g. {name}.view(-1, n)")
    if not t.is_contiguous():
        raise ValueError(f"{name} has strides {t.stride()}; pass a row-major tensor: {name}.contiguous()")
    if dtype_name(t) not in DTYPES:
        raise ValueError(f"{name} has dtype {t.dtype}; supported: float32, float16, bfloat16")
    if like is not None:
        if same_dtype and t.dtype != like.dtype:
            raise ValueError(f"{name} has dtype {t.dtype} but the input has {like.dtype}: {name}.to({like.dtype})")
        if t.device != like.device:
            raise ValueError(f"{name} is on {t.device} and the input on {like.device}; put both on one GPU")
        if shape is None and t.shape != like.shape:
            raise ValueError(f"{name} has shape {tuple(t.shape)} but the input has {tuple(like.shape)}: "
                             f"allocate it with torch.empty_like(input)")
        if shape is not None and tuple(t.shape) != tuple(shape):
            raise ValueError(f"{name} has shape {tuple(t.shape)}; it must be {tuple(shape)} for an input of "
                             f"{tuple(like.shape)}: torch.empty({shape[0]}, {shape[1]}, dtype=input.dtype, "
                             f"device=input.device)")
    if t.numel() >= 2**31:
        raise ValueError(f"{name} has {t.numel()} elements, 2**31 or more; split it (the kernels index with 32 bits)")


def vector_width(*tensors: Any) -> int:
    """Elements per 128-bit access when every tensor's rows start 16-byte aligned, else 1 (scalar accesses)."""
    widths = {128 // (t.element_size() * 8) for t in tensors}
    v = min(widths)
    aligned = all(t.shape[-1] % v == 0 and t.data_ptr() % 16 == 0 for t in tensors)
    return v if aligned else 1


def cute_tensor(t: Any, divisibility: tuple[int, int] = (1, 1), vector: int = 1) -> Any:
    """A row-major torch matrix as the kernels take it: dynamic shape, each mode promised divisible as given (so
    vector accesses are provably aligned), base aligned to one `vector` of elements, 32-bit strides. A CPU tensor
    works too, for compiling without a GPU."""
    x = from_dlpack(t, assumed_align=vector * t.element_size(), use_32bit_stride=True)
    for mode in (0, 1):  # the order is explicit: torch's strides cannot tell it for shapes like (M, 1)
        x = x.mark_compact_shape_dynamic(mode=mode, stride_order=(0, 1), divisibility=divisibility[mode])
    return x


class Launcher:
    """Every kernel's launcher, once its checks chose a `key` (a Config, or what else fixes the compiled code):
    compile once per key, then call on torch's current stream of the tensors' GPU.

    ``Launcher(compile, arguments)``: ``compile(key, *tensors, stream)`` builds the kernel on the first call with a
    key (shapes are dynamic, so one compile serves every shape); ``arguments(key, *tensors)`` turns the tensors into
    what the compiled kernel takes (CuTe tensors, or pointers and extents); a subclass that launches in its own
    ``__call__`` (the GEMM steps' `cutecourse.kernels.gemm.launcher.Launcher`) gives none. A module's public function
    checks its tensors, chooses the key and launches::

        _launcher = launch.Launcher(compile, _arguments)

        def copy(src, dst):
            return _launcher(plan(src, dst), src, dst)
    """

    def __init__(self, compile: Callable[..., Any], arguments: Callable[..., Sequence[Any]] | None = None) -> None:
        self.compile, self.arguments = compile, arguments
        self.compiled: dict[Any, Any] = {}

    def kernel(self, key: Any, *tensors: Any, stream: Any, **named: Any) -> Any:
        """The kernel compiled for `key`, compiled now for tensors like these (and `named` ones, which `compile` takes
        by name) if no call had that key before."""
        fn = self.compiled.get(key)
        if fn is None:
            fn = self.compiled[key] = self.compile(key, *tensors, stream, **named)
        return fn

    def __call__(self, key: Any, *tensors: Any, scalars: tuple[Any, ...] = ()) -> Any:
        """Launch the kernel of `key` on the tensors, then `scalars`; nothing to launch for an empty input. Returns
        the last tensor (the output)."""
        if tensors[0].numel() == 0:
            return tensors[-1]
        stream = current_stream(tensors[0].get_device())
        self.kernel(key, *tensors, stream=stream)(*self.arguments(key, *tensors), *scalars, stream)
        return tensors[-1]


_STREAMS: dict[int, Any] = {}


def raw_stream(device: int) -> int:
    """torch's current CUDA stream on `device`, as the driver's handle (an int): what a kernel called through TVM FFI
    takes (`cutecourse.kernels.gemm.launcher`). ``torch._C._cuda_getCurrentRawStream`` (Triton's way) costs a
    fraction of a microsecond, where ``torch.cuda.current_stream()`` builds a Python stream object on every call."""
    return torch._C._cuda_getCurrentRawStream(device)


def current_stream(device: int | None = None) -> Any:
    """torch's current CUDA stream on `device` (default: the current one), as the driver type the DSL's own call path
    takes; one object per stream (`raw_stream`'s handle inside)."""
    handle = raw_stream(torch.cuda.current_device() if device is None else device)
    stream = _STREAMS.get(handle)
    if stream is None:
        stream = _STREAMS[handle] = cuda.CUstream(handle)
    return stream
