"""Copy, step (b), adds a TV layout and 128-bit copy atoms over step (a).

`make_layout_tv(thr_layout, val_layout)` with 8×32 threads (row-major) and 4×V values per thread (V = 128 bits of
elements, along the contiguous mode) gives the block's tile, 32 × 32V, and which thread holds which element of it.
`make_tiled_copy_tv` turns that into a tiled copy with 128-bit universal atoms: each thread moves 4 vectors, and a
warp reads 32 × 16 contiguous bytes per instruction. No predication: M must be a multiple of 32 and N of 32V, with
16-byte aligned rows; step (c) lifts that.

    copy(src, dst)   # dst[:] = src
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
    vector: int = 4  # elements per 128-bit access


@cute.kernel
def _kernel(gS: cute.Tensor, gD: cute.Tensor, thr_layout: cute.Layout, val_layout: cute.Layout,
            vector_bits: cutlass.Constexpr[int]):
    tidx, _, _ = cute.arch.thread_idx()
    bidx, _, _ = cute.arch.block_idx()
    tile = ((None, None), bidx)
    atom = cute.make_copy_atom(cute.nvgpu.CopyUniversalOp(), gS.element_type, num_bits_per_copy=vector_bits)
    thr_copy = cute.make_tiled_copy_tv(atom, thr_layout, val_layout).get_slice(tidx)
    tSgS, tDgD = thr_copy.partition_S(gS[tile]), thr_copy.partition_D(gD[tile])
    regs = cute.make_fragment_like(tSgS)
    cute.copy(atom, tSgS, regs)
    cute.copy(atom, regs, tDgD)


@cute.jit
def host(mS: cute.Tensor, mD: cute.Tensor, stream: Any, vector: cutlass.Constexpr[int]):
    thr_layout = cute.make_ordered_layout((8, 32), order=(1, 0))
    val_layout = cute.make_ordered_layout((4, vector), order=(1, 0))
    tiler_mn, tv_layout = cute.make_layout_tv(thr_layout, val_layout)
    gS, gD = cute.zipped_divide(mS, tiler_mn), cute.zipped_divide(mD, tiler_mn)  # ((TileM, TileN), tiles)
    bits = vector * mS.element_type.width
    _kernel(gS, gD, thr_layout, val_layout, bits).launch(
        grid=(cute.size(gS, mode=[1]), 1, 1), block=(cute.size(tv_layout, mode=[0]), 1, 1), stream=stream)


def tile_shape(vector: int) -> tuple[int, int]:
    return 32, 32 * vector


def _arguments(config: Config, *tensors: Any) -> list[Any]:
    return [launch.cute_tensor(t, tile_shape(config.vector), config.vector) for t in tensors]


def compile(config: Config, src: Any, dst: Any, stream: Any, options: str = "") -> Any:
    return cute.compile(host, *_arguments(config, src, dst), stream, vector=config.vector, options=options)


_launcher = launch.Launcher(compile, _arguments)


def fits(src: Any, dst: Any) -> bool:
    """Whether this step can copy `src` to `dst`: whole tiles and 16-byte aligned rows (shapes and pointers only)."""
    vector = 128 // (src.element_size() * 8)
    tm, tn = tile_shape(vector)
    return src.shape[0] % tm == 0 and src.shape[1] % tn == 0 and launch.vector_width(src, dst) == vector


def plan(src: Any, dst: Any) -> Config:
    launch.check_matrix("src", src)
    launch.check_matrix("dst", dst, like=src)
    vector = 128 // (src.element_size() * 8)
    tm, tn = tile_shape(vector)
    m, n = src.shape
    if not fits(src, dst):
        raise ValueError(f"src has shape {(m, n)}; the tiled copy needs M a multiple of {tm}, N a multiple of {tn} "
                         "and 16-byte aligned rows: use copy_predicated.copy for any shape")
    return Config(launch.dtype_name(src), vector)


def run(config: Config, src: Any, dst: Any) -> Any:
    """Launch for a `config` that `plan` chose for these tensors (or that `fits` allows); returns dst."""
    return _launcher(config, src, dst)


def copy(src: Any, dst: Any) -> Any:
    """``dst[:] = src`` with 128-bit accesses; returns dst."""
    return run(plan(src, dst), src, dst)
