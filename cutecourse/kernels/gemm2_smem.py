"""GEMM, step 2: shared-memory tiling and register blocking. The same FMAs as step 1, but each operand element is
read from global memory once per CTA tile instead of once per thread, and from shared memory once per 8 FMAs.

A CTA of 256 threads owns a 128 × 128 tile of C and walks K in slices of ``bk`` (16). For each slice it

1. copies the (128, bk) slices of A and B into shared memory, one element per load, converted to fp32 on the way.
   Elements outside the matrices (the M, N and K tails: a partial last tile, K = 8 with bk = 16) are stored as 0,
   so they add nothing to the sums; the tiles are always whole in shared memory;
2. waits at a barrier (``bar.sync``), because each thread reads elements that other threads wrote;
3. has every thread accumulate an 8 × 8 block of C in registers: per k, 8 values of A and 8 of B from shared memory
   feed 64 FMAs (the outer product of the two vectors);
4. waits at a second barrier, so no thread overwrites the slice while another still reads it.

The 16 × 16 threads and their 8 × 8 blocks form a TiledMMA of scalar FMA "atoms" (``MmaUniversalOp``): a thread
owns 4 consecutive rows twice, 64 rows apart (the permutation tile), so it reads its A and B values as 16-byte
shared-memory vectors. Step 3 keeps this whole structure and swaps the atom for a Tensor Core instruction.

Each element of A is loaded from global memory by N/128 CTAs instead of N threads (B likewise by M/128): 128× fewer
global loads than step 1. In the inner loop each value read from shared memory feeds 8 FMAs, so the FMA units,
not memory, now set the pace: fp32 SIMT arithmetic is what step 3 replaces. The store at the end converts to C's
dtype and skips the elements outside C. Any M, N, K and alignment work: every global access is a scalar one.

    gemm(a, b, c)   # c = a @ b; a (M, K), b (K, N) float16/bfloat16; c (M, N) float32/float16/bfloat16
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import cutlass
import cutlass.cute as cute

from cutecourse.kernels import gemm_launch


@dataclass(frozen=True)
class Config:
    bm: int = 128  # CTA tile: rows of C
    bn: int = 128  # CTA tile: columns of C
    bk: int = 16  # K slice staged in shared memory per iteration
    threads: int = 256  # 16 × 16 threads, each owns a (bm/16) × (bn/16) = 8 × 8 block of C


def _loader(major_is_k: bool, rows: int, bk: int, threads: int) -> cute.Layout:
    """Threads laid along an operand slice's contiguous mode, so a warp reads neighbouring addresses."""
    if major_is_k:
        return cute.make_layout((threads // bk, bk), stride=(bk, 1))
    return cute.make_layout((rows, threads // rows), stride=(1, rows))


@cute.jit
def _stage(g: cute.Tensor, c: cute.Tensor, s: cute.Tensor, shape: cute.Shape, thr: cute.Layout, tidx: cutlass.Int32):
    """Copy one (rows, bk) slice from global `g` to shared `s` as fp32: zeros where the identity coordinates `c` fall
    outside `shape`."""
    tg, tc, ts = (cute.local_partition(t, thr, tidx) for t in (g, c, s))
    pred = cute.make_rmem_tensor(tc.shape, cutlass.Boolean)
    for i in cutlass.range_constexpr(cute.size(pred)):
        pred[i] = cute.elem_less(tc[i], shape)
    regs = cute.make_fragment_like(tg)
    regs.fill(0)
    cute.copy(cute.make_copy_atom(cute.nvgpu.CopyUniversalOp(), g.element_type), tg, regs, pred=pred)
    ts.store(regs.load().to(cutlass.Float32))


@cute.kernel
def _kernel(mA: cute.Tensor, mB: cute.Tensor, mC: cute.Tensor, tiled_mma: cute.TiledMma, s_layout_a: cute.Layout,
            s_layout_b: cute.Layout, thr_a: cute.Layout, thr_b: cute.Layout, tiler: cutlass.Constexpr):
    tidx, _, _ = cute.arch.thread_idx()
    bx, by, _ = cute.arch.block_idx()
    coord = (bx, by, None)
    # This CTA's tiles: gA (bm, bk, k-tiles), gB (bn, bk, k-tiles), gC (bm, bn), and their identity (coordinate)
    # twins, which say where each element lies in the whole matrix.
    gA, gB, gC, cA, cB, cC = gemm_launch.cta_tiles(mA, mB, mC, tiler, coord)

    smem = cutlass.memory.SmemAllocator()
    sA = smem.allocate_tensor(cutlass.Float32, s_layout_a, 16)
    sB = smem.allocate_tensor(cutlass.Float32, s_layout_b, 16)

    # This thread's view of the shared slices and its 8 × 8 accumulator block.
    thr_mma = tiled_mma.get_slice(tidx)
    tCsA = thr_mma.partition_A(sA)  # (1, (4, 2), bk): rows 4i..4i+3 and the same 64 rows further, per k
    tCsB = thr_mma.partition_B(sB)  # (1, (4, 2), bk)
    tCgC = thr_mma.partition_C(gC)  # (1, (4, 2), (4, 2)): the 8 × 8 block of C this thread owns
    tCrA = cute.make_fragment_like(tCsA[None, None, 0])  # one k column of A: 8 registers
    tCrB = cute.make_fragment_like(tCsB[None, None, 0])
    acc = cute.make_fragment_like(tCgC, cutlass.Float32)
    acc.fill(0.0)

    for kt in cutlass.range(cute.size(gA, mode=[2])):
        _stage(gA[None, None, kt], cA[None, None, kt], sA, mA.shape, thr_a, tidx)
        _stage(gB[None, None, kt], cB[None, None, kt], sB, mB.shape, thr_b, tidx)
        cute.arch.barrier()  # the slice is complete in shared memory
        for kk in cutlass.range_constexpr(cute.size(tCsA, mode=[2])):
            cute.autovec_copy(tCsA[None, None, kk], tCrA)
            cute.autovec_copy(tCsB[None, None, kk], tCrB)
            cute.gemm(tiled_mma, acc, tCrA, tCrB, acc)  # 64 FMAs: acc[m, n] += a[m] * b[n]
        cute.arch.barrier()  # every thread is done reading before the next slice overwrites it

    # Epilogue: round to C's dtype and store the elements inside C, straight from the accumulator registers.
    gemm_launch.store_inside(acc, tCgC, thr_mma.partition_C(cC), mC.shape)


@cute.jit
def host(pA: cute.Pointer, pB: cute.Pointer, pC: cute.Pointer, m: cutlass.Int32, n: cutlass.Int32,
         k: cutlass.Int32, stream: Any, ops: cutlass.Constexpr, config: cutlass.Constexpr):
    mA, mB, mC = gemm_launch.tensors(ops, pA, pB, pC, m, n, k)
    bm, bn, bk, threads = config.bm, config.bn, config.bk, config.threads
    # Shared slices are M- (N-) contiguous, so a thread's 4 consecutive rows are one 16-byte load. The column pad
    # of 4 words spreads a K-major load (a warp writes 2 rows × 16 k) over 16 banks instead of 2.
    s_layout_a = cute.make_layout((bm, bk), stride=(1, bm + 4))
    s_layout_b = cute.make_layout((bn, bk), stride=(1, bn + 4))
    # 16 × 16 threads (consecutive threads along N), each computing 4 consecutive rows and 4 consecutive columns
    # per 64 × 64 sub-tile: the permutation tile (16, 4):(4, 1) gives thread t rows 4t..4t+3 instead of t, t+16, ...
    side = 16
    atoms = cute.make_layout((threads // side, side, 1), stride=(side, 1, 0))
    perm_m = cute.make_layout((threads // side, 4), stride=(4, 1))
    perm_n = cute.make_layout((side, 4), stride=(4, 1))
    tiled_mma = cute.make_tiled_mma(cute.nvgpu.MmaUniversalOp(cutlass.Float32), atoms,
                                    permutation_mnk=(perm_m, perm_n, None))
    thr_a = _loader(ops.a_major == "k", bm, bk, threads)
    thr_b = _loader(ops.b_major == "k", bn, bk, threads)
    _kernel(mA, mB, mC, tiled_mma, s_layout_a, s_layout_b, thr_a, thr_b, (bm, bn, bk)).launch(
        grid=((m + bm - 1) // bm, (n + bn - 1) // bn, 1), block=(threads, 1, 1), stream=stream)


gemm = gemm_launch.Launcher(host, Config, step="gemm2_smem", vector=False, min_cc=80, alternative="gemm1_naive")
