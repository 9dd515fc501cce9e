"""GEMM, step 11: the pingpong schedule. Each consumer warpgroup owns whole tiles and the two take turns on the
mainloop, so that one's epilogue runs while the other's wgmma keep the Tensor Cores busy.

In step 10 both consumer warpgroups split every tile and ran its epilogue together: while they converted and stored
C, no wgmma was issued. Here consumer warpgroup 1 takes the CTA's 1st, 3rd, ... work item and warpgroup 2 the 2nd,
4th, ...; each computes a whole 128 × 128 tile (two 64-row wgmma slabs, again 128 accumulator registers per thread)
and stores it through its own epilogue ring and named barrier. The producer fills the one stage ring in work order,
so each warpgroup skips the stages of the other's work items. A pair of named barriers orders the mainloops: a
warpgroup starts one only once the other has issued the previous work item's. Then every earlier stage has landed,
which the parity waits need (waiting on a "full" barrier that is two phases behind, for the other warpgroup's stages
still to come, would pass at once, the parity being the same), and the warpgroups alternate on the Tensor Cores:
one multiplies while the other is in its epilogue.

This is the schedule CUTLASS calls ping-pong. On an H200 it ran 3-5% slower than step 10's cooperative 128 × 256
tiles, which move less data per FLOP (benchmarks/RESULTS.md): the lesson is what it overlaps, and what it costs.

Config: tile_m × tile_n at most 128 × 128 (one warpgroup's accumulators), tile_n a multiple of 16 and of epi_n;
sms ≥ cluster_m · cluster_n.

Swap-AB (``Config(swap_ab=True)``), for a small M: the launcher computes Cᵀ = Bᵀ·Aᵀ instead, so that M becomes the
N of wgmma (16, 32, ...) where it would pad the instruction's 64 rows, and W's rows fill the tile's M. Cᵀ is the
transposed view of the row-major C, a column-major (N, M) matrix: the kernel is the same but for its epilogue, which
stores through a column-major sC with ``stmatrix.trans`` (`cutecourse.kernels.gemm.launcher` swaps the operands, the
epilogue's bias along N becomes one along M).

The fused epilogue (``D = act(alpha · acc + beta · C + bias)``, `cutecourse.kernels.gemm.epilogue`) runs on each
subtile's accumulators before the conversion; fp8 operands (e4m3, e5m2, both K-major) use the fp8 wgmma, with
per-tensor scales folded into alpha (`cutecourse.kernels.gemm.fp8`).

Split-K (``Config(splits=S)``, `cutecourse.kernels.gemm.splitk`), for problems with fewer tiles than SMs and a long K:
the persistent scheduler's work units become (tile, split) pairs, each storing its float32 partial tile into slice s
of a workspace, and a second kernel sums the slices in order and applies the fused epilogue; the GEMM lets that
kernel launch while it runs (``griddepcontrol.launch_dependents``). Stream-K (``Config(stream_k=True)``) keeps that
path and changes only the work units: each persistent cluster takes an equal share of all tiles' k-tiles, and its
units are the pieces of the tiles that share touches. ``splits=1`` without stream-K traces none of it: the kernel is
the one described above.

    gemm(a, b, c)   # c = a @ b; a (M, K), b (K, N) float16/bfloat16 (or fp8); c (M, N) float32/float16/bfloat16
    gemm(a, b, d, epilogue=Epilogue("gelu_tanh", bias="n"), bias=bias)   # d = GELU(a @ b + bias), one kernel
    gemm(a8, b8, d, FP8_CONFIG, alpha=scale_a * scale_b)                    # fp8: d = (sa·a8) @ (sb·b8)
    gemm(a, b, d, Config(splits=4))   # split-K: 4 partial products over K, summed in order by a second kernel
    gemm(a, b, d, Config(stream_k=True))   # stream-K: every cluster the same number of k-tiles, pieces summed in order
    gemm(x, w.t(), d, Config(swap_ab=True, tile_n=16, epi_n=16))   # swap-AB: dᵀ = w @ xᵀ, x of 16 or fewer rows
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import cutlass
import cutlass.cute as cute
import cutlass.utils.hopper_helpers as sm90
from cutlass import pipeline
from cutlass.cute.nvgpu import cpasync, warp, warpgroup
from cutlass.memory import SmemAllocator
from cutlass.tensor_utils import LayoutEnum

from cutecourse import hw
from cutecourse.kernels.gemm import device, epilogue, launcher, splitk

SMEM_BYTES = hw.ARCH_LIMITS["sm_90"].smem_per_block_max  # shared memory one H100/H200 CTA may use
WARPGROUP_THREADS, WARPGROUP_WARPS = cute.arch.THREADS_PER_WARPGROUP, cute.arch.WARPS_PER_WARPGROUP
PRODUCER_REGS, CONSUMER_REGS = 40, 232  # setmaxnreg targets: 128 × 40 + 256 × 232 ≤ 64K registers per SM
EPILOGUE_BARRIER = 1  # named barriers of the consumer warpgroups' epilogues: 1 and 2 (0 is the CTA-wide one)
TURN_BARRIER = 3  # named barriers of the consumer warpgroups' turns on the mainloop: 3 and 4


@dataclass(frozen=True)
class Config:
    tile_m: int = 128  # a consumer warpgroup's tile: tile_m × tile_n ≤ 128 × 128 (128 accumulators a thread)
    tile_n: int = 128
    tile_k: int = 64  # k-tile: one 128-byte swizzled row of 16-bit elements
    stages: int = 0  # k-tiles in flight in shared memory; 0: as many as fit next to the epilogue buffers
    group_m: int = 8  # tile raster: clusters per group along M
    sms: int = hw.SPECS["H100 SXM"].sms  # persistent grid: at most sms // (cluster_m · cluster_n) clusters; the
    # launcher lowers it to the GPU's SM count (H100 SXM and H200: 132, H100 PCIe: 114)
    cluster_m: int = 2  # CTAs per cluster along M; they share (multicast) the B tile
    cluster_n: int = 1  # CTAs per cluster along N; they share (multicast) the A tile
    epi_n: int = 32  # epilogue subtile: tile_m × epi_n outputs per TMA store
    epi_stages: int = 2  # shared-memory buffers for epilogue subtiles in flight, per consumer warpgroup
    splits: int = 1  # split-K: each tile's k-tiles in this many shares, each a work unit (`splitk`); 1: no split
    swap_ab: bool = False  # compute Cᵀ = Bᵀ·Aᵀ: M on wgmma's N, tile_n the tile along M (the launcher swaps)
    # stream-K: every persistent cluster an equal share of all tiles' k-tiles (`splitk.stream_share`); `splits` is then
    # the workspace's slices, the most pieces of one tile, which the launcher sets from the problem's shape
    stream_k: bool = False

    def __post_init__(self) -> None:
        if self.tile_m not in (64, 128, 256) or self.tile_n % 16 or self.tile_n > 256 or self.tile_n % self.epi_n:
            raise ValueError(f"{self}: tile_m must be 64, 128 or 256, tile_n a multiple of 16 up to 256 and of epi_n "
                             "(e.g. tile_n=16, epi_n=16)")
        if self.tile_n // self.cluster_m % 8:
            raise ValueError(f"{self}: each of the cluster_m CTAs loads tile_n / cluster_m rows of B, which must be "
                             "a multiple of 8 (a swizzle atom): lower cluster_m or raise tile_n")
        if self.tile_m * self.tile_n > 128 * 128:
            raise ValueError(f"{self}: more than 128 accumulators a consumer thread; make the tile smaller")
        if self.stages == 1 or self.stages < 0:  # one slot: the producer waits for a release that waits for it
            raise ValueError(f"{self}: stages must be 0 (as many as fit) or at least 2")
        if self.group_m < 1 or self.sms < self.cluster_m * self.cluster_n:
            raise ValueError(f"{self}: group_m must be at least 1 and sms at least cluster_m * cluster_n")
        whole = isinstance(self.splits, int) and not isinstance(self.splits, bool)
        if not whole or not 1 <= self.splits <= splitk.MAX_SPLITS:
            raise ValueError(f"splits={self.splits!r}: give the number of K shares, an int from 1 (no split-K) to "
                             f"{splitk.MAX_SPLITS}, e.g. Config(splits=2)")
        if not isinstance(self.stream_k, bool):
            raise ValueError(f"stream_k={self.stream_k!r}: True (equal shares of all k-tiles, `splitk`) or False")
        if not isinstance(self.swap_ab, bool):
            raise ValueError(f"swap_ab={self.swap_ab!r}: True (compute Cᵀ = Bᵀ·Aᵀ, for a small M) or False")

    @property
    def partial(self) -> bool:
        """Whether the GEMM stores float32 partial tiles into `splitk`'s workspace (split-K or stream-K)."""
        return self.splits > 1 or self.stream_k


