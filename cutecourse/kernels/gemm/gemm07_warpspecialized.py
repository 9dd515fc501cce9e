"""GEMM, step 7: warp specialization. One warpgroup only loads, two only multiply, and the DSL's pipeline classes
hand the shared-memory stages between them.

In step 6 one warpgroup did everything: its warp 0 issued the next TMA loads between its own wgmma batches, and
the hand-written mbarrier waits and arrives sat in the mainloop. Here a CTA has three warpgroups with one job each:

* **Producer and consumers.** Warpgroup 0 is the *producer*: one of its warps walks the k-tiles and issues the TMA
  loads of A and B into a ring of ``stages`` shared-memory slots, as far ahead as the ring allows. Warpgroups 1 and
  2 are the *consumers*: each owns 64 rows of the 128 × 256 CTA tile (64 × 256 fp32 = 128 accumulator registers per
  thread, so the tile is twice step 6's for the same registers a thread) and runs wgmma on a slot once it is full,
  then hands it back.
* **setmaxnreg.** The producer only computes addresses, the consumers hold the accumulators: ``setmaxnreg`` moves
  registers from the one (40 per thread) to the others (232).
* **The pipeline classes.** ``PipelineTmaAsync`` owns the two mbarriers per slot that step 6 managed by hand:
  ``producer_acquire`` waits until a slot is empty and arms its "full" barrier with the byte count the TMA will
  deliver, ``consumer_wait`` waits until it is full, ``consumer_release`` marks it empty again. A
  ``PipelineState`` carries the slot index and the phase parity, and ``advance()`` steps both, so no ``kt %
  stages`` or ``(kt // stages) % 2`` appears in the kernel. ``producer_tail`` keeps the producer from exiting while
  the consumers may still signal its barriers.

The first wgmma of the tile overwrites the accumulators instead of adding to them, so they need no zero-fill, whose
register moves ptxas would have to fence off from the asynchronous wgmma. The epilogue is step 6's, one tile per
CTA.

Config: tile_m 64, 128 or 256, tile_n a multiple of 64 up to 256, at most 128 accumulators a consumer thread;
stages 0 (as many as fit) or 2 or more that fit the sm_90 shared memory.

    gemm(a, b, c)   # c = a @ b; a (M, K), b (K, N) float16/bfloat16; c (M, N) float32/float16/bfloat16
"""

from __future__ import annotations

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
from cutecourse.kernels.gemm import device, launcher

SMEM_BYTES = hw.ARCH_LIMITS["sm_90"].smem_per_block_max  # shared memory one H100/H200 CTA may use
WARPGROUP_THREADS, WARPGROUP_WARPS = cute.arch.THREADS_PER_WARPGROUP, cute.arch.WARPS_PER_WARPGROUP
PRODUCER_REGS, CONSUMER_REGS = 40, 232  # setmaxnreg targets: 128 × 40 + 256 × 232 ≤ 64K registers per SM


