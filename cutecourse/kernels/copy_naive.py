"""Copy, step (a): one element per thread. The baseline every later step is measured against.

Thread g of the grid copies element g of the matrix in row-major order, (g // N, g % N), with a bounds check, so any
shape works and a warp reads 32 neighbouring elements (coalesced, but 4 or 2 bytes per thread: many small
instructions, and an integer division each).

    copy(src, dst)   # dst[:] = src, both (M, N) row-major CUDA tensors of one dtype
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import cutlass
import cutlass.cute as cute

from cutecourse.kernels import launch


@dataclass(frozen=True)
class Config:
    dtype: str = "float32"
    threads: int = 256


@cute.kernel
def _kernel(gS: cute.Tensor, gD: cute.Tensor, threads: cutlass.Constexpr[int]):
    tidx, _, _ = cute.arch.thread_idx()
    bidx, _, _ = cute.arch.block_idx()
    g = bidx * threads + tidx
    if g < cute.size(gS):
        crd = (g // gS.shape[1], g % gS.shape[1])
        gD[crd] = gS[crd]


@cute.jit
def host(mS: cute.Tensor, mD: cute.Tensor, stream: Any, threads: cutlass.Constexpr[int]):
    grid = ((cute.size(mS) + threads - 1) // threads, 1, 1)
    _kernel(mS, mD, threads).launch(grid=grid, block=(threads, 1, 1), stream=stream)


def _arguments(config: Config, *tensors: Any) -> list[Any]:
    return [launch.cute_tensor(t) for t in tensors]


def compile(config: Config, src: Any, dst: Any, stream: Any, options: str = "") -> Any:
    return cute.compile(host, *_arguments(config, src, dst), stream, threads=config.threads, options=options)


_launcher = launch.Launcher(compile, _arguments)


def copy(src: Any, dst: Any) -> Any:
    """``dst[:] = src`` one element per thread; returns dst."""
    launch.check_matrix("src", src)
    launch.check_matrix("dst", dst, like=src)
    return _launcher(Config(launch.dtype_name(src)), src, dst)
