"""Transpose ``D = Sᵀ`` of a row-major (M, N) matrix, in two steps.

Step 1, ``naive``: the seed's kernel, made of layouts only. The output is viewed as an (M, N) *column-major* tensor
(``select`` swaps the modes of its layout), so one coordinate names the same element in both tensors; both are
tiled 32×32 with ``zipped_divide``, each block takes its tile, and ``local_partition`` over an 8×32 row-major
thread layout gives each thread 4 elements, copied through registers. Reads are coalesced (a warp reads one row),
writes are not (a warp writes 32 elements ``M`` apart).

Step 2, ``smem`` (adds a shared-memory tile): each block reads a 64×64 tile with threads along N and writes it with
threads along M, so both sides are coalesced, and, when the shapes allow, every global access is 128 bits wide.
The tile passes through shared memory, stored M-contiguous with a column padded to an odd number of 4-byte words:
without it all threads that write one row of the tile would hit the same bank (the column stride would be a
multiple of 32 words).

Both predicate on an identity tensor (``elem_less(coord, shape)``), so any M and N work. Usage::

    out = torch.empty(x.shape[1], x.shape[0], device="cuda", dtype=x.dtype)
    transpose(x, out)                  # the smem step; transpose(x, out, variant="naive") for step 1

Constraints: 2-D contiguous CUDA tensors, float32/float16/bfloat16, ``out`` of shape (N, M) and the same dtype.
128-bit accesses need M and N multiples of 16 bytes' worth of elements and 16-byte aligned pointers; otherwise the
launcher picks scalar accesses (``plan(...)`` says which).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import cutlass
import cutlass.cute as cute

from cutecourse.kernels import launch
from cutecourse.kernels.predicate import per_vector

VARIANTS = ("naive", "smem")


@dataclass(frozen=True)
class TransposeConfig:
    variant: str = "smem"
    dtype: str = "float32"
    vector: int = 1  # elements per global access: 128 // bits when aligned, else 1
    tile: int = 64  # the smem step's; the naive step's is always 32 (whatever is passed: one Config, one compile)
    threads: int = 256

    def __post_init__(self) -> None:
        if self.variant not in VARIANTS:
            raise ValueError(f"variant={self.variant!r}; choose one of {VARIANTS}")
        if self.dtype not in launch.DTYPES:
            raise ValueError(f"dtype={self.dtype!r}; choose one of {launch.DTYPES}")
        if self.variant == "naive":
            object.__setattr__(self, "tile", 32)
        if self.tile % self.vector or (self.tile // self.vector) > self.threads:
            raise ValueError(f"vector={self.vector} does not fit tile={self.tile} with {self.threads} threads")


# ---------------------------------------------------------------------------------------------------------------------
# Step 1: layouts only (seed 001)


@cute.kernel
def _naive_kernel(gS: cute.Tensor, gDT: cute.Tensor, cS: cute.Tensor, shape: cute.Shape, thr_layout: cute.Layout):
    tidx, _, _ = cute.arch.thread_idx()
    bidx, bidy, _ = cute.arch.block_idx()
    tile = ((None, None), (bidx, bidy))
    thr_S = cute.local_partition(gS[tile], thr_layout, tidx)  # this thread's elements of the tile
    thr_DT = cute.local_partition(gDT[tile], thr_layout, tidx)  # the same coordinates in the output
    thr_c = cute.local_partition(cS[tile], thr_layout, tidx)
    pred = cute.make_rmem_tensor(thr_c.shape, cutlass.Boolean)
    for i in cutlass.range_constexpr(cute.size(pred)):
        pred[i] = cute.elem_less(thr_c[i], shape)
    rmem = cute.make_fragment_like(thr_S)
    atom = cute.make_copy_atom(cute.nvgpu.CopyUniversalOp(), gS.element_type)
    cute.copy(atom, thr_S, rmem, pred=pred)
    cute.copy(atom, rmem, thr_DT, pred=pred)  # written as though the output were column-major


# ---------------------------------------------------------------------------------------------------------------------
# Step 2: through a padded shared-memory tile, coalesced (and vectorized) on both sides


@cute.kernel
def _smem_kernel(gS: cute.Tensor, gDT: cute.Tensor, cS: cute.Tensor, shape: cute.Shape,
                 load_thr: cute.Layout, load_val: cute.Layout, store_thr: cute.Layout, store_val: cute.Layout,
                 smem_layout: cute.Layout, vector_bits: cutlass.Constexpr[int]):
    tidx, _, _ = cute.arch.thread_idx()
    bidx, bidy, _ = cute.arch.block_idx()
    tile = ((None, None), (bidx, bidy))
    tS = gS[tile]
    tDT = gDT[tile]
    tC = cS[tile]
    dtype = gS.element_type
    sT = cutlass.memory.SmemAllocator().allocate_tensor(dtype, smem_layout, 16)
    atom = cute.make_copy_atom(cute.nvgpu.CopyUniversalOp(), dtype, num_bits_per_copy=vector_bits)

    # Read the tile with threads along N (the input's contiguous mode) and park it in shared memory.
    thr_load = cute.make_tiled_copy_tv(atom, load_thr, load_val).get_slice(tidx)
    tSg = thr_load.partition_S(tS)
    tSs = thr_load.partition_D(sT)
    tSc = thr_load.partition_S(tC)
    regs = cute.make_fragment_like(tSg)
    cute.copy(atom, tSg, regs, pred=per_vector(tSc, shape, vector_bits // dtype.width))
    cute.autovec_copy(regs, tSs)
    cute.arch.sync_threads()

    # Write it with threads along M (the output's contiguous mode), reading shared memory column-wise.
    thr_store = cute.make_tiled_copy_tv(atom, store_thr, store_val).get_slice(tidx)
    tDs = thr_store.partition_S(sT)
    tDg = thr_store.partition_D(tDT)
    tDc = thr_store.partition_D(tC)
    out = cute.make_fragment_like(tDg)
    cute.autovec_copy(tDs, out)
    cute.copy(atom, out, tDg, pred=per_vector(tDc, shape, vector_bits // dtype.width))


# ---------------------------------------------------------------------------------------------------------------------
# Host code


@cute.jit
def host(mS: cute.Tensor, mD: cute.Tensor, stream: Any, variant: cutlass.Constexpr[str],
         tile: cutlass.Constexpr[int], threads: cutlass.Constexpr[int], vector: cutlass.Constexpr[int]):
    """Launch step `variant` on S (M, N) row-major and D (N, M) row-major."""
    # Dᵀ as an (M, N) tensor: the same memory, the modes of D's layout swapped (column-major in M, N).
    mDT = cute.make_tensor(mD.iterator, cute.select(mD.layout, mode=[1, 0]))
    tiler = (tile, tile)
    gS, gDT = cute.zipped_divide(mS, tiler), cute.zipped_divide(mDT, tiler)
    cS = cute.zipped_divide(cute.make_identity_tensor(mS.shape), tiler)
    grid = (cute.size(gS, mode=[1, 0]), cute.size(gS, mode=[1, 1]), 1)
    if cutlass.const_expr(variant == "naive"):
        thr_layout = cute.make_ordered_layout((threads // tile, tile), order=(1, 0))
        _naive_kernel(gS, gDT, cS, mS.shape, thr_layout).launch(grid=grid, block=(threads, 1, 1), stream=stream)
    else:
        lanes = tile // vector  # threads per row of 128-bit (or scalar) accesses
        load_thr = cute.make_ordered_layout((threads // lanes, lanes), order=(1, 0))
        load_val = cute.make_ordered_layout((1, vector), order=(1, 0))
        store_thr = cute.make_ordered_layout((lanes, threads // lanes), order=(0, 1))
        store_val = cute.make_ordered_layout((vector, 1), order=(0, 1))
        # M-contiguous, padded so that a column is an odd number of 4-byte words: consecutive columns start in
        # different banks (1 element of padding for 32-bit types, 2 for 16-bit ones).
        pad = max(1, 32 // mS.element_type.width)
        smem_layout = cute.make_layout((tile, tile), stride=(1, tile + pad))
        bits = vector * mS.element_type.width
        _smem_kernel(gS, gDT, cS, mS.shape, load_thr, load_val, store_thr, store_val, smem_layout, bits).launch(
            grid=grid, block=(threads, 1, 1), stream=stream)


def _arguments(config: TransposeConfig, *tensors: Any) -> list[Any]:
    # M and N are both promised multiples of the vector: one is contiguous in the input, the other in the output.
    return [launch.cute_tensor(t, (config.vector, config.vector), config.vector) for t in tensors]


def compile(config: TransposeConfig, src: Any, dst: Any, stream: Any, options: str = "") -> Any:
    """Compile step `config.variant` for tensors like `src` and `dst` (torch, on the GPU or the CPU)."""
    return cute.compile(host, *_arguments(config, src, dst), stream,
                        variant=config.variant, tile=config.tile, threads=config.threads, vector=config.vector,
                        options=options)


_launcher = launch.Launcher(compile, _arguments)


def plan(src: Any, dst: Any, variant: str = "smem", tile: int = 64, threads: int = 256) -> TransposeConfig:
    """Validate the tensors and choose the configuration (vector width) the launcher will use."""
    launch.check_matrix("src", src)
    launch.check_matrix("dst", dst, like=src, shape=src.shape[::-1])  # the transpose of (M, N) is (N, M)
    # 128-bit accesses read rows of src and write rows of dst: both must be aligned.
    vector = launch.vector_width(src, dst) if variant == "smem" else 1
    return TransposeConfig(variant=variant, dtype=launch.dtype_name(src), vector=vector, tile=tile, threads=threads)


def transpose(src: Any, dst: Any, variant: str = "smem", tile: int = 64, threads: int = 256) -> Any:
    """``dst = src.T`` on the GPU with step `variant` ("naive" or "smem"); returns dst. `tile` and `threads` shape
    the smem step's blocks (the naive step always uses 32×32 tiles)."""
    return _launcher(plan(src, dst, variant, tile, threads), src, dst)
