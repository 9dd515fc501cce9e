"""Shared-memory bank conflicts, measured: warps repeat ``ldmatrix.x4`` on a 16-bit tile stored plain or swizzled,
and ``clock64`` says how many cycles each one costs the SM.

The model (`cutecourse.hw.banks.wavefronts`): one ``ldmatrix`` 8x8 matrix is one phase of 8 row addresses, 16 bytes
each, and takes as many wavefronts as the most rows that fall in one group of 4 banks; shared memory serves one
wavefront (128 bytes) per cycle. A plain tile with rows of 64 elements (128 bytes) puts the 8 rows of a matrix in the
same 4 banks: 8 wavefronts a matrix, 32 cycles for the 4 matrices of an ``ldmatrix.x4``. ``Swizzle<3,3,3>`` XORs each
16-byte chunk's index with the row (mod 8), so the 8 rows land in 8 different groups of banks: 1 wavefront a matrix,
4 cycles an ``ldmatrix.x4``. Rows of 32 elements (64 bytes) put two rows in each 128-byte line: 4 wavefronts plain,
1 with ``Swizzle<2,3,3>`` (``Swizzle<3,3,3>`` is conflict-free there too; ``Swizzle<1,3,3>`` halves the conflicts).

The kernel: one CTA per SM, 8 warps, each reading its own 16 rows of the tile with the ldmatrix partition of a
16x8x16 ``mma.sync`` A operand (what GEMM steps 4 and 5 read), every k-block of a row per loop trip. The tile is
stored twice and the trips alternate between the copies, so no load is the same from one trip to the next (the
compiler cannot hoist it); each thread adds what it loaded into registers and writes one sum at the end, so no load
is dead. Each warp times its loop with ``clock64``; a CTA's time is its slowest warp's, and, with the SM's shared
memory shared by the 8 warps, ``cycles / (ldmatrix.x4 the CTA issued)`` is what one costs the SM.

    measure("plain"), measure("swizzled")   # cycles per ldmatrix.x4 on this GPU (sm_80+)
    predicted_cycles("plain"), predicted_cycles("swizzled")   # 32 and 4, the wavefront model's
    kernel_ptx("swizzled", arch="sm_80")      # the PTX, without a GPU: 4 ldmatrix.x4 a loop trip, xor addresses
"""

from __future__ import annotations

import re
import statistics
from dataclasses import dataclass
from typing import Any

import cutlass
import cutlass.cute as cute

from cutecourse.kernels import launch, ptx

#: Row widths (16-bit elements) the kernel takes, and the swizzle that makes each conflict-free ("swizzled").
SWIZZLES = {64: (3, 3, 3), 32: (2, 3, 3)}
MATRICES = 4  # 8x8 matrices one ldmatrix.x4 reads
COPIES = 2  # copies of the tile the loop trips alternate between
#: Swizzles the kernel takes: B bits of 16-byte chunks (base 3: a chunk stays whole, as ldmatrix's rows need) XORed
#: with the row bits above a 128-byte line (shift 3).
_SWIZZLE_TEXT = re.compile(r"S<([123]),3,3>")


@dataclass(frozen=True)
class Config:
    layout: str = "swizzled"  # "plain", "swizzled" (the swizzle SWIZZLES gives the row) or a swizzle, "S<2,3,3>"
    row_elements: int = 64  # 16-bit elements a row of the tile: 64 (128 bytes) or 32 (64 bytes)
    warps: int = 8  # warps of the CTA, each reading its own 16 rows

    def __post_init__(self) -> None:
        if self.row_elements not in SWIZZLES:
            raise ValueError(f"row_elements={self.row_elements!r}: the tile's rows hold 64 (128 bytes) or 32 "
                             "(64 bytes) 16-bit elements; pass row_elements=64 or 32")
        if not isinstance(self.layout, str) or (self.layout not in ("plain", "swizzled")
                                                and not _SWIZZLE_TEXT.fullmatch(self.layout)):
            raise ValueError(f"layout={self.layout!r}: pass 'plain', 'swizzled', or a swizzle S<B,3,3> with B 1, 2 or "
                             "3, such as 'S<2,3,3>'")
        if not isinstance(self.warps, int) or not 1 <= self.warps <= 16:
            raise ValueError(f"warps={self.warps!r}: pass 1 to 16 warps (16 rows each, the tile stored twice: at most "
                             "64 KiB of shared memory), e.g. warps=8")

    @property
    def swizzle(self) -> tuple[int, int, int] | None:
        """(bits, base, shift) of the tile's swizzle, None for the plain tile."""
        if self.layout == "plain":
            return None
        if self.layout == "swizzled":
            return SWIZZLES[self.row_elements]
        return int(_SWIZZLE_TEXT.fullmatch(self.layout).group(1)), 3, 3  # type: ignore[union-attr]

    @property
    def k_blocks(self) -> int:
        """ldmatrix.x4 per warp per loop trip: one per 16 columns of the warp's 16 rows."""
        return self.row_elements // 16

    def issued(self, iterations: int) -> int:
        """ldmatrix.x4 one CTA issues in a launch of `iterations` loop trips."""
        return iterations * self.k_blocks * self.warps

    def layout_text(self) -> str:
        """The layout of 8 rows of the tile as `cutecourse.layout` writes it (the wavefront model's input)."""
        rows = f"(8,{self.row_elements}):({self.row_elements},1)"
        return rows if self.swizzle is None else "S<{},{},{}> o 0 o ".format(*self.swizzle) + rows


