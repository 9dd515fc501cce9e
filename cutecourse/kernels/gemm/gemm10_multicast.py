"""GEMM, step 10: clusters with TMA multicast, and C stored by TMA. CTA pairs load each operand tile once for both,
and C leaves through shared memory with a TMA store: the full Hopper kernel, on par with cuBLAS.

Step 9's CTAs each loaded their own A and B tiles, and their threads stored C in 128-bit vectors from a whole
tile staged in shared memory. Here:

* **Clusters and TMA multicast.** Two CTAs of a cluster stacked along M need the same B tile: each loads half of
  it and the TMA multicasts both halves into both CTAs' shared memory, halving B's L2 traffic (``cluster_n`` > 1
  shares A the same way). A consumer must then release a slot to every CTA that writes into it, so the "empty"
  barriers count arrivals across the cluster, and the cluster's barriers are initialized before any CTA uses them.
  The grouped raster walks clusters instead of CTAs.
* **TMA-store epilogue.** The consumers convert the accumulators to C's dtype in ``tile_m`` × ``epi_n`` subtiles,
  write each into a small shared-memory ring (``stmatrix`` for 16-bit C; 32 KiB of bf16 where step 9's whole tile
  took 64, room for a fourth stage) and one thread stores it with a TMA bulk copy, which clips rows and columns past
  M and N. The TMA loads zero-fill past M, N and K, so ragged shapes need
  no predicates at all. The store is asynchronous: the consumers go on to the next subtile, and to the next tile's
  mainloop, while it drains.

Both consumer warpgroups split each tile (64 rows each of 128 × 256) and run its epilogue together, the
cooperative schedule; on an H200 its 128 × 256 tiles moved less data per FLOP than the alternative of one
128 × 128 tile per warpgroup (step 11) and ran 3-5% faster (benchmarks/RESULTS.md).

Config: tile_m 64, 128 or 256, tile_n a multiple of 64 up to 256 and of epi_n, at most 128 accumulators a consumer
thread; stages 0 (as many as fit) or 2 or more that fit the sm_90 shared memory; sms ≥ cluster_m · cluster_n.

The fused epilogue (``D = act(alpha · acc + beta · C + bias)``, `cutecourse.kernels.gemm.epilogue`) runs on each
subtile's accumulators before the conversion; fp8 operands (e4m3, e5m2, both K-major) use the fp8 wgmma, with
per-tensor scales folded into alpha (`cutecourse.kernels.gemm.fp8`).

    gemm(a, b, c)   # c = a @ b; a (M, K), b (K, N) float16/bfloat16 (or fp8); c (M, N) float32/float16/bfloat16
    gemm(a, b, d, epilogue=Epilogue("gelu_tanh", bias="n"), bias=bias)   # d = GELU(a @ b + bias), one kernel
    gemm(a8, b8, d, FP8_CONFIG, alpha=scale_a * scale_b)                    # fp8: d = (sa·a8) @ (sb·b8)
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
    stages: int = 0  # k-tiles in flight in shared memory; 0: as many as fit next to the epilogue buffers
    group_m: int = 8  # tile raster: clusters per group along M
    sms: int = hw.SPECS["H100 SXM"].sms  # persistent grid: at most sms // (cluster_m · cluster_n) clusters; the
    # launcher lowers it to the GPU's SM count (H100 SXM and H200: 132, H100 PCIe: 114)
    cluster_m: int = 2  # CTAs per cluster along M; they share (multicast) the B tile
    cluster_n: int = 1  # CTAs per cluster along N; they share (multicast) the A tile
    epi_n: int = 32  # epilogue subtile: tile_m × epi_n outputs per TMA store
    epi_stages: int = 4  # shared-memory buffers for epilogue subtiles in flight

    def __post_init__(self) -> None:
        if self.tile_m not in (64, 128, 256) or self.tile_n % 64 or self.tile_n > 256 or self.tile_n % self.epi_n:
            raise ValueError(f"{self}: tile_m must be 64, 128 or 256, tile_n a multiple of 64 up to 256 and of epi_n")
        if self.tile_m * self.tile_n > 128 * 128 * self.consumer_warpgroups:
            raise ValueError(f"{self}: more than 128 accumulators a consumer thread; make the tile smaller")
        if self.stages == 1 or self.stages < 0:  # one slot: the producer waits for a release that waits for it
            raise ValueError(f"{self}: stages must be 0 (as many as fit) or at least 2")
        if self.group_m < 1 or self.sms < self.cluster_m * self.cluster_n:
            raise ValueError(f"{self}: group_m must be at least 1 and sms at least cluster_m * cluster_n")

    @property
    def consumer_warpgroups(self) -> int:
        """Consumer warpgroups that split one tile: one per 64 rows, at most 2."""
        return min(self.tile_m // 64, 2)


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
            group_m: cutlass.Constexpr, cluster: cutlass.Constexpr, fused: cutlass.Constexpr):
    tile_m, tile_n, tile_k = tiler
    cluster_m, cluster_n = cluster
    stages = cute.size(sA_layout, mode=[2])
    epi_stages = cute.size(sC_layout, mode=[2])
    consumers = cute.size(tiled_mma) // WARPGROUP_THREADS
    tidx, _, _ = cute.arch.thread_idx()
    warp_idx = cute.arch.make_warp_uniform(cute.arch.warp_idx())
    warpgroup_idx = warp_idx // WARPGROUP_WARPS
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

    # "full[s]" completes when the TMA bytes of stage s have landed; "empty[s]" when every consumer warp of every CTA
    # that multicasts into stage s (its cluster row and column) released it.
    stage_bytes = cute.size_in_bytes(ab, cute.slice_(sA_layout, (None, None, 0))) + cute.size_in_bytes(
        ab, cute.slice_(sB_layout, (None, None, 0)))
    pipe = pipeline.PipelineTmaAsync.create(
        barrier_storage=barriers, num_stages=stages, tx_count=stage_bytes,
        producer_group=pipeline.CooperativeGroup(pipeline.Agent.Thread),
        consumer_group=pipeline.CooperativeGroup(pipeline.Agent.Thread,
                                                 (cluster_m + cluster_n - 1) * WARPGROUP_WARPS * consumers),
        cta_layout_vmnk=cute.make_layout((1, cluster_m, cluster_n, 1)), defer_sync=True)
    pipeline.pipeline_init_arrive(cluster_shape_mn=cluster, is_relaxed=True)

    # Tiles of the TMA coordinate tensors, e.g. gA is (tile_m, tile_k, tiles_m, k_tiles); each CTA of a multicast
    # group loads its 1/cluster share of the A (B) tile.
    gA = cute.local_tile(mA, (tile_m, tile_k), (None, None))
    gB = cute.local_tile(mB, (tile_n, tile_k), (None, None))
    gC = cute.local_tile(mC, (tile_m, tile_n), (None, None))
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
            while work < clusters_m * clusters_n:
                tm, tn = _tile_coord(work, clusters_m, clusters_n, group_m, cta_m, cta_n, cluster_m, cluster_n)
                for kt in range(k_tiles):
                    pipe.producer_acquire(write)  # wait for empty[s], then expect stage_bytes on full[s]
                    cute.copy(tma_atom_a, tAgA[(None, tm, kt)], tAsA[(None, write.index)],
                              tma_bar_ptr=pipe.producer_get_barrier(write), mcast_mask=a_mask)
                    cute.copy(tma_atom_b, tBgB[(None, tn, kt)], tBsB[(None, write.index)],
                              tma_bar_ptr=pipe.producer_get_barrier(write), mcast_mask=b_mask)
                    write.advance()
                work += work_stride
            pipe.producer_tail(write)  # do not exit while cluster peers may still signal this CTA's barriers
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
        epi_barrier = pipeline.NamedBarrier(barrier_id=EPILOGUE_BARRIER, num_threads=WARPGROUP_THREADS * consumers)
        store_warp = warp_idx == WARPGROUP_WARPS  # the first consumer warp issues the TMA stores

        read = pipeline.make_pipeline_state(pipeline.PipelineUserType.Consumer, stages)
        release = pipeline.make_pipeline_state(pipeline.PipelineUserType.Consumer, stages)
        work = first_work
        tiles_done = cutlass.Int32(0)
        while work < clusters_m * clusters_n:
            tm, tn = _tile_coord(work, clusters_m, clusters_n, group_m, cta_m, cta_n, cluster_m, cluster_n)

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

            # Epilogue: subtile j holds values [j·slab_values, (j+1)·slab_values) of each slab of every thread; it
            # goes through buffer buf of the sC ring.
            gC_sub = cute.zipped_divide(gC[(None, None, tm, tn)], epi_tile)  # ((tile_m, epi_n), (1, subtiles))
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
                buf = (tiles_done * subtiles + j) % epi_stages
                cute.copy(tiled_copy_r2s, sub_c, tRS_sC[(None, None, None, buf)])
                cute.arch.fence_proxy("async.shared", space="cta")  # make the st.shared visible to the TMA unit
                epi_barrier.arrive_and_wait()  # the whole subtile is in sC
                if store_warp:
                    cute.copy(tma_atom_c, bSG_sC[(None, buf)], bSG_gC[(None, j)])
                    cute.arch.cp_async_bulk_commit_group()
                    cute.arch.cp_async_bulk_wait_group(epi_stages - 1, read=True)  # the next buffer is free again
                epi_barrier.arrive_and_wait()  # nobody overwrites a buffer a TMA store may still read
            tiles_done += 1
            work += work_stride
        if store_warp:
            cute.arch.cp_async_bulk_wait_group(0, read=True)


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
    cluster = (config.cluster_m, config.cluster_n)
    a_layout, b_layout = LayoutEnum.from_tensor(mA), LayoutEnum.from_tensor(mB)
    consumers = config.consumer_warpgroups
    # One wgmma is 64 × tile_n × 16; each consumer warpgroup takes its 64-row slabs of the tile.
    tiled_mma = sm90.make_trivial_tiled_mma(ab, ab, a_layout.sm90_mma_major_mode(), b_layout.sm90_mma_major_mode(),
                                            cutlass.Float32, (consumers, 1, 1), tiler_mn=(64, config.tile_n))

    # As many stages as fit next to the epilogue ring: 128 × 256 × 64 16-bit is 48 KB a stage, 4 stages.
    epi_tile = (config.tile_m, config.epi_n)
    epi_bytes = config.tile_m * config.epi_n * c_type.width // 8 * config.epi_stages
    stage_bytes = (config.tile_m + config.tile_n) * config.tile_k * ab.width // 8
    stages = config.stages or (SMEM_BYTES - 1024 - epi_bytes) // stage_bytes
    if cutlass.const_expr(stages * stage_bytes > SMEM_BYTES - 1024 - epi_bytes):
        raise ValueError(f"Config(stages={config.stages}): {stages} stages of {stage_bytes} bytes do not fit the "
                         f"{SMEM_BYTES} bytes of shared memory next to {epi_bytes} bytes of {ops.c} epilogue buffers: "
                         "lower stages, or stages=0 for as many as fit")
    sA_layout = sm90.make_smem_layout_a(a_layout, tiler, ab, stages)
    sB_layout = sm90.make_smem_layout_b(b_layout, tiler, ab, stages)
    sC_layout = sm90.make_smem_layout_epi(c_type, LayoutEnum.ROW_MAJOR, epi_tile, config.epi_stages)

    # TMA descriptors. A is shared by the cluster_n CTAs of a cluster row, B by the cluster_m CTAs of a column.
    def load(t: cute.Tensor, s_layout: Any, box: tuple, mcast: int) -> Any:
        op = cpasync.CopyBulkTensorTileG2SMulticastOp() if mcast > 1 else cpasync.CopyBulkTensorTileG2SOp()
        return cpasync.make_tiled_tma_atom(op, t, cute.slice_(s_layout, (None, None, 0)), box, num_multicast=mcast)

    tma_atom_a, tma_tensor_a = load(mA, sA_layout, (config.tile_m, config.tile_k), config.cluster_n)
    tma_atom_b, tma_tensor_b = load(mB, sB_layout, (config.tile_n, config.tile_k), config.cluster_m)
    tma_atom_c, tma_tensor_c = cpasync.make_tiled_tma_atom(cpasync.CopyBulkTensorTileS2GOp(), mC,
                                                           cute.slice_(sC_layout, (None, None, 0)), epi_tile)
    # Registers -> sC: stmatrix (16-bit C) or plain stores (fp32 C), in the accumulators' layout.
    tiled_copy_r2s = cute.make_tiled_copy_S(
        sm90.get_smem_store_op(LayoutEnum.ROW_MAJOR, c_type, cutlass.Float32),
        cute.make_tiled_copy_C_atom(cute.make_copy_atom(warp.StMatrix8x8x16bOp(False, 4), c_type), tiled_mma))

    # Persistent grid: at most one CTA per SM, grouped into clusters, and no more clusters than the rounds of work
    # need: 256 cluster tiles on 66 clusters take 4 rounds, and so do they on 64, whose last round is not partial
    # (less power for the same rounds, and the waves line up with the raster's groups).
    clusters_m = (m + config.tile_m * config.cluster_m - 1) // (config.tile_m * config.cluster_m)
    clusters_n = (n + config.tile_n * config.cluster_n - 1) // (config.tile_n * config.cluster_n)
    fit = config.sms // (config.cluster_m * config.cluster_n)
    rounds = (clusters_m * clusters_n + fit - 1) // fit
    persistent = (clusters_m * clusters_n + rounds - 1) // rounds
    _kernel(tma_atom_a, tma_tensor_a, tma_atom_b, tma_tensor_b, tma_atom_c, tma_tensor_c, tiled_mma, sA_layout,
            sB_layout, sC_layout, tiled_copy_r2s, mSrc, mBias, mAux, alpha, beta, ab, c_type, tiler, epi_tile,
            config.group_m, cluster, fused).launch(
        grid=(config.cluster_m, config.cluster_n, persistent), block=(WARPGROUP_THREADS * (1 + consumers), 1, 1),
        cluster=(config.cluster_m, config.cluster_n, 1), stream=stream)


gemm = launcher.Launcher(host, Config, vector=True, min_cc=90, for_device=launcher.for_device, epilogue=True,
                            fp8=True)
