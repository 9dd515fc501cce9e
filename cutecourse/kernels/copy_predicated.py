"""Copy, step (c), adds predication over step (b): any shape.

An identity tensor over (M, N) is tiled and partitioned exactly like the data, so each thread holds the coordinates
of its own vectors; `elem_less(coordinate, shape)` says which are inside the matrix, and `cute.copy(..., pred=...)`
skips the others. Vectors stay 128 bits wide whenever N is a multiple of the vector width and rows are 16-byte
aligned (then a vector is either wholly inside or wholly outside); otherwise the launcher picks scalar atoms.

    copy(src, dst)   # dst[:] = src, any (M, N)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import cutlass
import cutlass.cute as cute

from cutecourse.kernels import launch
from cutecourse.kernels.predicate import per_vector


@dataclass(frozen=True)
class Config:
    dtype: str = "float32"
    vector: int = 4  # elements per access: 128 bits when aligned, else 1


@cute.kernel
def _kernel(gS: cute.Tensor, gD: cute.Tensor, cS: cute.Tensor, shape: cute.Shape, thr_layout: cute.Layout,
            val_layout: cute.Layout, vector_bits: cutlass.Constexpr[int]):
    tidx, _, _ = cute.arch.thread_idx()
    bidx, _, _ = cute.arch.block_idx()
    tile = ((None, None), bidx)
    atom = cute.make_copy_atom(cute.nvgpu.CopyUniversalOp(), gS.element_type, num_bits_per_copy=vector_bits)
    thr_copy = cute.make_tiled_copy_tv(atom, thr_layout, val_layout).get_slice(tidx)
    tSgS = thr_copy.partition_S(gS[tile])
    tDgD = thr_copy.partition_D(gD[tile])
    tScS = thr_copy.partition_S(cS[tile])
    pred = per_vector(tScS, shape, vector_bits // gS.element_type.width)
    regs = cute.make_fragment_like(tSgS)
    cute.copy(atom, tSgS, regs, pred=pred)
    cute.copy(atom, regs, tDgD, pred=pred)


@cute.jit
def host(mS: cute.Tensor, mD: cute.Tensor, stream: Any, vector: cutlass.Constexpr[int]):
    thr_layout = cute.make_ordered_layout((8, 32), order=(1, 0))
    val_layout = cute.make_ordered_layout((4, vector), order=(1, 0))
    tiler_mn, tv_layout = cute.make_layout_tv(thr_layout, val_layout)
    gS, gD = cute.zipped_divide(mS, tiler_mn), cute.zipped_divide(mD, tiler_mn)
    cS = cute.zipped_divide(cute.make_identity_tensor(mS.shape), tiler_mn)  # (m, n) of every element, tiled alike
    bits = vector * mS.element_type.width
    _kernel(gS, gD, cS, mS.shape, thr_layout, val_layout, bits).launch(
        grid=(cute.size(gS, mode=[1]), 1, 1), block=(cute.size(tv_layout, mode=[0]), 1, 1), stream=stream)


def _arguments(config: Config, *tensors: Any) -> list[Any]:
    return [launch.cute_tensor(t, (1, config.vector), config.vector) for t in tensors]


def compile(config: Config, src: Any, dst: Any, stream: Any, options: str = "") -> Any:
    return cute.compile(host, *_arguments(config, src, dst), stream, vector=config.vector, options=options)


_launcher = launch.Launcher(compile, _arguments)


def plan(src: Any, dst: Any) -> Config:
    launch.check_matrix("src", src)
    launch.check_matrix("dst", dst, like=src)
    return Config(launch.dtype_name(src), launch.vector_width(src, dst))


def run(config: Config, src: Any, dst: Any) -> Any:
    """Launch for a `config` that `plan` chose for these tensors; returns dst."""
    return _launcher(config, src, dst)


def copy(src: Any, dst: Any) -> Any:
    """``dst[:] = src`` for any shape; returns dst. `plan(src, dst).vector` says whether accesses are 128-bit."""
    return run(plan(src, dst), src, dst)
