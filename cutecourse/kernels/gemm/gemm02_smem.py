"""GEMM, step 2: shared-memory tiles and register blocking. The same FMAs as step 1, but each operand element is
read from global memory once per CTA tile instead of once per thread, and from shared memory once per 8 FMAs.

A CTA of 16 × 16 threads owns a 128 × 128 tile of C and walks K in tiles of ``tile_k`` (16). For each K tile it

1. copies the (128, tile_k) tiles of A and B into shared memory, one element per load, converted to fp32 on the
   way. Elements outside the matrices (the M, N and K tails: a partial last tile, K = 8 with tile_k = 16) are stored
   as 0, so they add nothing to the sums; the tiles are always whole in shared memory;
2. waits at a barrier (``bar.sync``), because each thread reads elements that other threads wrote;
3. has every thread accumulate an 8 × 8 block of C in registers: per k, 8 values of A and 8 of B from shared memory
   feed 64 FMAs (the outer product of the two vectors);
4. waits at a second barrier, so no thread overwrites the tile while another still reads it.

Both copies are TiledCopies with one-element atoms, threads laid along each operand's contiguous mode so that a
warp reads neighbouring addresses. The 16 × 16 threads and their 8 × 8 blocks form a TiledMMA of scalar FMA
"atoms" (``MmaUniversalOp``): a thread owns 4 consecutive rows twice, 64 rows apart (the permutation tile), so it
reads its A and B values as 16-byte shared-memory vectors, through TiledCopies that ``make_tiled_copy_A/B`` derive
from the TiledMMA. Step 3 keeps this whole structure and swaps the atoms for Tensor Core instructions.

Each element of A is loaded from global memory by N/128 CTAs instead of N threads (B likewise by M/128): 128× fewer
global loads than step 1. In the inner loop each value read from shared memory feeds 8 FMAs, so the FMA units,
not memory, now set the pace: fp32 SIMT arithmetic is what step 3 replaces. The store at the end converts to C's
dtype and skips the elements outside C. Any M, N, K and alignment work: every global access is a scalar one.

Config: tile_m a multiple of 4 · threads_m and tile_n of 4 · threads_n (a thread owns whole groups of 4 rows and
columns); the thread count a multiple of tile_m, tile_n and tile_k.

    gemm(a, b, c)   # c = a @ b; a (M, K), b (K, N) float16/bfloat16; c (M, N) float32/float16/bfloat16
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import cutlass
import cutlass.cute as cute

from cutecourse.kernels import predicate
from cutecourse.kernels.gemm import device, launcher

VECTOR = 4  # fp32 elements of one 16-byte shared-memory load: the consecutive rows (columns) a thread reads at once


@dataclass(frozen=True)
class Config:
    tile_m: int = 128  # CTA tile: tile_m × tile_n of C per CTA, K in steps of tile_k
    tile_n: int = 128
    tile_k: int = 16
    threads_m: int = 16  # threads_m × threads_n threads, each owning a (tile_m / threads_m) × (tile_n / threads_n)
    threads_n: int = 16  # block of C: 8 × 8

    def __post_init__(self) -> None:
        if self.tile_m % (VECTOR * self.threads_m) or self.tile_n % (VECTOR * self.threads_n):
            raise ValueError(f"{self}: a thread owns whole groups of {VECTOR} rows and columns, so tile_m must be a "
                             f"multiple of {VECTOR * self.threads_m} and tile_n of {VECTOR * self.threads_n}")
        threads = self.threads_m * self.threads_n
        if threads % self.tile_k or threads % self.tile_m or threads % self.tile_n:
            raise ValueError(f"{self}: the copies lay one thread per element along a tile's contiguous mode, so the "
                             f"{threads} threads must be a multiple of tile_k, tile_m and tile_n")


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
    sA = smem.allocate_tensor(cutlass.Float32, sA_layout, 16)  # (tile_m, tile_k)
    sB = smem.allocate_tensor(cutlass.Float32, sB_layout, 16)  # (tile_n, tile_k)

    # Partitions, global -> shared: each thread's elements of every K tile, staged in registers.
    thr_copy_a, thr_copy_b = tiled_copy_a.get_slice(tidx), tiled_copy_b.get_slice(tidx)
    tAgA = thr_copy_a.partition_S(gA)
    tAsA = thr_copy_a.partition_D(sA)
    tAcA = thr_copy_a.partition_S(cA)
    tBgB = thr_copy_b.partition_S(gB)
    tBsB = thr_copy_b.partition_D(sB)
    tBcB = thr_copy_b.partition_S(cB)
    tArA, tBrB = cute.make_fragment_like(tAsA, mA.element_type), cute.make_fragment_like(tBsB, mB.element_type)

    # Partitions, shared -> registers: this thread's 4 + 4 rows of A and columns of B per k, in 16-byte loads.
    thr_mma = tiled_mma.get_slice(tidx)
    tCrA = tiled_mma.make_fragment_A(thr_mma.partition_A(sA))  # (1, (4, 2), tile_k): rows 4i..4i+3 and 64 further
    tCrB = tiled_mma.make_fragment_B(thr_mma.partition_B(sB))
    acc = tiled_mma.make_fragment_C(thr_mma.partition_C(gC))  # (1, (4, 2), (4, 2)): the 8 × 8 block of C
    acc.fill(0.0)
    thr_copy_s2r_a, thr_copy_s2r_b = tiled_copy_s2r_a.get_slice(tidx), tiled_copy_s2r_b.get_slice(tidx)
    tCsA, tCrA_copy_view = thr_copy_s2r_a.partition_S(sA), thr_copy_s2r_a.retile(tCrA)
    tCsB, tCrB_copy_view = thr_copy_s2r_b.partition_S(sB), thr_copy_s2r_b.retile(tCrB)
    k_blocks = cute.size(tCrA, mode=[2])

    # Mainloop: load a K tile (zeros outside the matrices), wait, compute on it, wait.
    for kt in range(k_tiles):
        tArA.fill(0)
        tBrB.fill(0)
        cute.copy(tiled_copy_a, tAgA[None, None, None, kt], tArA,
                  pred=predicate.per_vector(tAcA[None, None, None, kt], mA.shape, 1))
        cute.copy(tiled_copy_b, tBgB[None, None, None, kt], tBrB,
                  pred=predicate.per_vector(tBcB[None, None, None, kt], mB.shape, 1))
        tAsA.store(tArA.load().to(cutlass.Float32))
        tBsB.store(tBrB.load().to(cutlass.Float32))
        cute.arch.sync_threads()  # the K tile is complete in shared memory
        for kb in cutlass.range_constexpr(k_blocks):  # one k at a time
            cute.copy(tiled_copy_s2r_a, tCsA[None, None, kb], tCrA_copy_view[None, None, kb])
            cute.copy(tiled_copy_s2r_b, tCsB[None, None, kb], tCrB_copy_view[None, None, kb])
            cute.gemm(tiled_mma, acc, tCrA[None, None, kb], tCrB[None, None, kb], acc)  # 64 FMAs: a[m] * b[n]
        cute.arch.sync_threads()  # every thread is done reading before the next K tile overwrites it

    # Epilogue: round to C's dtype and store the elements inside C, straight from the accumulator registers.
    device.store_inside(acc, thr_mma.partition_C(gC), thr_mma.partition_C(cC), mC.shape)


@cute.jit
def host(pA: cute.Pointer, pB: cute.Pointer, pC: cute.Pointer, m: cutlass.Int32, n: cutlass.Int32,
         k: cutlass.Int32, lda: cutlass.Int32, ldb: cutlass.Int32, ldc: cutlass.Int32, stream: Any,
         ops: cutlass.Constexpr, config: cutlass.Constexpr):
    mA, mB, mC = device.tensors(ops, pA, pB, pC, m, n, k, lda, ldb, ldc)
    ab = device.dtype(ops.ab)
    tiler = (config.tile_m, config.tile_n, config.tile_k)
    threads = config.threads_m * config.threads_n
    a_k, b_k = ops.a_major == "k", ops.b_major == "k"

    # threads_m × threads_n threads (consecutive threads along N), each computing 4 consecutive rows and 4
    # consecutive columns per 64 × 64 sub-tile: the permutation tile (16, 4):(4, 1) gives thread t rows 4t..4t+3
    # instead of t, t+16, ...
    atoms = cute.make_layout((config.threads_m, config.threads_n, 1), stride=(config.threads_n, 1, 0))
    perm_m = cute.make_layout((config.threads_m, VECTOR), stride=(VECTOR, 1))
    perm_n = cute.make_layout((config.threads_n, VECTOR), stride=(VECTOR, 1))
    tiled_mma = cute.make_tiled_mma(cute.nvgpu.MmaUniversalOp(cutlass.Float32), atoms,
                                    permutation_mnk=(perm_m, perm_n, None))

    # Shared memory: fp32 tiles, M- (N-) contiguous, so a thread's 4 consecutive rows are one 16-byte load. The
    # column pad of 4 words spreads a K-major load (a warp writes 2 rows × 16 k) over 16 banks instead of 2.
    sA_layout = cute.make_layout((config.tile_m, config.tile_k), stride=(1, config.tile_m + 4))
    sB_layout = cute.make_layout((config.tile_n, config.tile_k), stride=(1, config.tile_n + 4))

    # Global -> shared: one element per load, threads along each operand's contiguous mode.
    universal = cute.make_copy_atom(cute.nvgpu.CopyUniversalOp(), ab)
    tiled_copy_a = device.tiled_copy_ab(universal, a_k, config.tile_m, config.tile_k, threads, vector=1)
    tiled_copy_b = device.tiled_copy_ab(universal, b_k, config.tile_n, config.tile_k, threads, vector=1)
    # Shared -> registers: 16-byte loads of the 4 consecutive rows (columns) a thread's FMAs take, laid out as the
    # TiledMMA wants its operands.
    vector_fp32 = cute.make_copy_atom(cute.nvgpu.CopyUniversalOp(), cutlass.Float32, num_bits_per_copy=128)
    tiled_copy_s2r_a = cute.make_tiled_copy_A(vector_fp32, tiled_mma)
    tiled_copy_s2r_b = cute.make_tiled_copy_B(vector_fp32, tiled_mma)

    tiles_m, tiles_n = (m + config.tile_m - 1) // config.tile_m, (n + config.tile_n - 1) // config.tile_n
    _kernel(mA, mB, mC, tiled_mma, sA_layout, sB_layout, tiled_copy_a, tiled_copy_b, tiled_copy_s2r_a,
            tiled_copy_s2r_b, tiler).launch(grid=(tiles_m, tiles_n, 1), block=(threads, 1, 1), stream=stream)


gemm = launcher.Launcher(host, Config, vector=False, min_cc=80)
