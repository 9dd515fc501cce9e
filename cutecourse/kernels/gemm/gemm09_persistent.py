"""GEMM, step 9: a persistent tile scheduler. Each CTA stays on its SM and walks many tiles, in a grouped order
that keeps the tiles running at the same time close together in L2.

Step 8 launched one CTA per tile: every tile paid for a CTA's start (barrier set-up, register reallocation, the
first loads from an empty pipeline) and its producer sat idle while the consumers ran the epilogue. Here the grid
is at most one CTA per SM, and CTA i takes work items i, i + grid, i + 2·grid, ...: the producer walks the same
sequence of tiles as the consumers, so it starts loading the next tile's k-tiles while the consumers are still
storing this one, and the pipeline states simply run on from tile to tile. The grid is no larger than the rounds of
tiles need (4096² in 128 × 256 tiles is 4 rounds on 128 SMs as on 132), so no round is left partial: the GPU is
power-limited, and SMs that would idle in a partial round draw power all the same while they work.

Tiles are visited in groups of ``group_m`` tile rows, column by column inside a group, so the CTAs running at the
same time share A rows and B columns in L2: a round of 128 CTAs covers 8 rows × 16 columns of tiles instead of one
row of 128.

Each work item is still step 8's: both consumer warpgroups on one tile, the fused epilogue, and C staged through
shared memory for 128-bit stores. Only where C is staged changes: step 8 reused the stage ring for C's tile, but here
the ring is already filling with the next tile's K tiles while the epilogue runs, so C's tile has a buffer of its
own. It costs stages: a 128 × 256 tile of bf16 C is 64 KiB, beside which 3 stages of 48 KiB fit in the 227 KiB
(4 without it); of fp32 C 128 KiB, beside which 2 fit.

Config: tile_m 64, 128 or 256, tile_n a multiple of 64 up to 256, at most 128 accumulators a consumer thread;
stages 0 (as many as fit) or 2 or more that fit the sm_90 shared memory next to C's tile; group_m ≥ 1.

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
from cutlass import pipeline
from cutlass.cute.nvgpu import cpasync, warpgroup
from cutlass.memory import SmemAllocator
from cutlass.tensor_utils import LayoutEnum

from cutecourse import hw
from cutecourse.kernels import predicate
from cutecourse.kernels.gemm import device, epilogue, launcher

SMEM_BYTES = hw.ARCH_LIMITS["sm_90"].smem_per_block_max  # shared memory one H100/H200 CTA may use
WARPGROUP_THREADS, WARPGROUP_WARPS = cute.arch.THREADS_PER_WARPGROUP, cute.arch.WARPS_PER_WARPGROUP
PRODUCER_REGS, CONSUMER_REGS = 40, 232  # setmaxnreg targets: 128 × 40 + 256 × 232 ≤ 64K registers per SM
EPILOGUE_BARRIER = 1  # named barrier of the consumer warpgroups' epilogue (0 is the CTA-wide one)


@dataclass(frozen=True)
class Config:
    tile_m: int = 128  # CTA tile M: 64, 128 or 256, split between the consumer warpgroups
    tile_n: int = 256  # CTA tile N: a multiple of 64, at most 256 (one wgmma is 64 × tile_n × 16)
    tile_k: int = 64  # k-tile: one 128-byte swizzled row of 16-bit elements
    stages: int = 0  # k-tiles in flight in shared memory; 0: as many as fit next to C's tile
    group_m: int = 8  # tile raster: tiles per group along M
    sms: int = hw.SPECS["H100 SXM"].sms  # persistent grid: at most sms CTAs; the launcher lowers it to the GPU's
    # SM count (H100 SXM and H200: 132, H100 PCIe: 114)

    def __post_init__(self) -> None:
        if self.tile_m not in (64, 128, 256) or self.tile_n % 64 or self.tile_n > 256:
            raise ValueError(f"{self}: tile_m must be 64, 128 or 256, tile_n a multiple of 64 up to 256")
        if self.tile_m * self.tile_n > 128 * 128 * self.consumer_warpgroups:
            raise ValueError(f"{self}: more than 128 accumulators a consumer thread; make the tile smaller")
        if self.stages == 1 or self.stages < 0:  # one slot: the producer waits for a release that waits for it
            raise ValueError(f"{self}: stages must be 0 (as many as fit) or at least 2")
        if self.group_m < 1 or self.sms < 1:
            raise ValueError(f"{self}: group_m and sms must be at least 1")

    @property
    def consumer_warpgroups(self) -> int:
        """Consumer warpgroups that split one tile: one per 64 rows, at most 2."""
        return min(self.tile_m // 64, 2)


@cute.jit
def _tile_coord(work: cutlass.Int32, tiles_m: cutlass.Int32, tiles_n: cutlass.Int32, group_m: cutlass.Constexpr):
    """Tile (m, n) for work item `work`: work items fill a group of `group_m` tile rows column by column, then move
    to the next group (the last group may be shorter)."""
    per_group = group_m * tiles_n
    first_m = (work // per_group) * group_m
    rows = cutlass.min(tiles_m - first_m, group_m)
    r = work % per_group
    return first_m + r % rows, r // rows


@cute.kernel
def _kernel(tma_atom_a: cute.CopyAtom, mA: cute.Tensor, tma_atom_b: cute.CopyAtom, mB: cute.Tensor, mC: cute.Tensor,
            tiled_mma: cute.TiledMma, sA_layout: cute.ComposedLayout, sB_layout: cute.ComposedLayout,
            sC_layout: cute.ComposedLayout, tiled_copy_c: cute.TiledCopy, mSrc: cute.Tensor, mBias: cute.Tensor,
            mAux: cute.Tensor, alpha: cutlass.Float32, beta: cutlass.Float32, ab: cutlass.Constexpr,
            tiler: cutlass.Constexpr, group_m: cutlass.Constexpr, fused: cutlass.Constexpr):
    tile_m, tile_n, tile_k = tiler
    stages = cute.size(sA_layout, mode=[2])
    consumers = cute.size(tiled_mma) // WARPGROUP_THREADS
    tidx, _, _ = cute.arch.thread_idx()
    warp_idx = cute.arch.make_warp_uniform(cute.arch.warp_idx())
    warpgroup_idx = warp_idx // WARPGROUP_WARPS
    if warp_idx == 0:
        cpasync.prefetch_descriptor(tma_atom_a)
        cpasync.prefetch_descriptor(tma_atom_b)

    # Shared memory: the full/empty mbarriers, the A and B stage rings, and C's tile, which the epilogue fills while
    # the ring already holds the next tile's K tiles.
    smem = SmemAllocator()
    barriers = smem.allocate_array(cutlass.Int64, 2 * stages)
    sA = smem.allocate_tensor(ab, sA_layout.outer, 1024, sA_layout.inner)
    sB = smem.allocate_tensor(ab, sB_layout.outer, 1024, sB_layout.inner)
    sC = smem.allocate_tensor(mC.element_type, sC_layout, 1024)  # (tile_m, tile_n), the swizzle in its layout

    # "full[s]" completes when the TMA bytes of stage s have landed; "empty[s]" when every consumer warp released it.
    stage_bytes = cute.size_in_bytes(ab, cute.slice_(sA_layout, (None, None, 0))) + cute.size_in_bytes(
        ab, cute.slice_(sB_layout, (None, None, 0)))
    pipe = pipeline.PipelineTmaAsync.create(
        barrier_storage=barriers, num_stages=stages, tx_count=stage_bytes,
        producer_group=pipeline.CooperativeGroup(pipeline.Agent.Thread),
        consumer_group=pipeline.CooperativeGroup(pipeline.Agent.Thread, WARPGROUP_WARPS * consumers),
        defer_sync=True)
    pipeline.pipeline_init_arrive()

    # Tiles of the TMA coordinate tensors, e.g. gA is (tile_m, tile_k, tiles_m, k_tiles), and of C (mC is C itself).
    gA = cute.local_tile(mA, (tile_m, tile_k), (None, None))
    gB = cute.local_tile(mB, (tile_n, tile_k), (None, None))
    gC = cute.local_tile(mC, (tile_m, tile_n), (None, None))
    tAsA, tAgA = cpasync.tma_partition(tma_atom_a, 0, cute.make_layout(1), cute.group_modes(sA, 0, 2),
                                       cute.group_modes(gA, 0, 2))
    tBsB, tBgB = cpasync.tma_partition(tma_atom_b, 0, cute.make_layout(1), cute.group_modes(sB, 0, 2),
                                       cute.group_modes(gB, 0, 2))
    k_tiles = cute.size(gA, mode=[3])
    tiles_m, tiles_n = cute.size(gC, mode=[2]), cute.size(gC, mode=[3])
    first_work, _, _ = cute.arch.block_idx()  # the grid is (persistent CTAs, 1, 1)
    work_stride, _, _ = cute.arch.grid_dim()

    pipeline.pipeline_init_wait()  # every barrier is initialized

    if warpgroup_idx == 0:
        # Producer: one warp walks the same tiles as the consumers and keeps the stage ring full.
        cute.arch.setmaxregister_decrease(PRODUCER_REGS)
        if warp_idx == 0:
            write = pipeline.make_pipeline_state(pipeline.PipelineUserType.Producer, stages)
            work = first_work
            while work < tiles_m * tiles_n:
                tm, tn = _tile_coord(work, tiles_m, tiles_n, group_m)
                for kt in range(k_tiles):
                    pipe.producer_acquire(write)  # wait for empty[s], then expect stage_bytes on full[s]
                    cute.copy(tma_atom_a, tAgA[(None, tm, kt)], tAsA[(None, write.index)],
                              tma_bar_ptr=pipe.producer_get_barrier(write))
                    cute.copy(tma_atom_b, tBgB[(None, tn, kt)], tBsB[(None, write.index)],
                              tma_bar_ptr=pipe.producer_get_barrier(write))
                    write.advance()
                work += work_stride
            pipe.producer_tail(write)  # do not exit before the consumers released the last stages
    else:
        # Consumers: both warpgroups take every work item of this CTA (first_work, first_work + work_stride, ...),
        # each its 64-row slabs of the tile; wgmma over the ring, then the epilogue.
        cute.arch.setmaxregister_increase(CONSUMER_REGS)
        epi_tidx = tidx - WARPGROUP_THREADS  # thread index among the consumers
        thr_mma = tiled_mma.get_slice(WARPGROUP_THREADS * (warpgroup_idx - 1))  # this warpgroup's rows of the tile
        tCrA = tiled_mma.make_fragment_A(thr_mma.partition_A(sA))
        tCrB = tiled_mma.make_fragment_B(thr_mma.partition_B(sB))
        acc = cute.make_rmem_tensor(thr_mma.partition_shape_C((tile_m, tile_n)), cutlass.Float32)
        k_blocks = cute.size(tCrA, mode=[2])
        thr_mma_c = tiled_mma.get_slice(epi_tidx)  # this thread's accumulators, for their (m, n) coordinates
        thr_copy_c = tiled_copy_c.get_slice(epi_tidx)
        epi_barrier = pipeline.NamedBarrier(barrier_id=EPILOGUE_BARRIER, num_threads=cute.size(tiled_mma))

        read = pipeline.make_pipeline_state(pipeline.PipelineUserType.Consumer, stages)
        release = pipeline.make_pipeline_state(pipeline.PipelineUserType.Consumer, stages)
        work = first_work
        while work < tiles_m * tiles_n:
            tm, tn = _tile_coord(work, tiles_m, tiles_n, group_m)

            # Mainloop: keep one k-tile of wgmma in flight; release a stage once the wgmma reading it retired.
            pipe.consumer_wait(read)
            warpgroup.fence()  # order the accumulator registers before the wgmma batch reads them
            for kb in cutlass.range_constexpr(k_blocks):
                # The first wgmma of a tile overwrites the accumulators instead of adding to them: no zero-fill (whose
                # register moves ptxas would have to fence off from the asynchronous wgmma).
                tiled_mma.set(warpgroup.Field.ACCUMULATE, kb != 0)
                cute.gemm(tiled_mma, acc, tCrA[(None, None, kb, read.index)], tCrB[(None, None, kb, read.index)],
                          acc)
            warpgroup.commit_group()
            read.advance()
            for kt in range(1, k_tiles):
                pipe.consumer_wait(read)
                warpgroup.fence()
                for kb in cutlass.range_constexpr(k_blocks):
                    cute.gemm(tiled_mma, acc, tCrA[(None, None, kb, read.index)], tCrB[(None, None, kb, read.index)],
                              acc)
                warpgroup.commit_group()
                warpgroup.wait_group(1)  # the previous k-tile's wgmma are done: its stage can be refilled
                pipe.consumer_release(release)
                release.advance()
                read.advance()
            warpgroup.wait_group(0)
            pipe.consumer_release(release)
            release.advance()

            # Epilogue: step 8's, through C's own buffer (the ring is already filling with the next tile's K tiles);
            # no consumer warp may still be reading the previous tile's C from it.
            cC = cute.local_tile(cute.make_identity_tensor(mC.shape), (tile_m, tile_n), (tm, tn))
            epi_barrier.arrive_and_wait()
            if cutlass.const_expr(not fused.identity):  # the fused epilogue, on each accumulator at its (m, n)
                tCcC_mma = thr_mma_c.partition_C(cC)
                for i in cutlass.range(cute.size(acc), unroll_full=True):
                    if cute.elem_less(tCcC_mma[i], mC.shape):
                        acc[i] = epilogue.element(fused, acc[i], tCcC_mma[i], mSrc, mBias, mAux, alpha, beta)
            tCrC = cute.make_fragment_like(acc, mC.element_type)
            tCrC.store(acc.load().to(mC.element_type))
            cute.autovec_copy(tCrC, thr_mma_c.partition_C(sC))  # fragments in the MMA's layout -> the C tile
            epi_barrier.arrive_and_wait()
            tCsC = thr_copy_c.partition_S(sC)
            tCgC = thr_copy_c.partition_D(gC[(None, None, tm, tn)])
            tCcC = thr_copy_c.partition_D(cC)
            tCrC_rows = cute.make_fragment_like(tCsC)
            cute.autovec_copy(tCsC, tCrC_rows)  # whole 16-byte row vectors of C
            c_vector = 128 // mC.element_type.width
            cute.copy(tiled_copy_c, tCrC_rows, tCgC,
                      pred=predicate.per_vector_if(tCcC, c_vector, lambda c: cute.elem_less(c, mC.shape)))
            work += work_stride


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
    a_layout, b_layout = LayoutEnum.from_tensor(mA), LayoutEnum.from_tensor(mB)
    consumers = config.consumer_warpgroups
    threads = WARPGROUP_THREADS * consumers  # the consumers'
    # One wgmma is 64 × tile_n × 16; each consumer warpgroup takes its 64-row slabs of the tile.
    tiled_mma = sm90.make_trivial_tiled_mma(ab, ab, a_layout.sm90_mma_major_mode(), b_layout.sm90_mma_major_mode(),
                                            cutlass.Float32, (consumers, 1, 1), tiler_mn=(64, config.tile_n))

    # As many stages as fit next to C's tile: 128 × 256 × 64 16-bit is 48 KB a stage, 3 stages beside 64 KB of bf16 C.
    c_bytes = config.tile_m * config.tile_n * c_type.width // 8
    stage_bytes = (config.tile_m + config.tile_n) * config.tile_k * ab.width // 8
    stages = config.stages or (SMEM_BYTES - 1024 - c_bytes) // stage_bytes
    if cutlass.const_expr(stages * stage_bytes > SMEM_BYTES - 1024 - c_bytes):
        raise ValueError(f"Config(stages={config.stages}): {stages} stages of {stage_bytes} bytes do not fit the "
                         f"{SMEM_BYTES} bytes of shared memory next to the {c_bytes} bytes of {ops.c} C's tile: lower "
                         "stages, or stages=0 for as many as fit")
    # The stage rings as step 8's; C's tile as step 8's: row-major, its 8-element chunks XORed with the row (mod 8).
    sA_layout = sm90.make_smem_layout_a(a_layout, tiler, ab, stages)
    sB_layout = sm90.make_smem_layout_b(b_layout, tiler, ab, stages)
    sC_layout = cute.make_composed_layout(cute.make_swizzle(3, 3, int(math.log2(config.tile_n)) - 3), 0,
                                          cute.make_layout((config.tile_m, config.tile_n), stride=(config.tile_n, 1)))

    # TMA descriptors for one stage's box; the returned tensors hold coordinates, not data.
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

    # Persistent grid: at most one CTA per SM, and no more CTAs than the rounds of work need: 512 tiles on 132 CTAs
    # take 4 rounds, and so do they on 128, whose last round is not partial (less power for the same rounds, and the
    # waves line up with the raster's groups).
    tiles_m, tiles_n = (m + config.tile_m - 1) // config.tile_m, (n + config.tile_n - 1) // config.tile_n
    rounds = (tiles_m * tiles_n + config.sms - 1) // config.sms
    persistent = (tiles_m * tiles_n + rounds - 1) // rounds
    _kernel(tma_atom_a, tma_tensor_a, tma_atom_b, tma_tensor_b, mC, tiled_mma, sA_layout, sB_layout, sC_layout,
            tiled_copy_c, mSrc, mBias, mAux, alpha, beta, ab, tiler, config.group_m, fused).launch(
        grid=(persistent, 1, 1), block=(WARPGROUP_THREADS + threads, 1, 1), stream=stream)


gemm = launcher.Launcher(host, Config, vector=True, min_cc=90, for_device=launcher.for_device, epilogue=True)