def predicted_cycles(layout: str = "swizzled", row_elements: int = 64) -> int:
    """Cycles one ldmatrix.x4 costs the SM by the wavefront model: 4 matrices × the wavefronts of one, one
    wavefront a cycle."""
    from cutecourse.hw.banks import LDMATRIX_8x8, wavefronts

    return MATRICES * wavefronts(Config(layout, row_elements).layout_text(), 16, LDMATRIX_8x8)


@cute.kernel
def _kernel(mRecord: cute.Tensor, mSink: cute.Tensor, tiled_mma: cute.TiledMma, tiled_copy_s2r: cute.TiledCopy,
            sA_layout: cute.ComposedLayout, iterations: cutlass.Int32):
    tidx, _, _ = cute.arch.thread_idx()
    bidx, _, _ = cute.arch.block_idx()
    warp = cute.arch.make_warp_uniform(cute.arch.warp_idx())
    threads = cute.size(tiled_mma)
    k_blocks = cute.size(sA_layout, mode=[1]) // 16

    # The tile, (rows, row_elements, COPIES), filled with 1/64 (exact in fp16) so the sums are defined.
    smem = cutlass.memory.SmemAllocator()
    # The swizzle stays part of the layout, in element units. (Passed apart, as the 4th argument, it would act on
    # the byte address, as the DSL's Hopper atoms' S<3,4,3> does: S<3,3,3> there splits the 16-byte rows.)
    sA = smem.allocate_tensor(cutlass.Float16, sA_layout, 1024)
    for i in range(tidx, cute.size(sA), threads):
        sA[i] = cutlass.Float16(1.0 / 64)
    cute.arch.sync_threads()

    # Each warp's ldmatrix.x4 partition of its 16 rows: (CPY, 1, k_blocks, COPIES), loaded into MMA A fragments.
    thr_mma = tiled_mma.get_slice(tidx)
    tCrA = tiled_mma.make_fragment_A(thr_mma.partition_A(sA)[None, None, None, 0])  # (MMA, 1, k_blocks)
    thr_copy = tiled_copy_s2r.get_slice(tidx)
    tCsA, tCrA_copy_view = thr_copy.partition_S(sA), thr_copy.retile(tCrA)
    sums = cute.make_fragment_like(tCrA[None, None, 0])
    sums.fill(0.0)

    start = cute.arch.clock64()
    for trip in cutlass.range(iterations, unroll=1):
        copy = trip % COPIES
        for kb in cutlass.range_constexpr(k_blocks):
            cute.copy(tiled_copy_s2r, tCsA[None, None, kb, copy], tCrA_copy_view[None, None, kb])
        for kb in cutlass.range_constexpr(k_blocks):
            sums.store(sums.load() + tCrA[None, None, kb].load())
    stop = cute.arch.clock64()

    if cute.arch.lane_idx() == 0:
        mRecord[bidx, warp + 1] = stop - start
        if warp == 0:
            mRecord[bidx, 0] = cutlass.Int64(cute.arch.smid())
    total = cutlass.Float32(0.0)
    for i in cutlass.range_constexpr(cute.size(sums)):
        total += sums[i].to(cutlass.Float32)
    mSink[bidx, tidx] = total


