"""GEMM, step 5: Hopper. TMA loads into swizzled shared memory, an mbarrier pipeline, and wgmma from one consumer
warpgroup.

Step 4's threads computed addresses and issued a 16-byte ``cp.async`` each for every tile, then ``ldmatrix``-ed
fragments into registers for ``mma.sync``. On Hopper both chores leave the threads:

* TMA (the Tensor Memory Accelerator) copies a whole 128 × 64 tile of A or B from global to shared memory with one
  instruction, ``cp.async.bulk.tensor`` (two for an MN-major tile), issued by one elected thread. A descriptor
  built on the host holds the matrix's shape and strides, so TMA clips the box at the matrix edges and fills what
  lies outside with zeros: the M, N and K tails cost the kernel nothing. It writes the tile in the 128-byte
  swizzled layout that wgmma reads without bank conflicts.
* wgmma (``wgmma.mma_async``) is issued by a warpgroup, 4 warps, and reads A and B straight from shared memory
  through 64-bit descriptors: no ``ldmatrix``, no operand registers. Hopper's Tensor Cores reach their full rate
  only through wgmma; ``mma.sync`` leaves them well short of it. It is asynchronous: ``commit_group`` closes a
  batch and ``wait_group(1)`` waits for all but the newest batch, so one k-tile's wgmmas run while the warps wait
  for the next k-tile.

Each CTA, one warpgroup of 128 threads, owns a 128 × 128 tile of C (128 fp32 accumulators per thread) and walks K
in 64-wide k-tiles through a ring of ``stages`` shared-memory slots. Two mbarriers per slot order the hand-offs:
``full[s]`` completes when TMA has written all the bytes of slot s (the elected thread arms it with the byte count
first), ``empty[s]`` when each of the 4 warps has finished the wgmmas that read slot s. A barrier completes one
phase per use of its slot, so waiting for k-tile kt means waiting for phase parity ``(kt // stages) % 2``. While the
warpgroup multiplies k-tile kt, the loads of the next ``stages - 1`` k-tiles are in flight. One CTA per output
tile, no warp specialization, no clusters: step 6 adds those. The epilogue converts each accumulator to C's dtype
and stores it straight from registers, masked at the matrix edges (step 6 stores C with TMA instead).

A and B may each be K-major or MN-major: the shared-memory layouts (and the swizzle TMA writes) follow the major,
and wgmma reads 16-bit operands either way. Needs sm_90a, and rows 16-byte aligned (TMA's rule).

    gemm(a, b, c)   # c = a @ b; a (M, K), b (K, N) float16/bfloat16; c (M, N) float32/float16/bfloat16
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import cutlass
import cutlass.cute as cute
import cutlass.utils.hopper_helpers as sm90_utils
from cutlass.cute.nvgpu import cpasync, warpgroup
from cutlass.tensor_utils import LayoutEnum

from cutecourse.kernels import gemm_launch

WARPS = 4  # one warpgroup


@dataclass(frozen=True)
class Config:
    tile_m: int = 128  # rows of C per CTA: 64 or 128 (each wgmma covers 64 rows)
    tile_n: int = 128  # columns of C per CTA: a multiple of 64 (128 × 256 would need 256 accumulators a thread)
    tile_k: int = 64  # K per pipeline stage: 64 16-bit elements are one 128-byte swizzle row
    stages: int = 4  # shared-memory slots in the ring: 4 × 32 KiB, so one CTA per SM


@cute.jit
def _load(tma_a: cute.CopyAtom, tAgA: cute.Tensor, tAsA: cute.Tensor, tma_b: cute.CopyAtom, tBgB: cute.Tensor,
          tBsB: cute.Tensor, full: cute.Pointer, kt: cutlass.Int32, s: cutlass.Int32, nbytes: cutlass.Constexpr[int]):
    """Warp 0: arm full[s] with the bytes of k-tile kt, then start its two TMA copies into slot s."""
    with cute.arch.elect_one():
        cute.arch.mbarrier_arrive_and_expect_tx(full + s, nbytes)
    cute.copy(tma_a, tAgA[None, kt], tAsA[None, s], tma_bar_ptr=full + s)
    cute.copy(tma_b, tBgB[None, kt], tBsB[None, s], tma_bar_ptr=full + s)


@cute.kernel
def _kernel(tma_a: cute.CopyAtom, mA: cute.Tensor, tma_b: cute.CopyAtom, mB: cute.Tensor, mC: cute.Tensor,
            tiled_mma: cute.TiledMma, sA_layout: cute.ComposedLayout, sB_layout: cute.ComposedLayout,
            ab: cutlass.Constexpr, tile: cutlass.Constexpr, stages: cutlass.Constexpr[int]):
    tidx, _, _ = cute.arch.thread_idx()
    bm, bn, _ = cute.arch.block_idx()
    warp = cute.arch.make_warp_uniform(cute.arch.warp_idx())

    # Shared memory: the A and B rings (1024-byte aligned, as the 128-byte swizzle needs) and 2 mbarriers per slot.
    smem = cutlass.memory.SmemAllocator()
    sA = smem.allocate_tensor(ab, sA_layout.outer, 1024, sA_layout.inner)  # (bM, bK, stages)
    sB = smem.allocate_tensor(ab, sB_layout.outer, 1024, sB_layout.inner)  # (bN, bK, stages)
    full = smem.allocate_array(cutlass.Int64, stages)
    empty = smem.allocate_array(cutlass.Int64, stages)
    if warp == 0:
        with cute.arch.elect_one():
            for s in cutlass.range_constexpr(stages):
                cute.arch.mbarrier_init(full + s, 1)  # the elected thread's arrive (+ TMA's bytes)
                cute.arch.mbarrier_init(empty + s, WARPS)  # one arrive per warp
    cute.arch.mbarrier_init_fence()
    cute.arch.barrier()

    # This CTA's k-tiles as TMA sees them (mA, mB hold coordinates, not data); tma_partition makes each (bM, bK)
    # tile one TMA copy, and each slot of the ring its destination.
    gA = cute.local_tile(mA, (tile[0], tile[2]), (bm, None))  # (bM, bK, k_tiles)
    gB = cute.local_tile(mB, (tile[1], tile[2]), (bn, None))  # (bN, bK, k_tiles)
    tAsA, tAgA = cpasync.tma_partition(tma_a, 0, cute.make_layout(1), cute.group_modes(sA, 0, 2),
                                       cute.group_modes(gA, 0, 2))
    tBsB, tBgB = cpasync.tma_partition(tma_b, 0, cute.make_layout(1), cute.group_modes(sB, 0, 2),
                                       cute.group_modes(gB, 0, 2))
    nbytes = cute.size_in_bytes(ab, cute.slice_(sA_layout, (None, None, 0))) + cute.size_in_bytes(
        ab, cute.slice_(sB_layout, (None, None, 0)))
    k_tiles = cute.size(gA, mode=[2])

    # wgmma operands are shared-memory descriptors, one per (k-block of 16, slot); the accumulators are registers.
    thr_mma = tiled_mma.get_slice(tidx)
    tCrA = tiled_mma.make_fragment_A(thr_mma.partition_A(sA))  # (MMA, MMA_M, MMA_K, stages)
    tCrB = tiled_mma.make_fragment_B(thr_mma.partition_B(sB))  # (MMA, MMA_N, MMA_K, stages)
    gC = cute.local_tile(mC, (tile[0], tile[1]), (bm, bn))
    acc = cute.make_rmem_tensor(thr_mma.partition_C(gC).shape, cutlass.Float32)
    acc.fill(0.0)
    tiled_mma.set(warpgroup.Field.ACCUMULATE, True)

    # Prologue: warp 0 starts the loads of the first k-tiles, one per slot (every slot starts empty).
    if warp == 0:
        for kt in cutlass.range(cutlass.min(stages, k_tiles), unroll=1):
            _load(tma_a, tAgA, tAsA, tma_b, tBgB, tBsB, full, kt, kt, nbytes)

    for kt in cutlass.range(k_tiles, unroll=1):
        s = kt % stages
        cute.arch.mbarrier_wait(full + s, (kt // stages) % 2)  # k-tile kt has landed in slot s
        warpgroup.fence()
        for kb in cutlass.range_constexpr(cute.size(tCrA, mode=[2])):
            cute.gemm(tiled_mma, acc, tCrA[None, None, kb, s], tCrB[None, None, kb, s], acc)
        warpgroup.commit_group()
        warpgroup.wait_group(1)  # k-tile kt's wgmmas may still run; kt - 1's are done, so its slot is free
        if kt > 0:
            done = (kt - 1) % stages
            with cute.arch.elect_one():
                cute.arch.mbarrier_arrive(empty + done)
            nxt = kt - 1 + stages
            if warp == 0 and nxt < k_tiles:
                cute.arch.mbarrier_wait(empty + done, ((kt - 1) // stages) % 2)  # all 4 warps released the slot
                _load(tma_a, tAgA, tAsA, tma_b, tBgB, tBsB, full, nxt, done, nbytes)
    warpgroup.wait_group(0)

    # Epilogue: round to C's dtype and store each element this thread holds, if it lies inside C. One element at a
    # time, not gemm_launch.store_inside's whole-fragment conversion: that one let LLVM hoist the conversions above
    # the wgmma.wait_group, reading accumulators the Tensor Cores were still writing.
    tCgC = thr_mma.partition_C(gC)
    tCcC = thr_mma.partition_C(cute.local_tile(cute.make_identity_tensor(mC.shape), (tile[0], tile[1]), (bm, bn)))
    for i in cutlass.range(cute.size(acc), unroll_full=True):
        if cute.elem_less(tCcC[i], mC.shape):
            tCgC[i] = acc[i].to(mC.element_type)


@cute.jit
def host(pA: cute.Pointer, pB: cute.Pointer, pC: cute.Pointer, m: cutlass.Int32, n: cutlass.Int32,
         k: cutlass.Int32, stream: Any, ops: cutlass.Constexpr, config: cutlass.Constexpr):
    mA, mB, mC = gemm_launch.tensors(ops, pA, pB, pC, m, n, k)
    ab = gemm_launch.dtype(ops.ab)
    tile = (config.tile_m, config.tile_n, config.tile_k)
    # ROW_MAJOR means "K-major" to these helpers: K contiguous in A (M, K) and B (N, K).
    a_major = LayoutEnum.ROW_MAJOR if ops.a_major == "k" else LayoutEnum.COL_MAJOR
    b_major = LayoutEnum.ROW_MAJOR if ops.b_major == "k" else LayoutEnum.COL_MAJOR
    # One warpgroup; each wgmma is 64 × tile_n × 16, repeated tile_m / 64 times down M and tile_k / 16 along K.
    tiled_mma = sm90_utils.make_trivial_tiled_mma(ab, ab, a_major.sm90_mma_major_mode(), b_major.sm90_mma_major_mode(),
                                                  cutlass.Float32, (1, 1, 1), tiler_mn=(64, config.tile_n))
    # Swizzled smem rings: the swizzle (128B when the contiguous extent allows) and the order follow each major.
    sA_layout = sm90_utils.make_smem_layout_a(a_major, tile, ab, config.stages)
    sB_layout = sm90_utils.make_smem_layout_b(b_major, tile, ab, config.stages)
    # TMA descriptors for one stage's box; the returned tensors hold coordinates, not data.
    tma_a, tA = cpasync.make_tiled_tma_atom(cpasync.CopyBulkTensorTileG2SOp(), mA,
                                            cute.slice_(sA_layout, (None, None, 0)), (tile[0], tile[2]))
    tma_b, tB = cpasync.make_tiled_tma_atom(cpasync.CopyBulkTensorTileG2SOp(), mB,
                                            cute.slice_(sB_layout, (None, None, 0)), (tile[1], tile[2]))
    grid = ((m + tile[0] - 1) // tile[0], (n + tile[1] - 1) // tile[1], 1)
    _kernel(tma_a, tA, tma_b, tB, mC, tiled_mma, sA_layout, sB_layout, ab, tile, config.stages).launch(
        grid=grid, block=(32 * WARPS, 1, 1), stream=stream)


gemm = gemm_launch.Launcher(host, Config, step="gemm5_wgmma", vector=True, min_cc=90, alternative="gemm4_multistage")
