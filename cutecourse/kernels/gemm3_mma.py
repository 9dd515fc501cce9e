"""GEMM, step 3: Tensor Cores. The FMAs of step 2 become ``mma.sync`` instructions, fed from shared memory by
``ldmatrix``, and global memory is read in 16-byte vectors.

The CTA structure is step 2's: a 128 × 128 tile of C, K walked in slices of ``bk`` (32), one shared-memory buffer
filled, a barrier, consumed, a barrier. What changes is who does the arithmetic and how the operands reach it:

* **The MMA.** ``MmaF16BF16Op`` is one warp-wide ``mma.sync.aligned.m16n8k16``: a 16 × 16 block of A times a
  16 × 8 block of B, accumulated into a 16 × 8 block of C in fp32, each of the 32 lanes holding a fixed piece of
  every operand. A TiledMMA lays 2 × 2 warps (128 threads) over a 32 × 16 piece of C; the permutation tile
  (32, 32, 16) widens it to 32 columns, so that per step each warp's B is 16 columns × 16 of K: four 8 × 8
  matrices, one ``ldmatrix.x4``.
  Repeated over the 128 × 128 tile, each warp computes 64 × 64 elements of C, 4 × 8 MMAs per 16-wide step of K.
* **Shared memory → registers.** ``ldmatrix`` loads four 8 × 8 matrices of 16-bit elements per warp, each lane
  supplying the address of one 16-byte row and receiving exactly the elements the MMA wants in its registers.
  ``make_tiled_copy_A/B`` derive that copy from the TiledMMA. With a K-major operand the 16-byte rows run along K
  and the matrices load as they are; with an M- (N-)major one the rows run along M (N) and ``transpose=True`` turns
  each 8 × 8 matrix around on the way. The shared tiles keep the operand's major, so both cases are one layout
  change. They are not swizzled, so the ``ldmatrix`` rows of a warp collide in a few banks; step 4 fixes that.
* **Global → shared memory.** Threads lay along each operand's contiguous mode and move 8 elements (16 bytes) per
  load, staged in registers. The launcher promises that contiguous extents are multiples of 8 elements, so a vector
  is wholly inside the matrix or wholly outside: one predicate per vector. Outside vectors are written to shared
  memory as zeros, because the MMA reads whole tiles and zeros add nothing (this also covers the K tail).

The epilogue converts the fp32 accumulators to C's dtype and stores them straight from registers, skipping the
elements outside C.

    gemm(a, b, c)   # c = a @ b; a (M, K), b (K, N) float16/bfloat16; c (M, N) float32/float16/bfloat16
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import cutlass
import cutlass.cute as cute

from cutecourse.kernels import gemm_launch
from cutecourse.kernels.predicate import per_vector


@dataclass(frozen=True)
class Config:
    bm: int = 128  # CTA tile: rows of C
    bn: int = 128  # CTA tile: columns of C
    bk: int = 32  # K slice staged in shared memory per iteration (a multiple of 16, the MMA's K)
    warps_m: int = 2  # warps along M ...
    warps_n: int = 2  # ... and along N: 4 warps, 128 threads


def _loader(dtype: Any, major_is_k: bool, rows: int, bk: int, threads: int) -> cute.TiledCopy:
    """A global → shared copy of a (rows, bk) slice: 16-byte vectors along the contiguous mode, threads next to
    each other along it too, so a warp reads whole 32-byte sectors."""
    vec = 128 // dtype.width
    atom = cute.make_copy_atom(cute.nvgpu.CopyUniversalOp(), dtype, num_bits_per_copy=128)
    if major_is_k:
        lanes = bk // vec
        thr = cute.make_layout((threads // lanes, lanes), stride=(lanes, 1))
        return cute.make_tiled_copy_tv(atom, thr, cute.make_layout((1, vec)))
    lanes = rows // vec
    thr = cute.make_layout((lanes, threads // lanes), stride=(1, lanes))
    return cute.make_tiled_copy_tv(atom, thr, cute.make_layout((vec, 1)))


@cute.jit
def _stage(tiled_copy: cute.TiledCopy, g: cute.Tensor, c: cute.Tensor, s: cute.Tensor, shape: cute.Shape,
           tidx: cutlass.Int32):
    """Copy one (rows, bk) slice from global `g` to shared `s` in 16-byte vectors, through registers: zeros for the
    vectors whose identity coordinates `c` fall outside `shape`."""
    thr = tiled_copy.get_slice(tidx)
    tg, tc, ts = thr.partition_S(g), thr.partition_S(c), thr.partition_D(s)
    regs = cute.make_fragment_like(ts)
    regs.fill(0)
    cute.copy(tiled_copy, tg, regs, pred=per_vector(tc, shape, 128 // g.element_type.width))
    cute.copy(tiled_copy, regs, ts)


@cute.kernel
def _kernel(mA: cute.Tensor, mB: cute.Tensor, mC: cute.Tensor, tiled_mma: cute.TiledMma, s_layout_a: cute.Layout,
            s_layout_b: cute.Layout, copy_a: cute.TiledCopy, copy_b: cute.TiledCopy, tiler: cutlass.Constexpr,
            a_mn_major: cutlass.Constexpr[bool], b_mn_major: cutlass.Constexpr[bool]):
    tidx, _, _ = cute.arch.thread_idx()
    bx, by, _ = cute.arch.block_idx()
    coord = (bx, by, None)
    gA, gB, gC, cA, cB, cC = gemm_launch.cta_tiles(mA, mB, mC, tiler, coord)

    smem = cutlass.memory.SmemAllocator()
    sA = smem.allocate_tensor(mA.element_type, s_layout_a, 16)
    sB = smem.allocate_tensor(mB.element_type, s_layout_b, 16)

    # The MMA's view: this thread's registers for A, B (one slice) and its accumulators.
    thr_mma = tiled_mma.get_slice(tidx)
    tCrA = tiled_mma.make_fragment_A(thr_mma.partition_A(sA))  # (MMA, MMA_M, MMA_K) registers
    tCrB = tiled_mma.make_fragment_B(thr_mma.partition_B(sB))
    tCgC = thr_mma.partition_C(gC)
    acc = tiled_mma.make_fragment_C(tCgC)
    acc.fill(0.0)

    # ldmatrix copies shaped by the MMA: the same registers, seen by the copy (retile), and the smem they come from.
    ldsm_a = cute.make_copy_atom(cute.nvgpu.warp.LdMatrix8x8x16bOp(transpose=a_mn_major, num_matrices=4),
                                 mA.element_type)
    ldsm_b = cute.make_copy_atom(cute.nvgpu.warp.LdMatrix8x8x16bOp(transpose=b_mn_major, num_matrices=4),
                                 mB.element_type)
    s2r_a = cute.make_tiled_copy_A(ldsm_a, tiled_mma).get_slice(tidx)
    s2r_b = cute.make_tiled_copy_B(ldsm_b, tiled_mma).get_slice(tidx)
    tXsA, tXrA = s2r_a.partition_S(sA), s2r_a.retile(tCrA)
    tXsB, tXrB = s2r_b.partition_S(sB), s2r_b.retile(tCrB)

    for kt in cutlass.range(cute.size(gA, mode=[2])):
        _stage(copy_a, gA[None, None, kt], cA[None, None, kt], sA, mA.shape, tidx)
        _stage(copy_b, gB[None, None, kt], cB[None, None, kt], sB, mB.shape, tidx)
        cute.arch.barrier()  # the slice is complete in shared memory
        for kk in cutlass.range_constexpr(cute.size(tCrA, mode=[2])):  # bk / 16 steps of the MMA's K
            cute.copy(s2r_a, tXsA[None, None, kk], tXrA[None, None, kk])
            cute.copy(s2r_b, tXsB[None, None, kk], tXrB[None, None, kk])
            cute.gemm(tiled_mma, acc, tCrA[None, None, kk], tCrB[None, None, kk], acc)
        cute.arch.barrier()  # every warp is done reading before the next slice overwrites it

    # Epilogue: round to C's dtype and store the elements inside C, straight from the accumulator registers.
    gemm_launch.store_inside(acc, tCgC, thr_mma.partition_C(cC), mC.shape)


@cute.jit
def host(pA: cute.Pointer, pB: cute.Pointer, pC: cute.Pointer, m: cutlass.Int32, n: cutlass.Int32,
         k: cutlass.Int32, stream: Any, ops: cutlass.Constexpr, config: cutlass.Constexpr):
    mA, mB, mC = gemm_launch.tensors(ops, pA, pB, pC, m, n, k)
    bm, bn, bk = config.bm, config.bn, config.bk
    threads = 32 * config.warps_m * config.warps_n
    ab = mA.element_type
    # Shared tiles keep each operand's major (K-major: rows of bk; MN-major: columns of bm), unswizzled.
    s_layout_a = cute.make_layout((bm, bk), stride=(bk, 1) if ops.a_major == "k" else (1, bm))
    s_layout_b = cute.make_layout((bn, bk), stride=(bk, 1) if ops.b_major == "k" else (1, bn))
    # 2 × 2 warps of m16n8k16; each warp takes 16 rows and 2 × 8 columns per tiled-MMA step (permutation tile).
    mma = cute.nvgpu.warp.MmaF16BF16Op(ab, cutlass.Float32, (16, 8, 16))
    tiled_mma = cute.make_tiled_mma(mma, cute.make_layout((config.warps_m, config.warps_n, 1)),
                                    permutation_mnk=(config.warps_m * 16, config.warps_n * 16, 16))
    copy_a = _loader(ab, ops.a_major == "k", bm, bk, threads)
    copy_b = _loader(ab, ops.b_major == "k", bn, bk, threads)
    _kernel(mA, mB, mC, tiled_mma, s_layout_a, s_layout_b, copy_a, copy_b, (bm, bn, bk),
            ops.a_major == "m", ops.b_major == "n").launch(
        grid=((m + bm - 1) // bm, (n + bn - 1) // bn, 1), block=(threads, 1, 1), stream=stream)


gemm = gemm_launch.Launcher(host, Config, step="gemm3_mma", vector=True, min_cc=80, alternative="gemm2_smem")