@cute.jit
def host(mRecord: cute.Tensor, mSink: cute.Tensor, iterations: cutlass.Int32, stream: Any,
         config: cutlass.Constexpr):
    # Only the MMA's A partition is used: warps stacked along M, 16 rows each; ldmatrix.x4 reads 16 rows x 16 columns.
    tiled_mma = cute.make_tiled_mma(cute.nvgpu.warp.MmaF16BF16Op(cutlass.Float16, cutlass.Float32, (16, 8, 16)),
                                    cute.make_layout((config.warps, 1, 1)))
    tiled_copy_s2r = cute.make_tiled_copy_A(
        cute.make_copy_atom(cute.nvgpu.warp.LdMatrix8x8x16bOp(False, MATRICES), cutlass.Float16), tiled_mma)
    rows = 16 * config.warps
    plain = cute.make_ordered_layout((rows, config.row_elements, COPIES), order=(1, 0, 2))
    swizzle = (0, 0, 0) if config.swizzle is None else config.swizzle  # Swizzle<0,...> is the identity
    sA_layout = cute.make_composed_layout(cute.make_swizzle(*swizzle), 0, plain)
    _kernel(mRecord, mSink, tiled_mma, tiled_copy_s2r, sA_layout, iterations).launch(
        grid=(mRecord.shape[0], 1, 1), block=(cute.arch.WARP_SIZE * config.warps, 1, 1), stream=stream)


def _arguments(config: Config, record: Any, sink: Any) -> list[Any]:
    return [launch.cute_tensor(record), launch.cute_tensor(sink)]


def compile(config: Config, record: Any, sink: Any, stream: Any, options: str = "") -> Any:
    """``cute.compile`` the kernel for `config`; `record` (CTAs, warps + 1) int64 and `sink` (CTAs, threads)
    float32 may be CPU tensors (compiling without a GPU)."""
    return cute.compile(host, *_arguments(config, record, sink), cutlass.Int32(1), stream, config, options=options)


_launcher = launch.Launcher(compile, _arguments)


def buffers(config: Config, ctas: int, device: Any = "cuda") -> tuple[Any, Any]:
    """The kernel's outputs for `ctas` CTAs: (record, sink), each CTA's SM and its warps' cycles, and each thread's
    sum."""
    import torch

    return (torch.zeros(ctas, config.warps + 1, dtype=torch.int64, device=device),
            torch.zeros(ctas, 32 * config.warps, dtype=torch.float32, device=device))


def measure(layout: str = "swizzled", row_elements: int = 64, iterations: int = 4096, warps: int = 8) -> float:
    """Cycles one ldmatrix.x4 costs an SM when `warps` warps repeat it on the tile `layout` (module docstring):
    the median over the CTAs that had an SM to themselves. One launch, one CTA per SM."""
    import torch

    if not isinstance(iterations, int) or not 1 <= iterations <= 2**24:
        raise ValueError(f"iterations={iterations!r}: pass a loop count from 1 to 2**24, e.g. iterations=4096")
    config = Config(layout, row_elements, warps)
    ctas = torch.cuda.get_device_properties(torch.cuda.current_device()).multi_processor_count
    record, sink = buffers(config, ctas)
    _launcher(config, record, sink, scalars=(iterations,))
    torch.cuda.synchronize()
    return cycles_per_ldmatrix(record.cpu().tolist(), config, iterations)


def cycles_per_ldmatrix(record: list[list[int]], config: Config, iterations: int) -> float:
    """From the kernel's record (per CTA: its SM, then each warp's cycles), the median over the CTAs alone on
    their SM of (the slowest warp's cycles) / (ldmatrix.x4 the CTA issued)."""
    sms = [row[0] for row in record]
    alone = [row for row in record if sms.count(row[0]) == 1]
    if not alone:
        raise RuntimeError(f"every SM ran more than one of the {len(record)} CTAs, so none timed shared memory "
                           "alone; run with nothing else on the GPU")
    return statistics.median(max(row[1:]) / config.issued(iterations) for row in alone)


def kernel_ptx(layout: str = "swizzled", row_elements: int = 64, arch: str = "sm_80", warps: int = 8) -> str:
    """The kernel's PTX for `arch`, compiled without a GPU: ``ptx.count(kernel_ptx(), "ldmatrix")`` is the
    ldmatrix.x4 of one loop trip (``row_elements // 16``); the swizzled tile's addresses come from ``xor``."""
    from cutlass.cute.runtime import make_fake_stream

    config = Config(layout, row_elements, warps)
    record, sink = buffers(config, 1, device="cpu")
    return ptx.ptx_of(lambda options: compile(config, record, sink, make_fake_stream(), options), arch)