@dataclass(frozen=True)
class Config:
    tile_m: int = 128  # CTA tile M: 64, 128 or 256, split between the consumer warpgroups
    tile_n: int = 256  # CTA tile N: a multiple of 64, at most 256 (one wgmma is 64 × tile_n × 16)
    tile_k: int = 64  # k-tile: one 128-byte swizzled row of 16-bit elements
    stages: int = 0  # k-tiles in flight in shared memory; 0: as many as fit

    def __post_init__(self) -> None:
        if self.tile_m not in (64, 128, 256) or self.tile_n % 64 or self.tile_n > 256:
            raise ValueError(f"{self}: tile_m must be 64, 128 or 256, tile_n a multiple of 64 up to 256")
        if self.tile_m * self.tile_n > 128 * 128 * self.consumer_warpgroups:
            raise ValueError(f"{self}: more than 128 accumulators a consumer thread; make the tile smaller")
        if self.stages == 1 or self.stages < 0:  # one slot: the producer waits for a release that waits for it
            raise ValueError(f"{self}: stages must be 0 (as many as fit) or at least 2")

    @property
    def consumer_warpgroups(self) -> int:
        """Consumer warpgroups that split one tile: one per 64 rows, at most 2."""
        return min(self.tile_m // 64, 2)


@cute.kernel
def _kernel(tma_atom_a: cute.CopyAtom, mA: cute.Tensor, tma_atom_b: cute.CopyAtom, mB: cute.Tensor, mC: cute.Tensor,
            tiled_mma: cute.TiledMma, sA_layout: cute.ComposedLayout, sB_layout: cute.ComposedLayout,
            ab: cutlass.Constexpr, tiler: cutlass.Constexpr):
    tile_m, tile_n, tile_k = tiler
    stages = cute.size(sA_layout, mode=[2])
    consumers = cute.size(tiled_mma) // WARPGROUP_THREADS
    tidx, _, _ = cute.arch.thread_idx()
    warp_idx = cute.arch.make_warp_uniform(cute.arch.warp_idx())
    warpgroup_idx = warp_idx // WARPGROUP_WARPS
    if warp_idx == 0:
        cpasync.prefetch_descriptor(tma_atom_a)
        cpasync.prefetch_descriptor(tma_atom_b)

    # Shared memory: the full/empty mbarriers, the A and B stage rings.
    smem = SmemAllocator()
    barriers = smem.allocate_array(cutlass.Int64, 2 * stages)
    sA = smem.allocate_tensor(ab, sA_layout.outer, 1024, sA_layout.inner)
    sB = smem.allocate_tensor(ab, sB_layout.outer, 1024, sB_layout.inner)

    # "full[s]" completes when the TMA bytes of stage s have landed; "empty[s]" when every consumer warp released it.
    stage_bytes = cute.size_in_bytes(ab, cute.slice_(sA_layout, (None, None, 0))) + cute.size_in_bytes(
        ab, cute.slice_(sB_layout, (None, None, 0)))
    pipe = pipeline.PipelineTmaAsync.create(
        barrier_storage=barriers, num_stages=stages, tx_count=stage_bytes,
        producer_group=pipeline.CooperativeGroup(pipeline.Agent.Thread),
        consumer_group=pipeline.CooperativeGroup(pipeline.Agent.Thread, WARPGROUP_WARPS * consumers),
        defer_sync=True)
    pipeline.pipeline_init_arrive()

    # Tiles of the TMA coordinate tensors, e.g. gA is (tile_m, tile_k, tiles_m, k_tiles), and of C (mC is C itself);
    # this CTA computes tile (tm, tn).
    gA = cute.local_tile(mA, (tile_m, tile_k), (None, None))
    gB = cute.local_tile(mB, (tile_n, tile_k), (None, None))
    gC = cute.local_tile(mC, (tile_m, tile_n), (None, None))
    tAsA, tAgA = cpasync.tma_partition(tma_atom_a, 0, cute.make_layout(1), cute.group_modes(sA, 0, 2),
                                       cute.group_modes(gA, 0, 2))
    tBsB, tBgB = cpasync.tma_partition(tma_atom_b, 0, cute.make_layout(1), cute.group_modes(sB, 0, 2),
                                       cute.group_modes(gB, 0, 2))
    k_tiles = cute.size(gA, mode=[3])
    tm, tn, _ = cute.arch.block_idx()

    pipeline.pipeline_init_wait()  # every barrier is initialized

    if warpgroup_idx == 0:
        # Producer: one warp keeps the stage ring full with the tile's k-tiles.
        cute.arch.setmaxregister_decrease(PRODUCER_REGS)
        if warp_idx == 0:
            write = pipeline.make_pipeline_state(pipeline.PipelineUserType.Producer, stages)
            for kt in range(k_tiles):
                pipe.producer_acquire(write)  # wait for empty[s], then expect stage_bytes on full[s]
                cute.copy(tma_atom_a, tAgA[(None, tm, kt)], tAsA[(None, write.index)],
                          tma_bar_ptr=pipe.producer_get_barrier(write))
                cute.copy(tma_atom_b, tBgB[(None, tn, kt)], tBsB[(None, write.index)],
                          tma_bar_ptr=pipe.producer_get_barrier(write))
                write.advance()
            pipe.producer_tail(write)  # do not exit before the consumers released the last stages
    else:
        # Consumers: both warpgroups take the tile, each its 64-row slabs; wgmma over the ring, then the epilogue.
        cute.arch.setmaxregister_increase(CONSUMER_REGS)
        epi_tidx = tidx - WARPGROUP_THREADS  # thread index among the consumers
        thr_mma = tiled_mma.get_slice(WARPGROUP_THREADS * (warpgroup_idx - 1))  # this warpgroup's rows of the tile
        tCrA = tiled_mma.make_fragment_A(thr_mma.partition_A(sA))
        tCrB = tiled_mma.make_fragment_B(thr_mma.partition_B(sB))
        acc = cute.make_rmem_tensor(thr_mma.partition_shape_C((tile_m, tile_n)), cutlass.Float32)
        k_blocks = cute.size(tCrA, mode=[2])

        read = pipeline.make_pipeline_state(pipeline.PipelineUserType.Consumer, stages)
        release = pipeline.make_pipeline_state(pipeline.PipelineUserType.Consumer, stages)

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

        # Epilogue: round to C's dtype and store the elements inside C, straight from the accumulator registers
        # (this thread's elements of the tile: the accumulators' layout, sliced at the thread).
        thr_mma_c = tiled_mma.get_slice(epi_tidx)
        cC = cute.local_tile(cute.make_identity_tensor(mC.shape), (tile_m, tile_n), (tm, tn))
        device.store_inside(acc, thr_mma_c.partition_C(gC[(None, None, tm, tn)]), thr_mma_c.partition_C(cC),
                                 mC.shape)


@cute.jit
def host(pA: cute.Pointer, pB: cute.Pointer, pC: cute.Pointer, m: cutlass.Int32, n: cutlass.Int32,
         k: cutlass.Int32, lda: cutlass.Int32, ldb: cutlass.Int32, ldc: cutlass.Int32, stream: Any,
         ops: cutlass.Constexpr, config: cutlass.Constexpr):
    mA, mB, mC = device.tensors(ops, pA, pB, pC, m, n, k, lda, ldb, ldc)
    ab = device.dtype(ops.ab)
    tiler = (config.tile_m, config.tile_n, config.tile_k)
    a_layout, b_layout = LayoutEnum.from_tensor(mA), LayoutEnum.from_tensor(mB)
    consumers = config.consumer_warpgroups
    # One wgmma is 64 × tile_n × 16; each consumer warpgroup takes its 64-row slabs of the tile.
    tiled_mma = sm90.make_trivial_tiled_mma(ab, ab, a_layout.sm90_mma_major_mode(), b_layout.sm90_mma_major_mode(),
                                            cutlass.Float32, (consumers, 1, 1), tiler_mn=(64, config.tile_n))

    # As many stages as fit: 128 × 256 × 64 16-bit is 48 KB a stage, 4 stages.
    stage_bytes = (config.tile_m + config.tile_n) * config.tile_k * ab.width // 8
    stages = config.stages or (SMEM_BYTES - 1024) // stage_bytes
    if cutlass.const_expr(stages * stage_bytes > SMEM_BYTES - 1024):
        raise ValueError(f"Config(stages={config.stages}): {stages} stages of {stage_bytes} bytes do not fit the "
                         f"{SMEM_BYTES} bytes of shared memory: lower stages, or stages=0 for as many as fit")
    sA_layout = sm90.make_smem_layout_a(a_layout, tiler, ab, stages)
    sB_layout = sm90.make_smem_layout_b(b_layout, tiler, ab, stages)

    # TMA descriptors for one stage's box; the returned tensors hold coordinates, not data.
    tma_atom_a, tma_tensor_a = cpasync.make_tiled_tma_atom(cpasync.CopyBulkTensorTileG2SOp(), mA,
                                                           cute.slice_(sA_layout, (None, None, 0)),
                                                           (config.tile_m, config.tile_k))
    tma_atom_b, tma_tensor_b = cpasync.make_tiled_tma_atom(cpasync.CopyBulkTensorTileG2SOp(), mB,
                                                           cute.slice_(sB_layout, (None, None, 0)),
                                                           (config.tile_n, config.tile_k))

    # One CTA per tile.
    tiles_m, tiles_n = (m + config.tile_m - 1) // config.tile_m, (n + config.tile_n - 1) // config.tile_n
    _kernel(tma_atom_a, tma_tensor_a, tma_atom_b, tma_tensor_b, mC, tiled_mma, sA_layout, sB_layout, ab, tiler).launch(
        grid=(tiles_m, tiles_n, 1), block=(WARPGROUP_THREADS * (1 + consumers), 1, 1), stream=stream)


gemm = launcher.Launcher(host, Config, vector=True, min_cc=90)
