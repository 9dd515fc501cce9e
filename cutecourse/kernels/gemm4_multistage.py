"""GEMM, step 4: a multistage cp.async pipeline into swizzled shared memory, and an epilogue through shared memory
with coalesced 128-bit stores. The full Ampere-style (SM80) kernel: mma.sync Tensor Cores, kept busy.

Each CTA (8 warps, 4 × 2, each owning 64 × 64 of C) computes a 256 × 128 tile of C, marching over K in tiles of 64.
The loads run ``stages - 1`` K tiles ahead of the math: ``cp.async`` copies 16 bytes from global to shared memory
without passing through registers, each K tile's copies form one commit group, and ``cp_async_wait_group(stages -
2)`` waits only until the oldest of the tiles in flight has landed, so the SM computes on tile t while tiles t+1 ..
t+stages-2 are still arriving; the copy for tile t+stages-1 goes into the stage tile t-1 has just freed.

Shared memory is swizzled: the 16-byte chunks of each 128-byte (or 64-byte) line are XORed with the line index, so
the 8 lines that one ``ldmatrix`` phase reads fall in 8 different groups of banks (``Swizzle(3,3,3)`` on 8 × 64
atoms; ``Swizzle(2,3,3)`` on 8 × 32 when K is contiguous and the K tile is 32; for M- or N-major operands 64 × 8
atoms and ``ldmatrix.trans``, which transposes them on the way to registers). Inside a K tile the registers are
double buffered: the ``ldmatrix`` of k-block i+1 is issued before the MMAs of k-block i.

Tails: the K tiles are shifted so that the *first* one is partial (it starts at k < 0) and all later ones are whole.
A predicated-off ``cp.async`` reads nothing and fills its 16 bytes of shared memory with zeros, so the vectors with
k < 0 of the first tile, and the rows past M (N) of every tile, add zeros to the accumulators. The epilogue converts
the fp32 accumulators to C's dtype, parks them in the (now idle) A/B buffers, and after a barrier each thread
stores whole 16-byte row vectors, predicated on M and N. A raster swizzle makes CTAs that run together share A and
B tiles in L2.

    gemm(a, b, c)   # c = a @ b; a (M, K), b (K, N) float16/bfloat16; c (M, N) float32/float16/bfloat16
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import cutlass
import cutlass.cute as cute

from cutecourse.kernels import gemm_launch, predicate


@dataclass(frozen=True)
class Config:
    bm: int = 256  # CTA tile: bm × bn of C per CTA, K in steps of bk (fastest on an H200, benchmarks/RESULTS.md)
    bn: int = 128
    bk: int = 64
    warps_m: int = 4  # warps_m × warps_n warps, each owning a (bm / warps_m) × (bn / warps_n) piece of the tile
    warps_n: int = 2
    stages: int = 3  # K tiles resident in shared memory (stages - 1 in flight while one is computed)
    raster: int = 8  # CTAs launched together walk `raster` tiles along N before moving along M (1: off)

    def __post_init__(self) -> None:
        if self.bk % 32 or self.bk > 64 or self.bn & (self.bn - 1) or self.bn < 64 or self.bm % 64:
            raise ValueError(f"{self}: need bk in (32, 64), bn a power of two >= 64, bm a multiple of 64")
        if self.bm % (16 * self.warps_m) or self.bn % (16 * self.warps_n) or self.stages < 3:
            raise ValueError(f"{self}: each warp needs whole 16 × 16 MMA pieces, and stages >= 3")


@cute.kernel
def _kernel(mA: cute.Tensor, mB: cute.Tensor, mC: cute.Tensor, sA_layout: cute.ComposedLayout,
            sB_layout: cute.ComposedLayout, sC_layout: cute.ComposedLayout, g2s_A: cute.TiledCopy,
            g2s_B: cute.TiledCopy, s2r_A: cute.TiledCopy, s2r_B: cute.TiledCopy, s2g_C: cute.TiledCopy,
            mma: cute.TiledMma, tiler: cutlass.Constexpr, stages: cutlass.Constexpr[int],
            raster: cutlass.Constexpr[int]):
    tidx, _, _ = cute.arch.thread_idx()
    bidx, bidy, _ = cute.arch.block_idx()
    M, N, K = mA.shape[0], mB.shape[0], mA.shape[1]
    bm, bn, bk = tiler
    tile_m, tile_n = bidx // raster, bidx % raster + bidy * raster  # raster swizzle (host launched raster×)
    if tile_m * bm < M and tile_n * bn < N:
        # This CTA's tiles: gA (bm, bk, k_tiles), gB (bn, bk, k_tiles), gC (bm, bn), and cA, cB, cC their
        # coordinates. Shift K by the residue (<= 0) so that the partial K tile is the first one.
        gA, gB, gC, cA, cB, cC = gemm_launch.cta_tiles(mA, mB, mC, tiler, (tile_m, tile_n, None))
        k_tiles = (K + bk - 1) // bk
        shift = (0, K - k_tiles * bk, 0)
        gA, gB, cA, cB = (cute.domain_offset(shift, t) for t in (gA, gB, cA, cB))
        gA = cute.make_tensor(gA.iterator.align(16), gA.layout)  # the shift is a whole number of 16-byte vectors
        gB = cute.make_tensor(gB.iterator.align(16), gB.layout)

        # One shared buffer: the A and B stages during the main loop, then C's tile in the epilogue.
        ab = mA.element_type
        a_bytes = cute.cosize(sA_layout) * ab.width // 8
        b_bytes = cute.cosize(sB_layout) * ab.width // 8
        c_bytes = cute.cosize(sC_layout) * mC.element_type.width // 8
        buf = cutlass.memory.SmemAllocator().allocate(max(a_bytes + b_bytes, c_bytes), 1024)
        sA = cute.make_tensor(cute.recast_ptr(buf, dtype=ab), sA_layout)  # (bm, bk, stages)
        sB = cute.make_tensor(cute.recast_ptr(buf + a_bytes, dtype=ab), sB_layout)  # (bn, bk, stages)
        sC = cute.make_tensor(cute.recast_ptr(buf, dtype=mC.element_type), sC_layout)  # (bm, bn)

        # Global -> shared: each thread's 16-byte vectors of every K tile, and which of them to copy.
        thr_A, thr_B = g2s_A.get_slice(tidx), g2s_B.get_slice(tidx)
        tAgA, tAsA, tAcA = thr_A.partition_S(gA), thr_A.partition_D(sA), thr_A.partition_S(cA)
        tBgB, tBsB, tBcB = thr_B.partition_S(gB), thr_B.partition_D(sB), thr_B.partition_S(cB)
        vec = 128 // ab.width
        pA = predicate.per_vector_if(tAcA[None, None, None, 0], vec, lambda c: c[0] < M)  # rows inside M (all tiles)
        pB = predicate.per_vector_if(tBcB[None, None, None, 0], vec, lambda c: c[0] < N)
        # The first tile also needs k >= 0.
        pA0 = predicate.per_vector_if(tAcA[None, None, None, 0], vec, lambda c: (c[0] < M) & (c[1] >= 0))
        pB0 = predicate.per_vector_if(tBcB[None, None, None, 0], vec, lambda c: (c[0] < N) & (c[1] >= 0))

        # Prologue: put stages - 1 K tiles in flight. A predicated-off cp.async still writes its 16 bytes of shared
        # memory, with zeros (it copies 0 source bytes and fills the rest), so the k < 0 part of the first tile and
        # the rows past M (N) of every tile are zero.
        cute.copy(g2s_A, tAgA[None, None, None, 0], tAsA[None, None, None, 0], pred=pA0)
        cute.copy(g2s_B, tBgB[None, None, None, 0], tBsB[None, None, None, 0], pred=pB0)
        cute.arch.cp_async_commit_group()
        for s in cutlass.range_constexpr(1, stages - 1):
            if s < k_tiles:
                cute.copy(g2s_A, tAgA[None, None, None, s], tAsA[None, None, None, s], pred=pA)
                cute.copy(g2s_B, tBgB[None, None, None, s], tBsB[None, None, None, s], pred=pB)
            cute.arch.cp_async_commit_group()  # one group per K tile, even an empty one, keeps the count exact

        # Shared -> registers: ldmatrix ×4 in the MMA's register layout (.trans for MN-major operands).
        thr_mma = mma.get_slice(tidx)
        tCrA = mma.make_fragment_A(thr_mma.partition_A(sA)[None, None, None, 0])  # (MMA, MMA_M, k_blocks)
        tCrB = mma.make_fragment_B(thr_mma.partition_B(sB)[None, None, None, 0])
        acc = mma.make_fragment_C(thr_mma.partition_C(gC))
        acc.fill(0.0)
        thr_lA, thr_lB = s2r_A.get_slice(tidx), s2r_B.get_slice(tidx)
        tCsA, tCrA_v = thr_lA.partition_S(sA), thr_lA.retile(tCrA)
        tCsB, tCrB_v = thr_lB.partition_S(sB), thr_lB.retile(tCrB)
        k_blocks = cute.size(tCrA, mode=[2])

        # Main loop. Tile t lives in stage `read`; its first k-block is already in registers.
        cute.arch.cp_async_wait_group(stages - 2)  # tile 0 has landed (for this thread) ...
        cute.arch.sync_threads()  # ... and for every thread
        cute.copy(s2r_A, tCsA[None, None, 0, 0], tCrA_v[None, None, 0])
        cute.copy(s2r_B, tCsB[None, None, 0, 0], tCrB_v[None, None, 0])
        read = cutlass.Int32(0)
        for t in range(k_tiles):
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
                cute.copy(s2r_A, tCsA[None, None, kn, stage], tCrA_v[None, None, kn])
                cute.copy(s2r_B, tCsB[None, None, kn, stage], tCrB_v[None, None, kn])
                if kb == 0:  # refill the stage tile t-1 used (all threads are past it) with tile t + stages - 1
                    write = read - 1
                    if read == 0:
                        write = cutlass.Int32(stages - 1)
                    if t + stages - 1 < k_tiles:
                        cute.copy(g2s_A, tAgA[None, None, None, t + stages - 1], tAsA[None, None, None, write],
                                  pred=pA)
                        cute.copy(g2s_B, tBgB[None, None, None, t + stages - 1], tBsB[None, None, None, write],
                                  pred=pB)
                    cute.arch.cp_async_commit_group()
                cute.gemm(mma, acc, tCrA[None, None, kb], tCrB[None, None, kb], acc)
            read = nxt

        # Epilogue: no copy may still be writing, and no warp still reading, the buffers C is about to reuse.
        cute.arch.cp_async_wait_group(0)
        cute.arch.sync_threads()
        out = cute.make_fragment_like(acc, mC.element_type)
        out.store(acc.load().to(mC.element_type))
        cute.autovec_copy(out, thr_mma.partition_C(sC))  # fragments in the MMA's layout -> the C tile
        cute.arch.sync_threads()
        thr_C = s2g_C.get_slice(tidx)
        tCsC, tCgC, tCcC = thr_C.partition_S(sC), thr_C.partition_D(gC), thr_C.partition_D(cC)
        rows = cute.make_fragment_like(tCsC)
        cute.autovec_copy(tCsC, rows)  # whole 16-byte row vectors of C
        c_vec = 128 // mC.element_type.width
        cute.copy(s2g_C, rows, tCgC, pred=predicate.per_vector_if(tCcC, c_vec, lambda c: cute.elem_less(c, mC.shape)))


def _smem_ab(dtype: Any, major_is_k: bool, rows: int, bk: int, stages: int) -> cute.ComposedLayout:
    """(rows, bk, stages) from swizzled atoms of 8 lines along the contiguous mode (64 elements = 128 bytes, or 32
    for a 32-wide K-major tile): each line's 16-byte chunks are XORed with the line index, so the 8 lines that one
    ldmatrix phase reads (one chunk each) fall in different banks."""
    if major_is_k:
        width = min(bk, 64)  # elements per line along K
        atom = cute.make_layout((8, width), stride=(width, 1))
    else:
        width = 64  # along M (or N)
        atom = cute.make_layout((width, 8), stride=(1, width))
    bits = int(math.log2(width * dtype.width // 128))  # 16-byte chunks per line: 8 -> 3 bits (4 -> 2)
    atom = cute.make_composed_layout(cute.make_swizzle(bits, 3, 3), 0, atom)
    return cute.tile_to_shape(atom, (rows, bk, stages), (0, 1, 2))


def _loader(atom: Any, major_is_k: bool, rows: int, bk: int, threads: int) -> cute.TiledCopy:
    """Threads laid along the operand's contiguous mode, 8 elements (16 bytes) each."""
    if major_is_k:
        lanes = bk // 8
        return cute.make_tiled_copy_tv(atom, cute.make_layout((threads // lanes, lanes), stride=(lanes, 1)),
                                       cute.make_layout((1, 8)))
    lanes = rows // 8
    return cute.make_tiled_copy_tv(atom, cute.make_layout((lanes, threads // lanes), stride=(1, lanes)),
                                   cute.make_layout((8, 1)))


@cute.jit
def host(pA: cute.Pointer, pB: cute.Pointer, pC: cute.Pointer, m: cutlass.Int32, n: cutlass.Int32,
         k: cutlass.Int32, stream: Any, ops: cutlass.Constexpr, config: cutlass.Constexpr):
    mA, mB, mC = gemm_launch.tensors(ops, pA, pB, pC, m, n, k)
    bm, bn, bk, stages = config.bm, config.bn, config.bk, config.stages
    threads = 32 * config.warps_m * config.warps_n
    ab, c_type = gemm_launch.dtype(ops.ab), gemm_launch.dtype(ops.c)
    a_k, b_k = ops.a_major == "k", ops.b_major == "k"
    sA_layout = _smem_ab(ab, a_k, bm, bk, stages)
    sB_layout = _smem_ab(ab, b_k, bn, bk, stages)
    # C's tile, row-major; 8-element chunks XORed with the row (mod 8), so the MMA fragments' writes (8 rows at
    # a time) spread over the banks while each 16-byte vector the stores read stays contiguous.
    sC_layout = cute.make_composed_layout(cute.make_swizzle(3, 3, int(math.log2(bn)) - 3), 0,
                                          cute.make_layout((bm, bn), stride=(bn, 1)))

    cp_async = cute.make_copy_atom(
        cute.nvgpu.cpasync.CopyG2SOp(cache_mode=cute.nvgpu.cpasync.LoadCacheMode.GLOBAL), ab, num_bits_per_copy=128)
    g2s_A = _loader(cp_async, a_k, bm, bk, threads)
    g2s_B = _loader(cp_async, b_k, bn, bk, threads)
    c_vec = 128 // c_type.width
    lanes = bn // c_vec
    s2g_C = cute.make_tiled_copy_tv(
        cute.make_copy_atom(cute.nvgpu.CopyUniversalOp(), c_type, num_bits_per_copy=128),
        cute.make_layout((threads // lanes, lanes), stride=(lanes, 1)), cute.make_layout((1, c_vec)))

    # 16×8×16 mma.sync atoms, warps_m × warps_n warps; N permuted to 16 per warp so ldmatrix ×4 loads B too.
    mma = cute.make_tiled_mma(cute.nvgpu.warp.MmaF16BF16Op(ab, cutlass.Float32, (16, 8, 16)),
                              cute.make_layout((config.warps_m, config.warps_n, 1)),
                              permutation_mnk=(16 * config.warps_m, 16 * config.warps_n, 16))

    # Shared -> registers: ldmatrix ×4 laid out as the MMA wants its operands; .trans for MN-major ones.
    s2r_A = cute.make_tiled_copy_A(cute.make_copy_atom(cute.nvgpu.warp.LdMatrix8x8x16bOp(not a_k, 4), ab), mma)
    s2r_B = cute.make_tiled_copy_B(cute.make_copy_atom(cute.nvgpu.warp.LdMatrix8x8x16bOp(not b_k, 4), ab), mma)

    f = config.raster
    tiles_m, tiles_n = (m + bm - 1) // bm, (n + bn - 1) // bn
    _kernel(mA, mB, mC, sA_layout, sB_layout, sC_layout, g2s_A, g2s_B, s2r_A, s2r_B, s2g_C, mma, (bm, bn, bk), stages,
            f).launch(grid=(tiles_m * f, (tiles_n + f - 1) // f, 1), block=(threads, 1, 1), stream=stream)


gemm = gemm_launch.Launcher(host, Config, step="gemm4_multistage", vector=True, min_cc=80, alternative="gemm2_smem")
