"""GEMM, step 4: a multistage pipeline, so that loads and math overlap. ``cp.async`` keeps ``stages - 1`` K tiles in
flight while one is computed, and inside a K tile the ``ldmatrix`` of the next k-block runs ahead of the MMAs.

Step 3 loaded a K tile, waited, computed, waited, and loaded the next one: the Tensor Cores idled during every load.
Here shared memory holds ``stages`` K tiles of A and B. ``cp.async`` copies 16 bytes from global to shared memory
without passing through registers; each K tile's copies form one commit group, and ``cp_async_wait_group(stages -
2)`` waits only until the oldest of the tiles in flight has landed, so the SM computes on tile kt while tiles kt+1 ..
kt+stages-2 are still arriving; the copy of tile kt+stages-1 goes into the stage that tile kt-1 has just freed.
Inside a K tile the registers are double buffered the same way: the ``ldmatrix`` of k-block i+1 is issued before
the MMAs of k-block i.

The predicates leave the mainloop too. The K tiles are shifted so that the *first* one is partial (it starts at
k < 0) and all later ones are whole, so one predicate per vector, on M (N) only, serves every tile but the first,
which also tests k >= 0. A predicated-off ``cp.async`` reads nothing and fills its 16 bytes of shared memory with
zeros, so the vectors with k < 0 and the rows past M (N) add zeros to the accumulators.

The shared tiles are still plain (each operand's major, unswizzled), so the rows one ``ldmatrix`` phase reads share
banks; step 5 swizzles them. The epilogue is step 3's, from registers.

Config: tile_k 32 or 64, tile_n a power of two ≥ 64, tile_m a multiple of 64; each of the warps_m × warps_n warps
owns whole 16 × 16 MMA pieces; stages ≥ 3; the stages fit the sm_80 shared memory.

    gemm(a, b, c)   # c = a @ b; a (M, K), b (K, N) float16/bfloat16; c (M, N) float32/float16/bfloat16
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import cutlass
import cutlass.cute as cute

from cutecourse import hw
from cutecourse.kernels import predicate
from cutecourse.kernels.gemm import device, launcher

SMEM_BYTES = hw.ARCH_LIMITS["sm_80"].smem_per_block_max  # shared memory one A100 CTA may use


@dataclass(frozen=True)
class Config:
    tile_m: int = 256  # CTA tile: tile_m × tile_n of C per CTA, K in steps of tile_k (step 5's, so that the two
    tile_n: int = 128  # compare)
    tile_k: int = 64
    warps_m: int = 4  # warps_m × warps_n warps, each owning a (tile_m / warps_m) × (tile_n / warps_n) piece
    warps_n: int = 2
    stages: int = 3  # K tiles resident in shared memory (stages - 1 in flight while one is computed)

    def __post_init__(self) -> None:
        if self.tile_k not in (32, 64) or self.tile_n & (self.tile_n - 1) or self.tile_n < 64 or self.tile_m % 64:
            raise ValueError(f"{self}: tile_k must be 32 or 64, tile_n a power of two >= 64, tile_m a multiple of 64")
        if self.tile_m % (16 * self.warps_m) or self.tile_n % (16 * self.warps_n) or self.stages < 3:
            raise ValueError(f"{self}: each warp needs whole 16 x 16 MMA pieces (tile_m a multiple of 16 * warps_m, "
                             f"tile_n of 16 * warps_n), and stages >= 3")
        if self.stages * (self.tile_m + self.tile_n) * self.tile_k * 2 > SMEM_BYTES:
            raise ValueError(f"{self}: {self.stages} stages of 16-bit A and B tiles take more than the {SMEM_BYTES} "
                             "bytes of shared memory a CTA may use; lower stages or tile_k")


@cute.kernel
def _kernel(mA: cute.Tensor, mB: cute.Tensor, mC: cute.Tensor, tiled_mma: cute.TiledMma, sA_layout: cute.Layout,
            sB_layout: cute.Layout, tiled_copy_a: cute.TiledCopy, tiled_copy_b: cute.TiledCopy,
            tiled_copy_s2r_a: cute.TiledCopy, tiled_copy_s2r_b: cute.TiledCopy, tiler: cutlass.Constexpr):
    tidx, _, _ = cute.arch.thread_idx()
    bidx, bidy, _ = cute.arch.block_idx()
    M = mA.shape[0]
    N = mB.shape[0]
    K = mA.shape[1]
    _, _, tile_k = tiler
    stages = cute.size(sA_layout, mode=[2])
    # Tiles: gA (tile_m, tile_k, k_tiles), gB (tile_n, tile_k, k_tiles), gC (tile_m, tile_n), and cA, cB, cC their
    # coordinates. K is shifted by the residue (<= 0) so that the partial K tile is the first one.
    gA, gB, gC, cA, cB, cC = device.cta_tiles(mA, mB, mC, tiler, (bidx, bidy, None))
    k_tiles = cute.size(gA, mode=[2])
    shift = (0, K - k_tiles * tile_k, 0)
    gA, gB, cA, cB = (cute.domain_offset(shift, t) for t in (gA, gB, cA, cB))
    gA = cute.make_tensor(gA.iterator.align(16), gA.layout)  # the shift is a whole number of 16-byte vectors
    gB = cute.make_tensor(gB.iterator.align(16), gB.layout)

    smem = cutlass.memory.SmemAllocator()
    sA = smem.allocate_tensor(mA.element_type, sA_layout, 16)  # (tile_m, tile_k, stages)
    sB = smem.allocate_tensor(mB.element_type, sB_layout, 16)  # (tile_n, tile_k, stages)

    # Partitions, global -> shared: each thread's 16-byte vectors of every K tile, and which of them to copy.
    thr_copy_a, thr_copy_b = tiled_copy_a.get_slice(tidx), tiled_copy_b.get_slice(tidx)
    tAgA = thr_copy_a.partition_S(gA)
    tAsA = thr_copy_a.partition_D(sA)
    tAcA = thr_copy_a.partition_S(cA)
    tBgB = thr_copy_b.partition_S(gB)
    tBsB = thr_copy_b.partition_D(sB)
    tBcB = thr_copy_b.partition_S(cB)
    vector = 128 // mA.element_type.width
    tApA = predicate.per_vector_if(tAcA[None, None, None, 0], vector, lambda c: c[0] < M)  # rows inside M
    tBpB = predicate.per_vector_if(tBcB[None, None, None, 0], vector, lambda c: c[0] < N)
    # The first tile also needs k >= 0.
    tApA0 = predicate.per_vector_if(tAcA[None, None, None, 0], vector, lambda c: (c[0] < M) & (c[1] >= 0))
    tBpB0 = predicate.per_vector_if(tBcB[None, None, None, 0], vector, lambda c: (c[0] < N) & (c[1] >= 0))

    # Partitions, shared -> registers: ldmatrix ×4 into the MMA's register layout (.trans for MN-major operands).
    thr_mma = tiled_mma.get_slice(tidx)
    tCrA = tiled_mma.make_fragment_A(thr_mma.partition_A(sA)[None, None, None, 0])  # (MMA, MMA_M, k_blocks)
    tCrB = tiled_mma.make_fragment_B(thr_mma.partition_B(sB)[None, None, None, 0])
    acc = tiled_mma.make_fragment_C(thr_mma.partition_C(gC))
    acc.fill(0.0)
    thr_copy_s2r_a, thr_copy_s2r_b = tiled_copy_s2r_a.get_slice(tidx), tiled_copy_s2r_b.get_slice(tidx)
    tCsA, tCrA_copy_view = thr_copy_s2r_a.partition_S(sA), thr_copy_s2r_a.retile(tCrA)
    tCsB, tCrB_copy_view = thr_copy_s2r_b.partition_S(sB), thr_copy_s2r_b.retile(tCrB)
    k_blocks = cute.size(tCrA, mode=[2])

    # Mainloop, prologue: put stages - 1 K tiles in flight. A predicated-off cp.async still writes its 16 bytes of
    # shared memory, with zeros (it copies 0 source bytes and fills the rest), so the k < 0 part of the first tile
    # and the rows past M (N) of every tile are zero.
    cute.copy(tiled_copy_a, tAgA[None, None, None, 0], tAsA[None, None, None, 0], pred=tApA0)
    cute.copy(tiled_copy_b, tBgB[None, None, None, 0], tBsB[None, None, None, 0], pred=tBpB0)
    cute.arch.cp_async_commit_group()
    for s in cutlass.range_constexpr(1, stages - 1):
        if s < k_tiles:
            cute.copy(tiled_copy_a, tAgA[None, None, None, s], tAsA[None, None, None, s], pred=tApA)
            cute.copy(tiled_copy_b, tBgB[None, None, None, s], tBsB[None, None, None, s], pred=tBpB)
        cute.arch.cp_async_commit_group()  # one group per K tile, even an empty one, keeps the count exact

    # Mainloop. K tile kt lives in stage `read`; its first k-block is already in registers.
    cute.arch.cp_async_wait_group(stages - 2)  # tile 0 has landed (for this thread) ...
    cute.arch.sync_threads()  # ... and for every thread
    cute.copy(tiled_copy_s2r_a, tCsA[None, None, 0, 0], tCrA_copy_view[None, None, 0])
    cute.copy(tiled_copy_s2r_b, tCsB[None, None, 0, 0], tCrB_copy_view[None, None, 0])
    read = cutlass.Int32(0)
    for kt in range(k_tiles):
        nxt = read + 1
        if nxt == stages:
            nxt = cutlass.Int32(0)
        for kb in cutlass.range_constexpr(k_blocks):
            stage = read
            if kb == k_blocks - 1:  # the next k-block is the next tile's first: wait until it has landed
                stage = nxt
                cute.arch.cp_async_wait_group(stages - 2)
                cute.arch.sync_threads()
            kn = (kb + 1) % k_blocks
            cute.copy(tiled_copy_s2r_a, tCsA[None, None, kn, stage], tCrA_copy_view[None, None, kn])
            cute.copy(tiled_copy_s2r_b, tCsB[None, None, kn, stage], tCrB_copy_view[None, None, kn])
            if kb == 0:  # refill the stage tile kt-1 used (all threads are past it) with tile kt + stages - 1
                write = read - 1
                if read == 0:
                    write = cutlass.Int32(stages - 1)
                if kt + stages - 1 < k_tiles:
                    cute.copy(tiled_copy_a, tAgA[None, None, None, kt + stages - 1],
                              tAsA[None, None, None, write], pred=tApA)
                    cute.copy(tiled_copy_b, tBgB[None, None, None, kt + stages - 1],
                              tBsB[None, None, None, write], pred=tBpB)
                cute.arch.cp_async_commit_group()
            cute.gemm(tiled_mma, acc, tCrA[None, None, kb], tCrB[None, None, kb], acc)
        read = nxt

    # Epilogue: round to C's dtype and store the elements inside C, straight from the accumulator registers.
    device.store_inside(acc, thr_mma.partition_C(gC), thr_mma.partition_C(cC), mC.shape)


@cute.jit
def host(pA: cute.Pointer, pB: cute.Pointer, pC: cute.Pointer, m: cutlass.Int32, n: cutlass.Int32,
         k: cutlass.Int32, lda: cutlass.Int32, ldb: cutlass.Int32, ldc: cutlass.Int32, stream: Any,
         ops: cutlass.Constexpr, config: cutlass.Constexpr):
    mA, mB, mC = device.tensors(ops, pA, pB, pC, m, n, k, lda, ldb, ldc)
    ab = device.dtype(ops.ab)
    tiler = (config.tile_m, config.tile_n, config.tile_k)
    threads = cute.arch.WARP_SIZE * config.warps_m * config.warps_n
    a_k, b_k = ops.a_major == "k", ops.b_major == "k"

    # 16×8×16 mma.sync atoms, warps_m × warps_n warps; N permuted to 16 per warp so ldmatrix ×4 loads B too.
    tiled_mma = cute.make_tiled_mma(cute.nvgpu.warp.MmaF16BF16Op(ab, cutlass.Float32, (16, 8, 16)),
                                    cute.make_layout((config.warps_m, config.warps_n, 1)),
                                    permutation_mnk=(16 * config.warps_m, 16 * config.warps_n, 16))

    # Shared memory: `stages` tiles of A and B, each keeping its operand's major (K-major: rows of tile_k; MN-major:
    # columns of tile_m), unswizzled.
    sA_layout = cute.make_ordered_layout((config.tile_m, config.tile_k, config.stages),
                                         order=(1, 0, 2) if a_k else (0, 1, 2))
    sB_layout = cute.make_ordered_layout((config.tile_n, config.tile_k, config.stages),
                                         order=(1, 0, 2) if b_k else (0, 1, 2))

    # Global -> shared: cp.async of 16 bytes, threads along each operand's contiguous mode.
    cp_async = cute.make_copy_atom(
        cute.nvgpu.cpasync.CopyG2SOp(cache_mode=cute.nvgpu.cpasync.LoadCacheMode.GLOBAL), ab, num_bits_per_copy=128)
    tiled_copy_a = device.tiled_copy_ab(cp_async, a_k, config.tile_m, config.tile_k, threads)
    tiled_copy_b = device.tiled_copy_ab(cp_async, b_k, config.tile_n, config.tile_k, threads)
    # Shared -> registers: ldmatrix ×4 laid out as the MMA wants its operands; .trans for MN-major ones.
    tiled_copy_s2r_a = cute.make_tiled_copy_A(
        cute.make_copy_atom(cute.nvgpu.warp.LdMatrix8x8x16bOp(not a_k, 4), ab), tiled_mma)
    tiled_copy_s2r_b = cute.make_tiled_copy_B(
        cute.make_copy_atom(cute.nvgpu.warp.LdMatrix8x8x16bOp(not b_k, 4), ab), tiled_mma)

    tiles_m, tiles_n = (m + config.tile_m - 1) // config.tile_m, (n + config.tile_n - 1) // config.tile_n
    _kernel(mA, mB, mC, tiled_mma, sA_layout, sB_layout, tiled_copy_a, tiled_copy_b, tiled_copy_s2r_a,
            tiled_copy_s2r_b, tiler).launch(grid=(tiles_m, tiles_n, 1), block=(threads, 1, 1), stream=stream)


gemm = launcher.Launcher(host, Config, vector=True, min_cc=80)