#: fp8 operands: 128 one-byte elements of K fill the 128-byte swizzled row that 64 16-bit ones fill.
FP8_CONFIG = Config(tile_k=128)


@cute.jit
def _tile_coord(work: cutlass.Int32, clusters_m: cutlass.Int32, clusters_n: cutlass.Int32, group_m: cutlass.Constexpr,
                cta_m: cutlass.Int32, cta_n: cutlass.Int32, cluster_m: cutlass.Constexpr,
                cluster_n: cutlass.Constexpr):
    """Tile (m, n) of this CTA for cluster work item `work`: work items fill a group of `group_m` cluster rows column
    by column, then move to the next group (the last group may be shorter)."""
    per_group = group_m * clusters_n
    first_m = (work // per_group) * group_m
    rows = cutlass.min(clusters_m - first_m, group_m)
    r = work % per_group
    return (first_m + r % rows) * cluster_m + cta_m, (r // rows) * cluster_n + cta_n


@cute.kernel
def _kernel(tma_atom_a: cute.CopyAtom, mA: cute.Tensor, tma_atom_b: cute.CopyAtom, mB: cute.Tensor,
            tma_atom_c: cute.CopyAtom, mC: cute.Tensor, tiled_mma: cute.TiledMma, sA_layout: cute.ComposedLayout,
            sB_layout: cute.ComposedLayout, sC_layout: cute.ComposedLayout, tiled_copy_r2s: cute.TiledCopy,
            mSrc: cute.Tensor, mBias: cute.Tensor, mAux: cute.Tensor, alpha: cutlass.Float32, beta: cutlass.Float32,
            ab: cutlass.Constexpr, c_type: cutlass.Constexpr, tiler: cutlass.Constexpr, epi_tile: cutlass.Constexpr,
            group_m: cutlass.Constexpr, cluster: cutlass.Constexpr, fused: cutlass.Constexpr,
            splits: cutlass.Constexpr, stream_k: cutlass.Constexpr):
    tile_m, tile_n, tile_k = tiler
    partial = splits > 1 or stream_k  # float32 partial tiles into the workspace, one slice per split or piece
    cluster_m, cluster_n = cluster
    stages = cute.size(sA_layout, mode=[2])
    epi_stages = cute.size(sC_layout, mode=[2]) // 2  # one sC ring per consumer warpgroup
    tidx, _, _ = cute.arch.thread_idx()
    warp_idx = cute.arch.make_warp_uniform(cute.arch.warp_idx())
    warpgroup_idx = warp_idx // WARPGROUP_WARPS
    if cutlass.const_expr(partial):  # the reduction may launch now; it waits for this grid's end to read
        cute.arch.griddepcontrol_launch_dependents()
    if warp_idx == 0:
        cpasync.prefetch_descriptor(tma_atom_a)
        cpasync.prefetch_descriptor(tma_atom_b)
        cpasync.prefetch_descriptor(tma_atom_c)

    # Where this CTA sits in its cluster, and which CTAs receive the A and B tiles it loads.
    cta_layout = cute.make_layout((cluster_m, cluster_n, 1))
    cta_m, cta_n, _ = cta_layout.get_flat_coord(cute.arch.make_warp_uniform(cute.arch.block_idx_in_cluster()))
    a_mask = cute.make_layout_image_mask(cta_layout, (cta_m, cta_n, 0), mode=1) if cluster_n > 1 else 0
    b_mask = cute.make_layout_image_mask(cta_layout, (cta_m, cta_n, 0), mode=0) if cluster_m > 1 else 0

    # Shared memory: the full/empty mbarriers, the A and B stage rings, the epilogue ring.
    smem = SmemAllocator()
    barriers = smem.allocate_array(cutlass.Int64, 2 * stages)
    sA = smem.allocate_tensor(ab, sA_layout.outer, 1024, sA_layout.inner)
    sB = smem.allocate_tensor(ab, sB_layout.outer, 1024, sB_layout.inner)
    sC = smem.allocate_tensor(c_type, sC_layout.outer, 1024, sC_layout.inner)

    # "full[s]" completes when the TMA bytes of stage s have landed; "empty[s]" when the consumer warps (of the one
    # warpgroup whose tile it holds) of every CTA that multicasts into stage s (its cluster row and column) released
    # it.
    stage_bytes = cute.size_in_bytes(ab, cute.slice_(sA_layout, (None, None, 0))) + cute.size_in_bytes(
        ab, cute.slice_(sB_layout, (None, None, 0)))
    pipe = pipeline.PipelineTmaAsync.create(
        barrier_storage=barriers, num_stages=stages, tx_count=stage_bytes,
        producer_group=pipeline.CooperativeGroup(pipeline.Agent.Thread),
        consumer_group=pipeline.CooperativeGroup(pipeline.Agent.Thread, (cluster_m + cluster_n - 1) * WARPGROUP_WARPS),
        cta_layout_vmnk=cute.make_layout((1, cluster_m, cluster_n, 1)), defer_sync=True)
    pipeline.pipeline_init_arrive(cluster_shape_mn=cluster, is_relaxed=True)

    # Tiles of the TMA coordinate tensors, e.g. gA is (tile_m, tile_k, tiles_m, k_tiles); each CTA of a multicast
    # group loads its 1/cluster share of the A (B) tile.
    gA = cute.local_tile(mA, (tile_m, tile_k), (None, None))
    gB = cute.local_tile(mB, (tile_n, tile_k), (None, None))
    gC = cute.local_tile(mC, (tile_m, tile_n), (None,) * cute.rank(mC))  # split- or stream-K: a 5th mode, slices
    tAsA, tAgA = cpasync.tma_partition(tma_atom_a, cta_n, cute.make_layout(cluster_n), cute.group_modes(sA, 0, 2),
                                       cute.group_modes(gA, 0, 2))
    tBsB, tBgB = cpasync.tma_partition(tma_atom_b, cta_m, cute.make_layout(cluster_m), cute.group_modes(sB, 0, 2),
                                       cute.group_modes(gB, 0, 2))
    k_tiles = cute.size(gA, mode=[3])
    clusters_m = (cute.size(gC, mode=[2]) + cluster_m - 1) // cluster_m
    clusters_n = (cute.size(gC, mode=[3]) + cluster_n - 1) // cluster_n
    _, _, first_work = cute.arch.block_idx()  # the grid is (cluster_m, cluster_n, persistent clusters)
    _, _, work_stride = cute.arch.grid_dim()

    pipeline.pipeline_init_wait(cluster_shape_mn=cluster)  # every barrier of the cluster is initialized

    if warpgroup_idx == 0:
        # Producer: one warp walks the same tiles as the consumers and keeps the stage ring full.
        cute.arch.setmaxregister_decrease(PRODUCER_REGS)
        if warp_idx == 0:
            write = pipeline.make_pipeline_state(pipeline.PipelineUserType.Producer, stages)
            work = first_work
            tiles = clusters_m * clusters_n
            # work units: (tile, split) pairs, each its tile over its split's k-tiles; or stream-K's pieces
            units = splitk.unit_end(first_work, work_stride, tiles, k_tiles, splits, stream_k)
            while work < units:
                tile, split, first_k, k_count = splitk.unit_share(work, work_stride, tiles, k_tiles, splits, stream_k)
                tm, tn = _tile_coord(tile, clusters_m, clusters_n, group_m, cta_m, cta_n, cluster_m, cluster_n)
                for kt in range(first_k, first_k + k_count):
                    pipe.producer_acquire(write)  # wait for empty[s], then expect stage_bytes on full[s]
                    cute.copy(tma_atom_a, tAgA[(None, tm, kt)], tAsA[(None, write.index)],
                              tma_bar_ptr=pipe.producer_get_barrier(write), mcast_mask=a_mask)
                    cute.copy(tma_atom_b, tBgB[(None, tn, kt)], tBsB[(None, write.index)],
                              tma_bar_ptr=pipe.producer_get_barrier(write), mcast_mask=b_mask)
                    write.advance()
                work += work_stride
            pipe.producer_tail(write)  # do not exit while cluster peers may still signal this CTA's barriers
    else:
        # Consumers: warpgroup 1 takes the work items i = 0, 2, 4, ... of this CTA (work = first_work + i·work_stride),
        # warpgroup 2 the odd ones, each a whole tile; wgmma over the ring, then the epilogue.
        cute.arch.setmaxregister_increase(CONSUMER_REGS)
        consumer = warpgroup_idx - 1  # 0 or 1: this warpgroup's first work item, sC ring and named barriers
        epi_tidx = tidx - WARPGROUP_THREADS * warpgroup_idx  # thread index in this warpgroup
        thr_mma = tiled_mma.get_slice(0)  # the whole tile
        tCrA = tiled_mma.make_fragment_A(thr_mma.partition_A(sA))
        tCrB = tiled_mma.make_fragment_B(thr_mma.partition_B(sB))
        acc = cute.make_rmem_tensor(thr_mma.partition_shape_C((tile_m, tile_n)), cutlass.Float32)
        k_blocks = cute.size(tCrA, mode=[2])

        # Epilogue partitions: registers -> sC laid out like the accumulators (the stmatrix tiling).
        thr_copy_r2s = tiled_copy_r2s.get_slice(epi_tidx)
        tRS_sC = thr_copy_r2s.partition_D(sC)
        tRS_acc = tiled_copy_r2s.retile(acc)  # (values of one 64-row wgmma slab, slabs, 1)
        thr_mma_c = tiled_mma.get_slice(epi_tidx)  # this thread's accumulators, for their (m, n) coordinates
        sub_shape = cute.shape(thr_copy_r2s.partition_S(sC))[:3]  # (copy values, slabs, copies along N) of a subtile
        copy_values, slabs = cute.size(sub_shape[0]), sub_shape[1]
        slab_values = copy_values * cute.size(sub_shape[2])  # a subtile's values in one slab
        sub_acc = cute.make_rmem_tensor(sub_shape, cutlass.Float32)
        sub_c = cute.make_rmem_tensor(sub_shape, c_type)
        sub_size = cute.size(sub_acc)
        epi_barrier = pipeline.NamedBarrier(barrier_id=EPILOGUE_BARRIER + consumer, num_threads=WARPGROUP_THREADS)
        store_warp = warp_idx == WARPGROUP_WARPS * warpgroup_idx  # the warpgroup's first warp issues its TMA stores
        # Turns: a warpgroup starts a mainloop only once the other one has issued the previous work item's.
        my_turn = pipeline.NamedBarrier(barrier_id=TURN_BARRIER + consumer, num_threads=2 * WARPGROUP_THREADS)
        their_turn = pipeline.NamedBarrier(barrier_id=TURN_BARRIER + 1 - consumer, num_threads=2 * WARPGROUP_THREADS)

        read = pipeline.make_pipeline_state(pipeline.PipelineUserType.Consumer, stages)
        release = pipeline.make_pipeline_state(pipeline.PipelineUserType.Consumer, stages)
        work = first_work + consumer * work_stride
        tiles = clusters_m * clusters_n
        units = splitk.unit_end(first_work, work_stride, tiles, k_tiles, splits, stream_k)
        skip = splitk.unit_share(first_work, work_stride, tiles, k_tiles, splits, stream_k)[3]
        read.advance(consumer * skip)  # skip the stages of the work item the other warpgroup takes
        release.advance(consumer * skip)
        tiles_done = cutlass.Int32(0)
        while work < units:
            tile, split, first_k, k_count = splitk.unit_share(work, work_stride, tiles, k_tiles, splits, stream_k)
            tm, tn = _tile_coord(tile, clusters_m, clusters_n, group_m, cta_m, cta_n, cluster_m, cluster_n)

            # Mainloop: keep one k-tile of wgmma in flight; release a stage once the wgmma reading it retired.
            if work != first_work:
                my_turn.arrive_and_wait()  # the other warpgroup has issued the previous work item's mainloop
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
            for kt in range(1, k_count):
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
            if work + work_stride < units:
                their_turn.arrive()  # the next work item is the other warpgroup's
            warpgroup.wait_group(0)
            pipe.consumer_release(release)
            release.advance()
            skip = splitk.unit_share(work + work_stride, work_stride, tiles, k_tiles, splits, stream_k)[3]
            read.advance(skip)  # the other warpgroup's next work item
            release.advance(skip)

            # Epilogue: subtile j holds values [j·slab_values, (j+1)·slab_values) of each slab of every thread; it
            # goes through buffer buf of this warpgroup's sC ring.
            tile_c = gC[(None, None, tm, tn, split)] if cutlass.const_expr(partial) else gC[(None, None, tm, tn)]
            gC_sub = cute.zipped_divide(tile_c, epi_tile)  # ((tile_m, epi_n), (1, subtiles))
            bSG_sC, bSG_gC = cpasync.tma_partition(tma_atom_c, 0, cute.make_layout(1), cute.group_modes(sC, 0, 2),
                                                   gC_sub)
            subtiles = cute.size(gC_sub, mode=[1])
            cC = cute.local_tile(cute.make_identity_tensor(mSrc.shape), (tile_m, tile_n), (tm, tn))
            tRS_cC = tiled_copy_r2s.retile(thr_mma_c.partition_C(cC))  # the coordinates of tRS_acc's values
            for j in cutlass.range_constexpr(subtiles):
                for v in cutlass.range_constexpr(sub_size):  # v is (copy value c, slab m, copy n) of the subtile
                    c = v % copy_values
                    m = v // copy_values % slabs
                    n = v // (copy_values * slabs)
                    sub_acc[v] = tRS_acc[j * slab_values + n * copy_values + c, m, 0]
                    if cutlass.const_expr(not fused.identity):  # the fused epilogue, at the value's (m, n)
                        coord = tRS_cC[j * slab_values + n * copy_values + c, m, 0]  # outside: the TMA store clips
                        sub_acc[v] = epilogue.element(fused, sub_acc[v], coord, mSrc, mBias, mAux, alpha, beta,
                                                      clipped=True)
                sub_c.store(sub_acc.load().to(c_type))
                buf = consumer * epi_stages + (tiles_done * subtiles + j) % epi_stages
                cute.copy(tiled_copy_r2s, sub_c, tRS_sC[(None, None, None, buf)])
                cute.arch.fence_proxy("async.shared", space="cta")  # make the st.shared visible to the TMA unit
                epi_barrier.arrive_and_wait()  # the whole subtile is in sC
                if store_warp:
                    cute.copy(tma_atom_c, bSG_sC[(None, buf)], bSG_gC[(None, j)])
                    cute.arch.cp_async_bulk_commit_group()
                    cute.arch.cp_async_bulk_wait_group(epi_stages - 1, read=True)  # the next buffer is free again
                epi_barrier.arrive_and_wait()  # nobody overwrites a buffer a TMA store may still read
            tiles_done += 1
            work += 2 * work_stride
        if store_warp:
            cute.arch.cp_async_bulk_wait_group(0, read=True)


@cute.jit
def host(pA: cute.Pointer, pB: cute.Pointer, pC: cute.Pointer, m: cutlass.Int32, n: cutlass.Int32,
         k: cutlass.Int32, lda: cutlass.Int32, ldb: cutlass.Int32, ldc: cutlass.Int32, stream: Any,
         pSrc: cute.Pointer, pBias: cute.Pointer, pAux: cute.Pointer,
         alpha: cutlass.Float32, beta: cutlass.Float32, ops: cutlass.Constexpr, config: cutlass.Constexpr,
         fused: cutlass.Constexpr):
    mA, mB, mC = device.tensors(ops, pA, pB, pC, m, n, k, lda, ldb, ldc)
    if cutlass.const_expr(config.partial):  # C is splitk's float32 workspace: one (M, N) slice per split or piece
        if cutlass.const_expr(ops.c != "float32" or not fused.identity):
            asked = f"splits={config.splits}" + (", stream_k=True" if config.stream_k else "")
            raise ValueError(f"Config({asked}) stores float32 partial sums with no epilogue, not {ops.c} with {fused}: "
                             f"call it through splitk.Launcher (gemm11_pingpong.gemm)")
        mC = splitk.workspace(pC, m, n, config.splits, ops.c_major)
    mSrc, mBias, mAux = epilogue.tensors(fused, pSrc, pBias, pAux, m, n, ops.c_major)
    ab, c_type = device.dtype(ops.ab), device.dtype(ops.c)
    tiler = (config.tile_m, config.tile_n, config.tile_k)
    cluster = (config.cluster_m, config.cluster_n)
    a_layout, b_layout = LayoutEnum.from_tensor(mA), LayoutEnum.from_tensor(mB)
    c_layout = LayoutEnum.from_tensor(mC)  # column-major for swap-AB's Dᵀ
    consumers = 2
    # One wgmma is 64 × tile_n × 16; a consumer warpgroup repeats it down the tile's M.
    tiled_mma = sm90.make_trivial_tiled_mma(ab, ab, a_layout.sm90_mma_major_mode(), b_layout.sm90_mma_major_mode(),
                                            cutlass.Float32, (1, 1, 1), tiler_mn=(64, config.tile_n))

    # As many stages as fit next to the two epilogue rings: 128 × 128 × 64 16-bit is 32 KB a stage, 5 (fp32 C) or
    # 6 stages with epi_stages=2.
    epi_tile = (config.tile_m, config.epi_n)
    epi_bytes = config.tile_m * config.epi_n * c_type.width // 8 * config.epi_stages * consumers
    stage_bytes = (config.tile_m + config.tile_n) * config.tile_k * ab.width // 8
    stages = config.stages or (SMEM_BYTES - 1024 - epi_bytes) // stage_bytes
    if cutlass.const_expr(stages * stage_bytes > SMEM_BYTES - 1024 - epi_bytes):
        raise ValueError(f"Config(stages={config.stages}): {stages} stages of {stage_bytes} bytes do not fit the "
                         f"{SMEM_BYTES} bytes of shared memory next to {epi_bytes} bytes of {ops.c} epilogue buffers: "
                         "lower stages, or stages=0 for as many as fit")
    sA_layout = sm90.make_smem_layout_a(a_layout, tiler, ab, stages)
    sB_layout = sm90.make_smem_layout_b(b_layout, tiler, ab, stages)
    sC_layout = sm90.make_smem_layout_epi(c_type, c_layout, epi_tile, config.epi_stages * consumers)

    # TMA descriptors. A is shared by the cluster_n CTAs of a cluster row, B by the cluster_m CTAs of a column.
    def load(t: cute.Tensor, s_layout: Any, box: tuple, mcast: int) -> Any:
        op = cpasync.CopyBulkTensorTileG2SMulticastOp() if mcast > 1 else cpasync.CopyBulkTensorTileG2SOp()
        return cpasync.make_tiled_tma_atom(op, t, cute.slice_(s_layout, (None, None, 0)), box, num_multicast=mcast)

    tma_atom_a, tma_tensor_a = load(mA, sA_layout, (config.tile_m, config.tile_k), config.cluster_n)
    tma_atom_b, tma_tensor_b = load(mB, sB_layout, (config.tile_n, config.tile_k), config.cluster_m)
    tma_atom_c, tma_tensor_c = cpasync.make_tiled_tma_atom(cpasync.CopyBulkTensorTileS2GOp(), mC,
                                                           cute.slice_(sC_layout, (None, None, 0)), epi_tile)
    # Registers -> sC: stmatrix (16-bit C) or plain stores (fp32 C), in the accumulators' layout; a column-major C
    # (swap-AB's Cᵀ) takes stmatrix.trans, which writes each 8 × 8 matrix transposed. The store op (the first atom)
    # is the instruction; the second only tiles it over the accumulators, and its flag is kept the same.
    trans = c_layout.is_m_major_c()
    tiled_copy_r2s = cute.make_tiled_copy_S(
        sm90.get_smem_store_op(c_layout, c_type, cutlass.Float32),
        cute.make_tiled_copy_C_atom(cute.make_copy_atom(warp.StMatrix8x8x16bOp(trans, 4), c_type), tiled_mma))

    # Persistent grid: at most one CTA per SM, grouped into clusters, and no more clusters than the rounds of work
    # need: 256 cluster tiles on 66 clusters take 4 rounds, and so do they on 64, whose last round is not partial
    # (less power for the same rounds, and the waves line up with the raster's groups).
    clusters_m = (m + config.tile_m * config.cluster_m - 1) // (config.tile_m * config.cluster_m)
    clusters_n = (n + config.tile_n * config.cluster_n - 1) // (config.tile_n * config.cluster_n)
    fit = config.sms // (config.cluster_m * config.cluster_n)
    if cutlass.const_expr(config.stream_k):  # every cluster that fits, each with an equal share of the k-tiles
        persistent = splitk.stream_ctas(clusters_m * clusters_n, (k + config.tile_k - 1) // config.tile_k, fit)
    else:
        units = clusters_m * clusters_n * config.splits
        rounds = (units + fit - 1) // fit
        persistent = (units + rounds - 1) // rounds
    _kernel(tma_atom_a, tma_tensor_a, tma_atom_b, tma_tensor_b, tma_atom_c, tma_tensor_c, tiled_mma, sA_layout,
            sB_layout, sC_layout, tiled_copy_r2s, mSrc, mBias, mAux, alpha, beta, ab, c_type, tiler, epi_tile,
            config.group_m, cluster, fused, config.splits, config.stream_k).launch(
        grid=(config.cluster_m, config.cluster_n, persistent), block=(WARPGROUP_THREADS * (1 + consumers), 1, 1),
        cluster=(config.cluster_m, config.cluster_n, 1), stream=stream)


gemm = splitk.Launcher(host, Config, vector=True, min_cc=90, for_device=launcher.for_device, epilogue=True,
                       fp8=True, column_major_out=True)
