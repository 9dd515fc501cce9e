"""GEMM, step 5: swizzled shared memory. It serves ldmatrix without bank conflicts and lets the epilogue stage C's
tile for 128-bit stores: the full SM80 kernel.

Step 4 kept its shared tiles plain: the 8 rows that one ``ldmatrix`` phase reads are 128 bytes apart, so they fall
in the same 4 banks and the phase takes 8 wavefronts instead of 1. Here every tile is built from swizzled atoms of
8 lines along the contiguous mode: the 16-byte chunks of each 128-byte (or 64-byte) line are XORed with the line
index, so the 8 lines of a phase land in 8 different groups of banks (``Swizzle(3,3,3)`` on 8 × 64 atoms;
``Swizzle(2,3,3)`` on 8 × 32 when K is contiguous and the K tile is 32; for M- or N-major operands 64 × 8 atoms,
read by ``ldmatrix.trans``). ``cp.async`` writes through the same layout, so nothing else in the mainloop changes.

With conflict-free shared memory the epilogue can go through it too. The fp32 accumulators, converted to C's
dtype, are parked in the (now idle) A/B buffers as a row-major tile whose 8-element chunks are XORed with the row,
so the MMA fragments' writes spread over the banks; after a barrier each thread reads whole 16-byte row vectors and
stores them with one ``st.global.v4`` each, predicated on M and N, where step 4 stored 2-byte or 4-byte scalars.
Last, a raster makes the CTAs that run together walk ``raster`` tiles along N before moving along M, so they share
A and B tiles in L2.

Config: tile_k 32 or 64, tile_n a power of two ≥ 64, tile_m a multiple of 64; each of the warps_m × warps_n warps
owns whole 16 × 16 MMA pieces; stages ≥ 3; the stages fit the sm_80 shared memory.

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

from cutecourse import hw
from cutecourse.kernels import predicate
from cutecourse.kernels.gemm import device, epilogue, launcher

SMEM_BYTES = hw.ARCH_LIMITS["sm_80"].smem_per_block_max  # shared memory one A100 CTA may use


@dataclass(frozen=True)
class Config:
    tile_m: int = 256  # CTA tile: tile_m × tile_n of C per CTA, K in steps of tile_k (fastest on an H200,
    tile_n: int = 128  # benchmarks/RESULTS.md)
    tile_k: int = 64
    warps_m: int = 4  # warps_m × warps_n warps, each owning a (tile_m / warps_m) × (tile_n / warps_n) piece
    warps_n: int = 2
    stages: int = 3  # K tiles resident in shared memory (stages - 1 in flight while one is computed)
    raster: int = 8  # CTAs launched together walk `raster` tiles along N before moving along M (1: off)

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
def _kernel(mA: cute.Tensor, mB: cute.Tensor, mC: cute.Tensor, tiled_mma: cute.TiledMma,
            sA_layout: cute.ComposedLayout, sB_layout: cute.ComposedLayout, sC_layout: cute.ComposedLayout,
            tiled_copy_a: cute.TiledCopy, tiled_copy_b: cute.TiledCopy, tiled_copy_s2r_a: cute.TiledCopy,
            tiled_copy_s2r_b: cute.TiledCopy, tiled_copy_c: cute.TiledCopy, mSrc: cute.Tensor, mBias: cute.Tensor,
            mAux: cute.Tensor, alpha: cutlass.Float32, beta: cutlass.Float32, tiler: cutlass.Constexpr,
            raster: cutlass.Constexpr[int], fused: cutlass.Constexpr):
    tidx, _, _ = cute.arch.thread_idx()
    bidx, bidy, _ = cute.arch.block_idx()
    M = mA.shape[0]
    N = mB.shape[0]
    K = mA.shape[1]
    tile_m, tile_n, tile_k = tiler
    stages = cute.size(sA_layout, mode=[2])
    tm, tn = bidx // raster, bidx % raster + bidy * raster  # raster order (the host launched raster× the rows)
    if tm * tile_m < M and tn * tile_n < N:
        # Tiles: gA (tile_m, tile_k, k_tiles), gB (tile_n, tile_k, k_tiles), gC (tile_m, tile_n), and cA, cB, cC
        # their coordinates. K is shifted by the residue (<= 0) so that the partial K tile is the first one.
        gA, gB, gC, cA, cB, cC = device.cta_tiles(mA, mB, mC, tiler, (tm, tn, None))
        k_tiles = cute.size(gA, mode=[2])
        shift = (0, K - k_tiles * tile_k, 0)
        gA, gB, cA, cB = (cute.domain_offset(shift, t) for t in (gA, gB, cA, cB))
        gA = cute.make_tensor(gA.iterator.align(16), gA.layout)  # the shift is a whole number of 16-byte vectors
        gB = cute.make_tensor(gB.iterator.align(16), gB.layout)

        # One shared buffer: the A and B stages during the mainloop, then C's tile in the epilogue.
        ab = mA.element_type
        a_bytes = cute.cosize(sA_layout) * ab.width // 8
        b_bytes = cute.cosize(sB_layout) * ab.width // 8
        c_bytes = cute.cosize(sC_layout) * mC.element_type.width // 8
        buf = cutlass.memory.SmemAllocator().allocate(max(a_bytes + b_bytes, c_bytes), 1024)
        sA = cute.make_tensor(cute.recast_ptr(buf, dtype=ab), sA_layout)  # (tile_m, tile_k, stages)
        sB = cute.make_tensor(cute.recast_ptr(buf + a_bytes, dtype=ab), sB_layout)  # (tile_n, tile_k, stages)
        sC = cute.make_tensor(cute.recast_ptr(buf, dtype=mC.element_type), sC_layout)  # (tile_m, tile_n)

        # Partitions, global -> shared: each thread's 16-byte vectors of every K tile, and which of them to copy.
        thr_copy_a, thr_copy_b = tiled_copy_a.get_slice(tidx), tiled_copy_b.get_slice(tidx)
        tAgA = thr_copy_a.partition_S(gA)
        tAsA = thr_copy_a.partition_D(sA)
        tAcA = thr_copy_a.partition_S(cA)
        tBgB = thr_copy_b.partition_S(gB)
        tBsB = thr_copy_b.partition_D(sB)
        tBcB = thr_copy_b.partition_S(cB)
        vector = 128 // ab.width
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

        # Mainloop, prologue: put stages - 1 K tiles in flight. A predicated-off cp.async still writes its 16 bytes
        # of shared memory, with zeros (it copies 0 source bytes and fills the rest), so the k < 0 part of the first
        # tile and the rows past M (N) of every tile are zero.
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

        # Epilogue: no copy may still be writing, and no warp still reading, the buffers C is about to reuse.
        cute.arch.cp_async_wait_group(0)
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


def _smem_layout(dtype: Any, major_is_k: bool, rows: int, tile_k: int, stages: int) -> cute.ComposedLayout:
    """(rows, tile_k, stages) from swizzled atoms of 8 lines along the contiguous mode (64 elements = 128 bytes, or
    32 for a 32-wide K-major tile): each line's 16-byte chunks are XORed with the line index, so the 8 lines that
    one ldmatrix phase reads (one chunk each) fall in different banks."""
    if major_is_k:
        width = min(tile_k, 64)  # elements per line along K
        atom = cute.make_layout((8, width), stride=(width, 1))
    else:
        width = 64  # along M (or N)
        atom = cute.make_layout((width, 8), stride=(1, width))
    bits = int(math.log2(width * dtype.width // 128))  # 16-byte chunks per line: 8 -> 3 bits (4 -> 2)
    atom = cute.make_composed_layout(cute.make_swizzle(bits, 3, 3), 0, atom)
    return cute.tile_to_shape(atom, (rows, tile_k, stages), (0, 1, 2))


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
    threads = cute.arch.WARP_SIZE * config.warps_m * config.warps_n
    a_k, b_k = ops.a_major == "k", ops.b_major == "k"

    # 16×8×16 mma.sync atoms, warps_m × warps_n warps; N permuted to 16 per warp so ldmatrix ×4 loads B too.
    tiled_mma = cute.make_tiled_mma(cute.nvgpu.warp.MmaF16BF16Op(ab, cutlass.Float32, (16, 8, 16)),
                                    cute.make_layout((config.warps_m, config.warps_n, 1)),
                                    permutation_mnk=(16 * config.warps_m, 16 * config.warps_n, 16))

    # Shared memory: swizzled stages of A and B; C's tile row-major with its 8-element chunks XORed with the row
    # (mod 8), so the MMA fragments' writes (8 rows at a time) spread over the banks while each 16-byte vector the
    # stores read stays contiguous.
    sA_layout = _smem_layout(ab, a_k, config.tile_m, config.tile_k, config.stages)
    sB_layout = _smem_layout(ab, b_k, config.tile_n, config.tile_k, config.stages)
    sC_layout = cute.make_composed_layout(cute.make_swizzle(3, 3, int(math.log2(config.tile_n)) - 3), 0,
                                          cute.make_layout((config.tile_m, config.tile_n), stride=(config.tile_n, 1)))

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
    # Shared -> global, the epilogue: 16-byte row vectors of C, threads along N.
    c_vector = 128 // c_type.width
    lanes = config.tile_n // c_vector
    tiled_copy_c = cute.make_tiled_copy_tv(
        cute.make_copy_atom(cute.nvgpu.CopyUniversalOp(), c_type, num_bits_per_copy=128),
        cute.make_layout((threads // lanes, lanes), stride=(lanes, 1)), cute.make_layout((1, c_vector)))

    raster = config.raster
    tiles_m, tiles_n = (m + config.tile_m - 1) // config.tile_m, (n + config.tile_n - 1) // config.tile_n
    _kernel(mA, mB, mC, tiled_mma, sA_layout, sB_layout, sC_layout, tiled_copy_a, tiled_copy_b, tiled_copy_s2r_a,
            tiled_copy_s2r_b, tiled_copy_c, mSrc, mBias, mAux, alpha, beta, tiler, raster, fused).launch(
        grid=(tiles_m * raster, (tiles_n + raster - 1) // raster, 1), block=(threads, 1, 1), stream=stream)


gemm = launcher.Launcher(host, Config, vector=True, min_cc=80, epilogue=True)
