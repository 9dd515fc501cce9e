"""GEMM, step 3: Tensor Cores. Step 2's FMAs become ``mma.sync`` instructions through a TiledMMA, fed from shared
memory by ``ldmatrix`` copies that the TiledMMA shapes, and global memory is read in 16-byte vectors.

The CTA structure is step 2's: a tile of C per CTA, K walked in tiles of ``tile_k``, one shared-memory buffer
filled, a barrier, consumed, a barrier. What changes is who does the arithmetic and how the operands reach it:

* **The MMA.** ``MmaF16BF16Op`` is one warp-wide ``mma.sync.aligned.m16n8k16``: a 16 × 16 block of A times a
  16 × 8 block of B, accumulated into a 16 × 8 block of C in fp32, each of the 32 lanes holding a fixed piece of
  every operand. A TiledMMA lays warps_m × warps_n warps over C; the permutation tile (16 · warps_m, 16 · warps_n,
  16) widens each warp's piece to 16 columns, so that per step each warp's B is 16 columns × 16 of K: four 8 × 8
  matrices, one ``ldmatrix.x4``. With the default 128 × 128 tile and 2 × 2 warps, each warp computes 64 × 64
  elements of C, 4 × 8 MMAs per 16-wide step of K.
* **Shared memory → registers.** ``ldmatrix`` loads four 8 × 8 matrices of 16-bit elements per warp, each lane
  supplying the address of one 16-byte row and receiving exactly the elements the MMA wants in its registers.
  ``make_tiled_copy_A/B`` derive that copy from the TiledMMA. With a K-major operand the 16-byte rows run along K
  and the matrices load as they are; with an M- (N-)major one the rows run along M (N) and ``transpose=True`` turns
  each 8 × 8 matrix around on the way. The shared tiles keep the operand's major, so both cases are one layout
  change; they are not swizzled, so the ``ldmatrix`` rows of a warp collide in a few banks (step 5 fixes that).
* **Global → shared memory.** Threads lay along each operand's contiguous mode and move 8 elements (16 bytes) per
  load, staged in registers, and the operands stay 16-bit in shared memory (the MMA converts nothing). The launcher
  promises that contiguous extents are multiples of 8 elements, so a vector is wholly inside the matrix or wholly
  outside: one predicate per vector. Outside vectors are written to shared memory as zeros, because the MMA reads
  whole tiles and zeros add nothing (this also covers the K tail).

The epilogue is step 2's: each accumulator rounded to C's dtype and stored from its register, inside C only.

Config: tile_k a multiple of 16 (the MMA's K); the warps_m × warps_n warps tile the CTA in whole 16 × 16 pieces.

    gemm(a, b, c)   # c = a @ b; a (M, K), b (K, N) float16/bfloat16; c (M, N) float32/float16/bfloat16
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import cutlass
import cutlass.cute as cute

from cutecourse.kernels import predicate
from cutecourse.kernels.gemm import device, launcher


@dataclass(frozen=True)
class Config:
    tile_m: int = 128  # CTA tile: tile_m × tile_n of C per CTA, K in steps of tile_k
    tile_n: int = 128
    tile_k: int = 32
    warps_m: int = 2  # warps_m × warps_n warps, each owning a (tile_m / warps_m) × (tile_n / warps_n) piece
    warps_n: int = 2

    def __post_init__(self) -> None:
        if self.tile_k % 16 or self.tile_m % (16 * self.warps_m) or self.tile_n % (16 * self.warps_n):
            raise ValueError(f"{self}: tile_k must be a multiple of 16, tile_m of 16 * warps_m, tile_n of 16 * warps_n")


@cute.kernel
def _kernel(mA: cute.Tensor, mB: cute.Tensor, mC: cute.Tensor, tiled_mma: cute.TiledMma, sA_layout: cute.Layout,
            sB_layout: cute.Layout, tiled_copy_a: cute.TiledCopy, tiled_copy_b: cute.TiledCopy,
            tiled_copy_s2r_a: cute.TiledCopy, tiled_copy_s2r_b: cute.TiledCopy, tiler: cutlass.Constexpr):
    tidx, _, _ = cute.arch.thread_idx()
    bidx, bidy, _ = cute.arch.block_idx()
    # Tiles: gA (tile_m, tile_k, k_tiles), gB (tile_n, tile_k, k_tiles), gC (tile_m, tile_n), and cA, cB, cC their
    # coordinates in the whole matrices (for the predicates at the M, N and K tails).
    gA, gB, gC, cA, cB, cC = device.cta_tiles(mA, mB, mC, tiler, (bidx, bidy, None))
    k_tiles = cute.size(gA, mode=[2])

    smem = cutlass.memory.SmemAllocator()
    sA = smem.allocate_tensor(mA.element_type, sA_layout, 16)  # (tile_m, tile_k)
    sB = smem.allocate_tensor(mB.element_type, sB_layout, 16)  # (tile_n, tile_k)

    # Partitions, global -> shared: each thread's 16-byte vectors of every K tile, staged in registers.
    thr_copy_a, thr_copy_b = tiled_copy_a.get_slice(tidx), tiled_copy_b.get_slice(tidx)
    tAgA = thr_copy_a.partition_S(gA)
    tAsA = thr_copy_a.partition_D(sA)
    tAcA = thr_copy_a.partition_S(cA)
    tBgB = thr_copy_b.partition_S(gB)
    tBsB = thr_copy_b.partition_D(sB)
    tBcB = thr_copy_b.partition_S(cB)
    tArA, tBrB = cute.make_fragment_like(tAsA), cute.make_fragment_like(tBsB)
    vector = 128 // mA.element_type.width

    # Partitions, shared -> registers: ldmatrix ×4 into the MMA's register layout (.trans for MN-major operands).
    thr_mma = tiled_mma.get_slice(tidx)
    tCrA = tiled_mma.make_fragment_A(thr_mma.partition_A(sA))  # (MMA, MMA_M, k_blocks)
    tCrB = tiled_mma.make_fragment_B(thr_mma.partition_B(sB))
    acc = tiled_mma.make_fragment_C(thr_mma.partition_C(gC))
    acc.fill(0.0)
    thr_copy_s2r_a, thr_copy_s2r_b = tiled_copy_s2r_a.get_slice(tidx), tiled_copy_s2r_b.get_slice(tidx)
    tCsA, tCrA_copy_view = thr_copy_s2r_a.partition_S(sA), thr_copy_s2r_a.retile(tCrA)
    tCsB, tCrB_copy_view = thr_copy_s2r_b.partition_S(sB), thr_copy_s2r_b.retile(tCrB)
    k_blocks = cute.size(tCrA, mode=[2])

    # Mainloop: load a K tile (zeros for the vectors outside the matrices), wait, compute on it, wait.
    for kt in range(k_tiles):
        tArA.fill(0)
        tBrB.fill(0)
        cute.copy(tiled_copy_a, tAgA[None, None, None, kt], tArA,
                  pred=predicate.per_vector(tAcA[None, None, None, kt], mA.shape, vector))
        cute.copy(tiled_copy_b, tBgB[None, None, None, kt], tBrB,
                  pred=predicate.per_vector(tBcB[None, None, None, kt], mB.shape, vector))
        cute.copy(tiled_copy_a, tArA, tAsA)
        cute.copy(tiled_copy_b, tBrB, tBsB)
        cute.arch.sync_threads()  # the K tile is complete in shared memory
        for kb in cutlass.range_constexpr(k_blocks):  # tile_k / 16 steps of the MMA's K
            cute.copy(tiled_copy_s2r_a, tCsA[None, None, kb], tCrA_copy_view[None, None, kb])
            cute.copy(tiled_copy_s2r_b, tCsB[None, None, kb], tCrB_copy_view[None, None, kb])
            cute.gemm(tiled_mma, acc, tCrA[None, None, kb], tCrB[None, None, kb], acc)
        cute.arch.sync_threads()  # every warp is done reading before the next K tile overwrites it

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

    # Shared memory: one tile of A and one of B, each keeping its operand's major (K-major: rows of tile_k;
    # MN-major: columns of tile_m), unswizzled.
    sA_layout = cute.make_ordered_layout((config.tile_m, config.tile_k), order=(1, 0) if a_k else (0, 1))
    sB_layout = cute.make_ordered_layout((config.tile_n, config.tile_k), order=(1, 0) if b_k else (0, 1))

    # Global -> shared: 16-byte loads and stores through registers, threads along each operand's contiguous mode.
    universal = cute.make_copy_atom(cute.nvgpu.CopyUniversalOp(), ab, num_bits_per_copy=128)
    tiled_copy_a = device.tiled_copy_ab(universal, a_k, config.tile_m, config.tile_k, threads)
    tiled_copy_b = device.tiled_copy_ab(universal, b_k, config.tile_n, config.tile_k, threads)
    # Shared -> registers: ldmatrix ×4 laid out as the MMA wants its operands; .trans for MN-major ones.
    tiled_copy_s2r_a = cute.make_tiled_copy_A(
        cute.make_copy_atom(cute.nvgpu.warp.LdMatrix8x8x16bOp(not a_k, 4), ab), tiled_mma)
    tiled_copy_s2r_b = cute.make_tiled_copy_B(
        cute.make_copy_atom(cute.nvgpu.warp.LdMatrix8x8x16bOp(not b_k, 4), ab), tiled_mma)

    tiles_m, tiles_n = (m + config.tile_m - 1) // config.tile_m, (n + config.tile_n - 1) // config.tile_n
    _kernel(mA, mB, mC, tiled_mma, sA_layout, sB_layout, tiled_copy_a, tiled_copy_b, tiled_copy_s2r_a,
            tiled_copy_s2r_b, tiler).launch(grid=(tiles_m, tiles_n, 1), block=(threads, 1, 1), stream=stream)


gemm = launcher.Launcher(host, Config, vector=True, min_cc=80)
