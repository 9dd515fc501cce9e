"""GEMM, step 7: wgmma. Warpgroups of 4 warps multiply with wgmma, which reads A and B straight from the shared
memory TMA wrote and runs asynchronously; the loads, the mbarrier ring and the epilogue are step 6's.

Step 6 fed Hopper's Tensor Cores the Ampere way: each warp ``ldmatrix``-ed its fragments of every k-block into
registers and issued ``mma.sync``, which waits for its result before the warp goes on. Hopper's Tensor Cores reach
their full rate only through wgmma (``wgmma.mma_async``):

* **A warpgroup's instruction.** 4 warps (128 threads) issue one wgmma together for a 64 × tile_n × 16 piece, and
  each holds a quarter of the 64 × tile_n accumulators. Here ``warpgroups`` warpgroups are stacked along M, each
  owning tile_m / warpgroups rows (two 64-row wgmma slabs of the default 256 × 128 tile).
* **Operands from shared memory.** wgmma reads A and B through 64-bit descriptors (address, swizzle, strides) of
  the swizzled tiles TMA wrote: no ``ldmatrix``, no operand registers, no register double buffer.
* **Asynchronous.** ``warpgroup.fence()`` orders the accumulator registers before a batch reads them,
  ``commit_group`` closes the batch of one K tile's wgmmas, and ``wait_group(1)`` waits for every batch but the
  newest: K tile kt's wgmmas run while the warps release tile kt - 1's stage and wait for tile kt + 1. A stage is
  released (one elected arrive per warp on ``empty``) only once the wgmmas that read it are done.

The accumulators start at zero and every wgmma adds to them (``ACCUMULATE``). The rest is step 6's: TMA loads by
one elected thread, the full/empty ring, the raster, and the fused epilogue staged through shared memory for
128-bit stores (after ``wait_group(0)``, when the last wgmmas have written the accumulators).

Config: tile_k 32 or 64, tile_n a power of two from 64 to 256, tile_m a multiple of 64 · warpgroups; at most 128
accumulators a thread; stages ≥ 2; the stages fit the sm_90 shared memory.

The epilogue can fuse ``D = act(alpha · acc + beta · C + bias)`` (`cutecourse.kernels.gemm.epilogue`): each accumulator
goes through it in registers, at its (m, n), before the conversion to D's dtype and the staging.

    gemm(a, b, c)   # c = a @ b; a (M, K), b (K, N) float16/bfloat16; c (M, N) float32/float16/bfloat16
    gemm(a, b, d, epilogue=Epilogue("gelu_tanh", bias="n"), bias=bias)   # d = GELU(a @ b + bias), one kernel
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import cutlass
import cutlass.cute as cute
import cutlass.utils.hopper_helpers as sm90
from cutlass.cute.nvgpu import cpasync, warpgroup
from cutlass.memory import SmemAllocator
from cutlass.tensor_utils import LayoutEnum

from cutecourse import hw
from cutecourse.kernels import predicate
from cutecourse.kernels.gemm import device, epilogue, launcher

SMEM_BYTES = hw.ARCH_LIMITS["sm_90"].smem_per_block_max  # shared memory one H100/H200 CTA may use
WARPGROUP_THREADS = cute.arch.THREADS_PER_WARPGROUP


@dataclass(frozen=True)
class Config:
    tile_m: int = 256  # CTA tile: tile_m × tile_n of C per CTA, K in steps of tile_k (fastest on an H200,
    tile_n: int = 128  # benchmarks/RESULTS.md)
    tile_k: int = 64
    warpgroups: int = 2  # warpgroups stacked along M, each owning (tile_m / warpgroups) × tile_n
    stages: int = 3  # K tiles resident in shared memory (stages - 1 in flight while one is computed)
    raster: int = 8  # CTAs launched together walk `raster` tiles along N before moving along M (1: off)

    def __post_init__(self) -> None:
        if self.tile_k not in (32, 64) or self.tile_n & (self.tile_n - 1) or self.tile_n < 64 or self.tile_m % 64:
            raise ValueError(f"{self}: tile_k must be 32 or 64, tile_n a power of two >= 64, tile_m a multiple of 64")
        if self.tile_m % (64 * self.warpgroups) or self.tile_n > 256 or self.stages < 2:
            raise ValueError(f"{self}: each warpgroup needs whole 64-row wgmma slabs (tile_m a multiple of "
                             f"64 * warpgroups), tile_n at most 256 (one wgmma's N), and stages >= 2")
        if self.tile_m * self.tile_n > 128 * WARPGROUP_THREADS * self.warpgroups:
            raise ValueError(f"{self}: more than 128 accumulators a thread; make the tile smaller")
        if self.stages * (self.tile_m + self.tile_n) * self.tile_k * 2 > SMEM_BYTES - 16 * self.stages:
            raise ValueError(f"{self}: {self.stages} stages of 16-bit A and B tiles take more than the {SMEM_BYTES} "
                             "bytes of shared memory a CTA may use beside their mbarriers; lower stages or tile_k")


@cute.jit
def _load(tma_atom_a: cute.CopyAtom, tAgA: cute.Tensor, tAsA: cute.Tensor, tma_atom_b: cute.CopyAtom,
          tBgB: cute.Tensor, tBsB: cute.Tensor, full: cute.Pointer, empty: cute.Pointer, kt: cutlass.Int32,
          stages: cutlass.Constexpr[int], stage_bytes: cutlass.Constexpr[int]):
    """Warp 0: K tile kt into stage kt % stages. Wait until every warp has released the stage (it held K tile
    kt - stages; a stage's first use passes at once, as a fresh mbarrier counts the phase before its first as
    complete), arm full[s] with the tile's bytes, then start the TMA copies of A and B, which complete on full[s]."""
    s = kt % stages
    cute.arch.mbarrier_wait(empty + s, (kt // stages + 1) % 2)
    with cute.arch.elect_one():
        cute.arch.mbarrier_arrive_and_expect_tx(full + s, stage_bytes)
    cute.copy(tma_atom_a, tAgA[None, kt], tAsA[None, s], tma_bar_ptr=full + s)
    cute.copy(tma_atom_b, tBgB[None, kt], tBsB[None, s], tma_bar_ptr=full + s)


@cute.kernel
def _kernel(tma_atom_a: cute.CopyAtom, mA: cute.Tensor, tma_atom_b: cute.CopyAtom, mB: cute.Tensor, mC: cute.Tensor,
            tiled_mma: cute.TiledMma, sA_layout: cute.ComposedLayout, sB_layout: cute.ComposedLayout,
            sC_layout: cute.ComposedLayout, tiled_copy_c: cute.TiledCopy, mSrc: cute.Tensor, mBias: cute.Tensor,
            mAux: cute.Tensor, alpha: cutlass.Float32, beta: cutlass.Float32, ab: cutlass.Constexpr,
            tiler: cutlass.Constexpr, raster: cutlass.Constexpr[int], fused: cutlass.Constexpr):
    tidx, _, _ = cute.arch.thread_idx()
    bidx, bidy, _ = cute.arch.block_idx()
    warp_idx = cute.arch.make_warp_uniform(cute.arch.warp_idx())
    M = mA.shape[0]
    N = mB.shape[0]
    tile_m, tile_n, _ = tiler
    stages = cute.size(sA_layout, mode=[2])
    tm, tn = bidx // raster, bidx % raster + bidy * raster  # raster order (the host launched raster× the rows)
    if tm * tile_m < M and tn * tile_n < N:
        # Tiles: gA (tile_m, tile_k, k_tiles), gB (tile_n, tile_k, k_tiles) of the TMA tensors (coordinates, not
        # data: TMA reads the matrices through its descriptors), gC (tile_m, tile_n), and cC its coordinates. The
        # last K tile may be partial: TMA fills what lies past K (and M, N) with zeros.
        gA, gB, gC, _, _, cC = device.cta_tiles(mA, mB, mC, tiler, (tm, tn, None))
        k_tiles = cute.size(gA, mode=[2])

        # One shared buffer: the A and B stages during the mainloop, then C's tile in the epilogue; 2 mbarriers per
        # stage.
        a_bytes = cute.cosize(sA_layout) * ab.width // 8
        b_bytes = cute.cosize(sB_layout) * ab.width // 8
        c_bytes = cute.cosize(sC_layout) * mC.element_type.width // 8
        smem = SmemAllocator()
        buf = smem.allocate(max(a_bytes + b_bytes, c_bytes), 1024)
        sA = cute.make_tensor(cute.recast_ptr(buf, sA_layout.inner, dtype=ab), sA_layout.outer)  # (tile_m, tile_k,
        sB = cute.make_tensor(cute.recast_ptr(buf + a_bytes, sB_layout.inner, dtype=ab), sB_layout.outer)  # stages)
        sC = cute.make_tensor(cute.recast_ptr(buf, dtype=mC.element_type), sC_layout)  # (tile_m, tile_n)
        full = smem.allocate_array(cutlass.Int64, stages)
        empty = smem.allocate_array(cutlass.Int64, stages)
        if warp_idx == 0:
            with cute.arch.elect_one():
                for s in cutlass.range_constexpr(stages):
                    cute.arch.mbarrier_init(full + s, 1)  # the elected thread's arrive (+ TMA's bytes)
                    cute.arch.mbarrier_init(empty + s, cute.size(tiled_mma) // cute.arch.WARP_SIZE)  # one per warp
        cute.arch.mbarrier_init_fence()  # the initialized barriers are visible to TMA ...
        cute.arch.sync_threads()  # ... and to every thread
        stage_bytes = cute.size_in_bytes(ab, cute.slice_(sA_layout, (None, None, 0))) + cute.size_in_bytes(
            ab, cute.slice_(sB_layout, (None, None, 0)))

        # Partitions, global -> shared: each (tile, tile_k) tile of A and B is one TMA copy, each stage of the ring
        # its destination.
        tAsA, tAgA = cpasync.tma_partition(tma_atom_a, 0, cute.make_layout(1), cute.group_modes(sA, 0, 2),
                                           cute.group_modes(gA, 0, 2))
        tBsB, tBgB = cpasync.tma_partition(tma_atom_b, 0, cute.make_layout(1), cute.group_modes(sB, 0, 2),
                                           cute.group_modes(gB, 0, 2))

        # wgmma's operands are shared-memory descriptors, one per (k-block of 16, stage) of this thread's warpgroup's
        # rows; the accumulators are registers.
        thr_mma = tiled_mma.get_slice(tidx)
        tCrA = tiled_mma.make_fragment_A(thr_mma.partition_A(sA))  # (MMA, MMA_M, k_blocks, stages)
        tCrB = tiled_mma.make_fragment_B(thr_mma.partition_B(sB))  # (MMA, MMA_N, k_blocks, stages)
        acc = tiled_mma.make_fragment_C(thr_mma.partition_C(gC))
        acc.fill(0.0)
        tiled_mma.set(warpgroup.Field.ACCUMULATE, True)
        k_blocks = cute.size(tCrA, mode=[2])

        # Mainloop, prologue: warp 0 puts stages - 1 K tiles in flight.
        if warp_idx == 0:
            for s in cutlass.range_constexpr(stages - 1):
                if s < k_tiles:
                    _load(tma_atom_a, tAgA, tAsA, tma_atom_b, tBgB, tBsB, full, empty, s, stages, stage_bytes)

        # Mainloop. K tile kt lives in stage `read`; one K tile's batch of wgmmas stays in flight while the next is
        # issued.
        read = cutlass.Int32(0)
        for kt in range(k_tiles):
            nxt = read + 1
            if nxt == stages:
                nxt = cutlass.Int32(0)
            cute.arch.mbarrier_wait(full + read, kt // stages % 2)  # tile kt has landed
            warpgroup.fence()  # the accumulator registers are written before the batch reads them
            for kb in cutlass.range_constexpr(k_blocks):
                cute.gemm(tiled_mma, acc, tCrA[None, None, kb, read], tCrB[None, None, kb, read], acc)
            warpgroup.commit_group()
            warpgroup.wait_group(1)  # tile kt - 1's wgmmas are done (tile kt's may still run)
            if kt > 0:
                with cute.arch.elect_one():
                    cute.arch.mbarrier_arrive(empty + (kt - 1) % stages)  # this warp is done with tile kt - 1
            # Refill the stage tile kt-1 used, once every warp released it, with tile kt + stages - 1.
            if warp_idx == 0 and kt + stages - 1 < k_tiles:
                _load(tma_atom_a, tAgA, tAsA, tma_atom_b, tBgB, tBsB, full, empty, kt + stages - 1, stages,
                      stage_bytes)
            read = nxt

        # Epilogue: the last wgmmas have written the accumulators; every tile loaded has landed (each thread waited
        # for it), and no warp may still be reading the buffers C is about to reuse.
        warpgroup.wait_group(0)
        cute.arch.sync_threads()
        if cutlass.const_expr(not fused.identity):  # the fused epilogue, on each accumulator at its (m, n)
            tCcC_mma = thr_mma.partition_C(cC)
            for i in cutlass.range(cute.size(acc), unroll_full=True):
                if cute.elem_less(tCcC_mma[i], mC.shape):
                    acc[i] = epilogue.element(fused, acc[i], tCcC_mma[i], mSrc, mBias, mAux, alpha, beta)
        tCrC = cute.make_fragment_like(acc, mC.element_type)
        tCrC.store(acc.load().to(mC.element_type))
        cute.autovec_copy(tCrC, thr_mma.partition_C(sC))  # fragments in the MMA's layout -> the C tile
        cute.arch.sync_threads()
        thr_copy_c = tiled_copy_c.get_slice(tidx)
        tCsC = thr_copy_c.partition_S(sC)
        tCgC = thr_copy_c.partition_D(gC)
        tCcC = thr_copy_c.partition_D(cC)
        tCrC_rows = cute.make_fragment_like(tCsC)
        cute.autovec_copy(tCsC, tCrC_rows)  # whole 16-byte row vectors of C
        c_vector = 128 // mC.element_type.width
        cute.copy(tiled_copy_c, tCrC_rows, tCgC,
                  pred=predicate.per_vector_if(tCcC, c_vector, lambda c: cute.elem_less(c, mC.shape)))


@cute.jit
def host(pA: cute.Pointer, pB: cute.Pointer, pC: cute.Pointer, m: cutlass.Int32, n: cutlass.Int32,
         k: cutlass.Int32, lda: cutlass.Int32, ldb: cutlass.Int32, ldc: cutlass.Int32, stream: Any,
         pSrc: cute.Pointer, pBias: cute.Pointer, pAux: cute.Pointer,
         alpha: cutlass.Float32, beta: cutlass.Float32, ops: cutlass.Constexpr, config: cutlass.Constexpr,
         fused: cutlass.Constexpr):
    mA, mB, mC = device.tensors(ops, pA, pB, pC, m, n, k, lda, ldb, ldc)
    mSrc, mBias, mAux = epilogue.tensors(fused, pSrc, pBias, pAux, m, n)
    ab, c_type = device.dtype(ops.ab), device.dtype(ops.c)
    tiler = (config.tile_m, config.tile_n, config.tile_k)
    threads = WARPGROUP_THREADS * config.warpgroups
    a_layout, b_layout = LayoutEnum.from_tensor(mA), LayoutEnum.from_tensor(mB)

    # 64 × tile_n × 16 wgmma atoms, warpgroups stacked along M, each repeating its atom down its rows; the majors
    # say how the descriptors read each operand.
    tiled_mma = sm90.make_trivial_tiled_mma(ab, ab, a_layout.sm90_mma_major_mode(), b_layout.sm90_mma_major_mode(),
                                            cutlass.Float32, (config.warpgroups, 1, 1), tiler_mn=(64, config.tile_n))

    # Shared memory: swizzled stages of A and B as TMA writes them: step 5's atoms of 8 lines of 128 (or 64) bytes,
    # their 16-byte chunks XORed with the line, but the swizzle is TMA's, on byte addresses (the pointer's:
    # Swizzle(3,4,3) on bytes is Swizzle(3,3,3) on 16-bit elements), and an MN-major tile's atoms go along K first,
    # so that one TMA box covers 64 rows × tile_k. C's tile row-major with its 8-element chunks XORed with the row
    # (mod 8), so the MMA fragments' writes (8 rows at a time) spread over the banks while each 16-byte vector the
    # stores read stays contiguous.
    sA_layout = sm90.make_smem_layout_a(a_layout, tiler, ab, config.stages)
    sB_layout = sm90.make_smem_layout_b(b_layout, tiler, ab, config.stages)
    sC_layout = cute.make_composed_layout(cute.make_swizzle(3, 3, int(math.log2(config.tile_n)) - 3), 0,
                                          cute.make_layout((config.tile_m, config.tile_n), stride=(config.tile_n, 1)))

    # Global -> shared: TMA descriptors for one stage's tile of A and of B; the returned tensors hold coordinates.
    tma_atom_a, tma_tensor_a = cpasync.make_tiled_tma_atom(cpasync.CopyBulkTensorTileG2SOp(), mA,
                                                           cute.slice_(sA_layout, (None, None, 0)),
                                                           (config.tile_m, config.tile_k))
    tma_atom_b, tma_tensor_b = cpasync.make_tiled_tma_atom(cpasync.CopyBulkTensorTileG2SOp(), mB,
                                                           cute.slice_(sB_layout, (None, None, 0)),
                                                           (config.tile_n, config.tile_k))
    # Shared -> global, the epilogue: 16-byte row vectors of C, threads along N.
    c_vector = 128 // c_type.width
    lanes = config.tile_n // c_vector
    tiled_copy_c = cute.make_tiled_copy_tv(
        cute.make_copy_atom(cute.nvgpu.CopyUniversalOp(), c_type, num_bits_per_copy=128),
        cute.make_layout((threads // lanes, lanes), stride=(lanes, 1)), cute.make_layout((1, c_vector)))

    raster = config.raster
    tiles_m, tiles_n = (m + config.tile_m - 1) // config.tile_m, (n + config.tile_n - 1) // config.tile_n
    _kernel(tma_atom_a, tma_tensor_a, tma_atom_b, tma_tensor_b, mC, tiled_mma, sA_layout, sB_layout, sC_layout,
            tiled_copy_c, mSrc, mBias, mAux, alpha, beta, ab, tiler, raster,
            fused).launch(
        grid=(tiles_m * raster, (tiles_n + raster - 1) // raster, 1), block=(threads, 1, 1), stream=stream)


gemm = launcher.Launcher(host, Config, vector=True, min_cc=90, epilogue=True)
