"""Element-wise ``out = alpha * x + beta * y``, cast to out's dtype: step (d), the predicated copy's machinery with
arithmetic between the load and the store.

Two loads and one store per element, all through the same TV-layout tiled copy and per-vector predicates as step
(c); the arithmetic runs in fp32 on the register fragments (`.load()` gives a TensorSSA value, `.store()` writes
one back), so x and y may be fp16/bf16 while out is any of the three dtypes.

    axpby(x, y, out, alpha=2.0, beta=-1.0)
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
    dtype: str = "float32"  # of x and y
    out_dtype: str = "float32"
    vector: int = 4  # elements per access: 128 bits of x's dtype when aligned, else 1


@cute.kernel
def _kernel(gX: cute.Tensor, gY: cute.Tensor, gO: cute.Tensor, cX: cute.Tensor, shape: cute.Shape,
            alpha: cutlass.Float32, beta: cutlass.Float32, thr_layout: cute.Layout, val_layout: cute.Layout,
            vector: cutlass.Constexpr[int]):
    tidx, _, _ = cute.arch.thread_idx()
    bidx, _, _ = cute.arch.block_idx()
    tile = ((None, None), bidx)
    load = cute.make_copy_atom(cute.nvgpu.CopyUniversalOp(), gX.element_type,
                               num_bits_per_copy=vector * gX.element_type.width)
    store = cute.make_copy_atom(cute.nvgpu.CopyUniversalOp(), gO.element_type,
                                num_bits_per_copy=vector * gO.element_type.width)
    thr_load = cute.make_tiled_copy_tv(load, thr_layout, val_layout).get_slice(tidx)
    thr_store = cute.make_tiled_copy_tv(store, thr_layout, val_layout).get_slice(tidx)
    tXgX, tYgY = thr_load.partition_S(gX[tile]), thr_load.partition_S(gY[tile])
    tOgO, tXcX = thr_store.partition_D(gO[tile]), thr_load.partition_S(cX[tile])
    pred = per_vector(tXcX, shape, vector)
    rX = cute.make_fragment_like(tXgX)
    rY = cute.make_fragment_like(tYgY)
    rO = cute.make_fragment_like(tOgO)
    cute.copy(load, tXgX, rX, pred=pred)
    cute.copy(load, tYgY, rY, pred=pred)
    result = alpha * rX.load().to(cutlass.Float32) + beta * rY.load().to(cutlass.Float32)
    rO.store(result.to(gO.element_type))
    cute.copy(store, rO, tOgO, pred=pred)


@cute.jit
def host(mX: cute.Tensor, mY: cute.Tensor, mO: cute.Tensor, alpha: cutlass.Float32, beta: cutlass.Float32,
         stream: Any, vector: cutlass.Constexpr[int]):
    thr_layout = cute.make_ordered_layout((8, 32), order=(1, 0))
    val_layout = cute.make_ordered_layout((4, vector), order=(1, 0))
    tiler_mn, tv_layout = cute.make_layout_tv(thr_layout, val_layout)
    gX, gY, gO = (cute.zipped_divide(t, tiler_mn) for t in (mX, mY, mO))
    cX = cute.zipped_divide(cute.make_identity_tensor(mX.shape), tiler_mn)
    _kernel(gX, gY, gO, cX, mX.shape, alpha, beta, thr_layout, val_layout, vector).launch(
        grid=(cute.size(gX, mode=[1]), 1, 1), block=(cute.size(tv_layout, mode=[0]), 1, 1), stream=stream)


def _arguments(config: Config, *tensors: Any) -> list[Any]:
    return [launch.cute_tensor(t, (1, config.vector), config.vector) for t in tensors]


def compile(config: Config, x: Any, y: Any, out: Any, stream: Any, options: str = "") -> Any:
    return cute.compile(host, *_arguments(config, x, y, out), cutlass.Float32(1.0), cutlass.Float32(1.0), stream,
                        vector=config.vector, options=options)


_launcher = launch.Launcher(compile, _arguments)


def plan(x: Any, y: Any, out: Any) -> Config:
    launch.check_matrix("x", x)
    launch.check_matrix("y", y, like=x)
    launch.check_matrix("out", out, like=x, same_dtype=False)
    # One vector width for all three: the element count of a 128-bit access of the widest dtype.
    vector = launch.vector_width(x, y, out)
    return Config(launch.dtype_name(x), launch.dtype_name(out), vector)


def axpby(x: Any, y: Any, out: Any, alpha: float = 1.0, beta: float = 1.0) -> Any:
    """``out = alpha * x + beta * y`` (computed in fp32, stored in out's dtype); returns out."""
    for name, value in (("alpha", alpha), ("beta", beta)):
        if not isinstance(value, (int, float)):
            raise ValueError(f"{name} must be a Python number, got {type(value).__name__}: pass float({name})")
    return _launcher(plan(x, y, out), x, y, out, scalars=(cutlass.Float32(alpha), cutlass.Float32(beta)))
