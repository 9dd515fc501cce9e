"""GEMM, step 6: Hopper's TMA, mbarriers and wgmma. TMA loads whole tiles into swizzled shared memory, mbarriers
order the hand-offs, and one warpgroup multiplies with wgmma straight from shared memory.

Step 5's threads computed addresses and issued a 16-byte ``cp.async`` each for every tile, then ``ldmatrix``-ed
fragments into registers for ``mma.sync``. On Hopper both chores leave the threads:

* TMA (the Tensor Memory Accelerator) copies a whole 128 × 64 tile of A or B from global to shared memory with one
  instruction, ``cp.async.bulk.tensor`` (two for an MN-major tile), issued by one elected thread. A descriptor
  built on the host holds the matrix's shape and strides, so TMA clips the box at the matrix edges and fills what
  lies outside with zeros: the M, N and K tails cost the kernel nothing. It writes the tile in the 128-byte
  swizzled layout that wgmma reads without bank conflicts.
* wgmma (``wgmma.mma_async``) is issued by a warpgroup, 4 warps, and reads A and B straight from shared memory
  through 64-bit descriptors: no ``ldmatrix``, no operand registers. Hopper's Tensor Cores reach their full rate
  only through wgmma; ``mma.sync`` leaves them well short of it. It is asynchronous: ``commit_group`` closes a
  batch and ``wait_group(1)`` waits for all but the newest batch, so one k-tile's wgmmas run while the warps wait
  for the next k-tile.

Each CTA, one warpgroup of 128 threads, owns a 128 × 128 tile of C (128 fp32 accumulators per thread) and walks K
in 64-wide k-tiles through a ring of ``stages`` shared-memory slots. Two mbarriers per slot order the hand-offs,
written out by hand: ``full[s]`` completes when TMA has written all the bytes of slot s (the elected thread arms it
with the byte count first), ``empty[s]`` when each of the 4 warps has finished the wgmmas that read slot s. A
barrier completes one phase per use of its slot, so waiting for k-tile kt means waiting for phase parity
``(kt // stages) % 2``. While the warpgroup multiplies k-tile kt, the loads of the next ``stages - 1`` k-tiles are in
flight; warp 0 issues them between its wgmma batches. The epilogue is step 4's, from registers, one element at a
time (see ``device.store_inside``).

A and B may each be K-major or MN-major: the shared-memory layouts (and the swizzle TMA writes) follow the major,
and wgmma reads 16-bit operands either way. Needs sm_90a, and rows 16-byte aligned (TMA's rule).

Config: tile_m 64 or 128 (each wgmma covers 64 rows), tile_n a multiple of 64 up to 256, at most 128 accumulators a
thread; at least 2 stages (one slot would deadlock), and they fit the sm_90 shared memory.

    gemm(a, b, c)   # c = a @ b; a (M, K), b (K, N) float16/bfloat16; c (M, N) float32/float16/bfloat16
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import cutlass
import cutlass.cute as cute
import cutlass.utils.hopper_helpers as sm90
from cutlass.cute.nvgpu import cpasync, warpgroup
from cutlass.memory import SmemAllocator
from cutlass.tensor_utils import LayoutEnum

from cutecourse import hw
from cutecourse.kernels.gemm import device, launcher

SMEM_BYTES = hw.ARCH_LIMITS["sm_90"].smem_per_block_max  # shared memory one H100/H200 CTA may use
WARPGROUP_THREADS, WARPGROUP_WARPS = cute.arch.THREADS_PER_WARPGROUP, cute.arch.WARPS_PER_WARPGROUP


@dataclass(frozen=True)
class Config:
    tile_m: int = 128  # CTA tile M: 64 or 128 (each wgmma covers 64 rows)
    tile_n: int = 128  # CTA tile N: a multiple of 64 (128 × 256 would need 256 accumulators a thread)
    tile_k: int = 64  # k-tile: one 128-byte swizzled row of 16-bit elements
    stages: int = 4  # shared-memory slots in the ring: 4 × 32 KiB, so one CTA per SM

    def __post_init__(self) -> None:
        if self.tile_m not in (64, 128) or self.tile_n % 64 or self.tile_n > 256:
            raise ValueError(f"{self}: tile_m must be 64 or 128, tile_n a multiple of 64 up to 256")
        if self.tile_m * self.tile_n > 128 * 128:
            raise ValueError(f"{self}: more than 128 accumulators a thread; make the tile smaller")
        # One slot deadlocks: k-tile 1 would wait on the slot's full barrier before its load is issued.
        if self.stages < 2 or self.stages * (self.tile_m + self.tile_n) * self.tile_k * 2 > SMEM_BYTES - 1024:
            raise ValueError(f"{self}: stages must be at least 2, and that many stages of 16-bit A and B tiles fit "
                             f"the {SMEM_BYTES} bytes of shared memory a CTA may use")


@cute.jit
def _load(tma_atom_a: cute.CopyAtom, tAgA: cute.Tensor, tAsA: cute.Tensor, tma_atom_b: cute.CopyAtom,
          tBgB: cute.Tensor, tBsB: cute.Tensor, full: cute.Pointer, tm: cutlass.Int32, tn: cutlass.Int32,
          kt: cutlass.Int32, s: cutlass.Int32, stage_bytes: cutlass.Constexpr[int]):
    """Warp 0: arm full[s] with the bytes of k-tile kt, then start its two TMA copies into slot s."""
    with cute.arch.elect_one():
        cute.arch.mbarrier_arrive_and_expect_tx(full + s, stage_bytes)
    cute.copy(tma_atom_a, tAgA[(None, tm, kt)], tAsA[(None, s)], tma_bar_ptr=full + s)
    cute.copy(tma_atom_b, tBgB[(None, tn, kt)], tBsB[(None, s)], tma_bar_ptr=full + s)


@cute.kernel
def _kernel(tma_atom_a: cute.CopyAtom, mA: cute.Tensor, tma_atom_b: cute.CopyAtom, mB: cute.Tensor, mC: cute.Tensor,
            tiled_mma: cute.TiledMma, sA_layout: cute.ComposedLayout, sB_layout: cute.ComposedLayout,
            ab: cutlass.Constexpr, tiler: cutlass.Constexpr):
    tile_m, tile_n, tile_k = tiler
    stages = cute.size(sA_layout, mode=[2])
    tidx, _, _ = cute.arch.thread_idx()
    warp_idx = cute.arch.make_warp_uniform(cute.arch.warp_idx())

    # Shared memory: the A and B rings (1024-byte aligned, as the 128-byte swizzle needs) and 2 mbarriers per slot.
    smem = SmemAllocator()
    sA = smem.allocate_tensor(ab, sA_layout.outer, 1024, sA_layout.inner)
    sB = smem.allocate_tensor(ab, sB_layout.outer, 1024, sB_layout.inner)
    full = smem.allocate_array(cutlass.Int64, stages)
    empty = smem.allocate_array(cutlass.Int64, stages)
    if warp_idx == 0:
        with cute.arch.elect_one():
            for s in cutlass.range_constexpr(stages):
                cute.arch.mbarrier_init(full + s, 1)  # the elected thread's arrive (+ TMA's bytes)
                cute.arch.mbarrier_init(empty + s, WARPGROUP_WARPS)  # one arrive per warp
    cute.arch.mbarrier_init_fence()
    cute.arch.barrier()
    stage_bytes = cute.size_in_bytes(ab, cute.slice_(sA_layout, (None, None, 0))) + cute.size_in_bytes(
        ab, cute.slice_(sB_layout, (None, None, 0)))

    # Tiles of the TMA coordinate tensors, e.g. gA is (tile_m, tile_k, tiles_m, k_tiles), and of C (mC is C itself);
    # this CTA computes tile (tm, tn). tma_partition makes each (tile_m, tile_k) tile one TMA copy, and each slot of
    # the ring its destination.
    gA = cute.local_tile(mA, (tile_m, tile_k), (None, None))
    gB = cute.local_tile(mB, (tile_n, tile_k), (None, None))
    gC = cute.local_tile(mC, (tile_m, tile_n), (None, None))
    tAsA, tAgA = cpasync.tma_partition(tma_atom_a, 0, cute.make_layout(1), cute.group_modes(sA, 0, 2),
                                       cute.group_modes(gA, 0, 2))
    tBsB, tBgB = cpasync.tma_partition(tma_atom_b, 0, cute.make_layout(1), cute.group_modes(sB, 0, 2),
                                       cute.group_modes(gB, 0, 2))
    k_tiles = cute.size(gA, mode=[3])
    tm, tn, _ = cute.arch.block_idx()

    # wgmma operands are shared-memory descriptors, one per (k-block of 16, slot); the accumulators are registers.
    thr_mma = tiled_mma.get_slice(tidx)
    tCrA = tiled_mma.make_fragment_A(thr_mma.partition_A(sA))  # (MMA, MMA_M, MMA_K, stages)
    tCrB = tiled_mma.make_fragment_B(thr_mma.partition_B(sB))  # (MMA, MMA_N, MMA_K, stages)
    acc = cute.make_rmem_tensor(thr_mma.partition_shape_C((tile_m, tile_n)), cutlass.Float32)
    k_blocks = cute.size(tCrA, mode=[2])
    acc.fill(0.0)
    tiled_mma.set(warpgroup.Field.ACCUMULATE, True)

    # Mainloop, prologue: warp 0 starts the loads of the first k-tiles, one per slot (every slot starts empty).
    if warp_idx == 0:
        for kt in cutlass.range(cutlass.min(stages, k_tiles), unroll=1):
            _load(tma_atom_a, tAgA, tAsA, tma_atom_b, tBgB, tBsB, full, tm, tn, kt, kt, stage_bytes)

    # Mainloop: k-tile kt is in slot kt % stages; warp 0 refills the slot of k-tile kt - 1 once every warp is past it.
    for kt in cutlass.range(k_tiles, unroll=1):
        s = kt % stages
        cute.arch.mbarrier_wait(full + s, (kt // stages) % 2)  # k-tile kt has landed in slot s
        warpgroup.fence()
        for kb in cutlass.range_constexpr(k_blocks):
            cute.gemm(tiled_mma, acc, tCrA[(None, None, kb, s)], tCrB[(None, None, kb, s)], acc)
        warpgroup.commit_group()
        warpgroup.wait_group(1)  # k-tile kt's wgmmas may still run; kt - 1's are done, so its slot is free
        if kt > 0:
            done = (kt - 1) % stages
            with cute.arch.elect_one():
                cute.arch.mbarrier_arrive(empty + done)
            nxt = kt - 1 + stages
            if warp_idx == 0 and nxt < k_tiles:
                cute.arch.mbarrier_wait(empty + done, ((kt - 1) // stages) % 2)  # all 4 warps released the slot
                _load(tma_atom_a, tAgA, tAsA, tma_atom_b, tBgB, tBsB, full, tm, tn, nxt, done, stage_bytes)
    warpgroup.wait_group(0)

    # Epilogue: round to C's dtype and store the elements inside C, straight from the accumulator registers.
    cC = cute.local_tile(cute.make_identity_tensor(mC.shape), (tile_m, tile_n), (tm, tn))
    device.store_inside(acc, thr_mma.partition_C(gC[(None, None, tm, tn)]), thr_mma.partition_C(cC), mC.shape)


@cute.jit
def host(pA: cute.Pointer, pB: cute.Pointer, pC: cute.Pointer, m: cutlass.Int32, n: cutlass.Int32,
         k: cutlass.Int32, lda: cutlass.Int32, ldb: cutlass.Int32, ldc: cutlass.Int32, stream: Any,
         ops: cutlass.Constexpr, config: cutlass.Constexpr):
    mA, mB, mC = device.tensors(ops, pA, pB, pC, m, n, k, lda, ldb, ldc)
    ab = device.dtype(ops.ab)
    tiler = (config.tile_m, config.tile_n, config.tile_k)
    a_layout, b_layout = LayoutEnum.from_tensor(mA), LayoutEnum.from_tensor(mB)
    # One warpgroup; each wgmma is 64 × tile_n × 16, repeated tile_m / 64 times down M and tile_k / 16 along K.
    tiled_mma = sm90.make_trivial_tiled_mma(ab, ab, a_layout.sm90_mma_major_mode(), b_layout.sm90_mma_major_mode(),
                                            cutlass.Float32, (1, 1, 1), tiler_mn=(64, config.tile_n))

    # Swizzled smem rings: the swizzle (128B when the contiguous extent allows) and the order follow each major.
    sA_layout = sm90.make_smem_layout_a(a_layout, tiler, ab, config.stages)
    sB_layout = sm90.make_smem_layout_b(b_layout, tiler, ab, config.stages)

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
        grid=(tiles_m, tiles_n, 1), block=(WARPGROUP_THREADS, 1, 1), stream=stream)


gemm = launcher.Launcher(host, Config, vector=True, min_cc=90)
