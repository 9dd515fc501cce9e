"""Smoke test: the smallest CuTe DSL kernel that proves the stack works, ``out = 2 * x + 1`` on float32 vectors.

It exercises everything a lesson kernel needs (torch → cute tensors, `cute.compile`, a launch on the current
stream) and nothing else, so `cutecourse doctor --smoke` can tell a broken install from a broken lesson.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import cutlass
import cutlass.cute as cute

from cutecourse.kernels import launch


@dataclass(frozen=True)
class SmokeConfig:
    threads_per_block: int = 128


@cute.kernel
def _kernel(gx: cute.Tensor, gout: cute.Tensor, threads: cutlass.Constexpr[int]):
    tidx, _, _ = cute.arch.thread_idx()
    bidx, _, _ = cute.arch.block_idx()
    i = bidx * threads + tidx
    if i < cute.size(gx):
        gout[i] = gx[i] * 2.0 + 1.0


@cute.jit
def host(x: cute.Tensor, out: cute.Tensor, stream: Any, threads: cutlass.Constexpr[int] = 128):
    blocks = (cute.size(x) + threads - 1) // threads
    _kernel(x, out, threads).launch(grid=(blocks, 1, 1), block=(threads, 1, 1), stream=stream)


def _arguments(config: SmokeConfig, *tensors: Any) -> list[Any]:
    from cutlass.cute.runtime import from_dlpack

    return [from_dlpack(t).mark_layout_dynamic() for t in tensors]


def compile(config: SmokeConfig, x: Any, out: Any, stream: Any, options: str = "") -> Any:
    """Compile for float32 vectors like `x` and `out` (torch, on the GPU or the CPU: no GPU needed)."""
    return cute.compile(host, *_arguments(config, x, out), stream, threads=config.threads_per_block, options=options)


_launcher = launch.Launcher(compile, _arguments)


def _check(name: str, t: Any) -> None:
    import torch

    if not isinstance(t, torch.Tensor):
        raise ValueError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
    if not t.is_cuda:
        raise ValueError(f"{name} is on {t.device}; move it to the GPU with {name}.cuda()")
    if t.dtype != torch.float32:
        raise ValueError(f"{name} has dtype {t.dtype}; the smoke kernel takes float32: {name}.float()")
    if t.dim() != 1 or not t.is_contiguous():
        raise ValueError(f"{name} must be a contiguous 1-D tensor, got shape {tuple(t.shape)} "
                         f"and strides {t.stride()}: pass {name}.reshape(-1).contiguous()")


def smoke(x: Any, out: Any, config: SmokeConfig = SmokeConfig()) -> Any:
    """``out = 2 * x + 1`` on the GPU; `x` and `out` are float32 CUDA vectors of the same length."""
    _check("x", x)
    _check("out", out)
    if x.shape != out.shape:
        raise ValueError(f"out has shape {tuple(out.shape)} but x has {tuple(x.shape)}: "
                         "allocate out = torch.empty_like(x)")
    return _launcher(config, x, out)


def self_test(n: int = 100_003) -> str:
    """Launch on random data of a length that is no multiple of the block, and compare with torch."""
    import torch

    x = torch.randn(n, device="cuda")
    out = torch.full_like(x, float("nan"))  # poisoned: an unwritten element stays NaN and fails the check
    smoke(x, out)
    torch.cuda.synchronize()
    err = ((out.double() - (2 * x.double() + 1)).norm() / (2 * x.double() + 1).norm()).item()
    if not err < 1e-6:
        raise RuntimeError(f"smoke kernel gave a wrong result (relative error {err:.3g}); run: cutecourse doctor")
    return f"ok: compiled and launched a CuTe DSL kernel on {n} floats, relative error {err:.1e}"
