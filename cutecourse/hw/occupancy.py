"""An occupancy calculator: how many blocks of a kernel fit on one SM at once, and which resource runs out first.

Four limits, each a number of blocks per SM; the smallest wins:

- ``threads``:   max resident threads per SM ÷ the block's threads (rounded up to whole warps);
- ``blocks``:    the hardware's cap on resident blocks per SM;
- ``registers``: the 64 K-register file ÷ the block's registers, allocated per warp in units of 256 registers;
- ``smem``:      shared memory per SM ÷ (the block's smem + the runtime's per-block reservation), in 128-byte units.

Simplifications (the CUDA occupancy calculator is finer):
- registers are pooled over the whole SM; the hardware splits them over 4 sub-partitions (schedulers), which can
  cost a block at some odd warp counts;
- the smem carve-out is assumed to be the largest the arch allows (the driver may pick a smaller one);
- no limit on registers per block (64 K) beyond the SM's own, and no cluster or TMEM limits.

>>> occupancy(256, 128, 48 * 1024, "sm_80").blocks_per_sm
2
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass


@dataclass(frozen=True)
class ArchLimits:
    """Per-SM limits of one architecture (CUDA C++ Programming Guide, "Compute Capabilities" table).

    Sizes in bytes; ``reg_alloc_unit`` is registers per warp allocation unit; ``smem_reserved_per_block`` is what the
    CUDA runtime keeps per block (1 KiB since sm_80)."""

    max_threads_per_sm: int
    max_blocks_per_sm: int
    regs_per_sm: int
    reg_alloc_unit: int
    max_regs_per_thread: int
    smem_per_sm: int
    smem_per_block_max: int
    smem_reserved_per_block: int
    smem_alloc_unit: int
    max_threads_per_block: int = 1024

    def as_dict(self) -> dict[str, int]:
        """The limits as a plain dict (what the lesson's exercises receive)."""
        return asdict(self)


KIB = 1024
ARCH_LIMITS: dict[str, ArchLimits] = {
    "sm_70": ArchLimits(2048, 32, 65536, 256, 255, 96 * KIB, 96 * KIB, 0, 256),
    "sm_75": ArchLimits(1024, 16, 65536, 256, 255, 64 * KIB, 64 * KIB, 0, 256),
    "sm_80": ArchLimits(2048, 32, 65536, 256, 255, 164 * KIB, 163 * KIB, KIB, 128),
    "sm_86": ArchLimits(1536, 16, 65536, 256, 255, 100 * KIB, 99 * KIB, KIB, 128),
    "sm_89": ArchLimits(1536, 24, 65536, 256, 255, 100 * KIB, 99 * KIB, KIB, 128),
    "sm_90": ArchLimits(2048, 32, 65536, 256, 255, 228 * KIB, 227 * KIB, KIB, 128),
    "sm_100": ArchLimits(2048, 32, 65536, 256, 255, 228 * KIB, 227 * KIB, KIB, 128),
    "sm_120": ArchLimits(1536, 32, 65536, 256, 255, 100 * KIB, 99 * KIB, KIB, 128),  # RTX 50, RTX PRO Blackwell
}


@dataclass(frozen=True)
class Occupancy:
    """The calculator's answer: blocks per SM under each limit, the result, and what it means in warps."""

    blocks_per_sm: int
    limits: dict[str, int]  # blocks per SM allowed by each resource alone
    binding: tuple[str, ...]  # the limits that equal blocks_per_sm
    warps_per_block: int
    active_warps: int
    occupancy: float  # active warps ÷ max warps per SM

    def __str__(self) -> str:
        per = ", ".join(f"{k} {v}" for k, v in self.limits.items())
        return (f"{self.blocks_per_sm} blocks/SM ({per}); bound by {' & '.join(self.binding)}; "
                f"{self.active_warps} warps = {self.occupancy:.0%} occupancy")


def _limits_of(arch: str | ArchLimits) -> ArchLimits:
    if isinstance(arch, ArchLimits):
        return arch
    if arch not in ARCH_LIMITS:
        raise ValueError(f"arch={arch!r} is not known; use one of {', '.join(ARCH_LIMITS)} or pass an ArchLimits")
    return ARCH_LIMITS[arch]


def occupancy(threads_per_block: int, regs_per_thread: int, smem_per_block: int,
              arch: str | ArchLimits = "sm_90") -> Occupancy:
    """Blocks of a kernel resident on one SM: the minimum over the thread, block, register and smem limits.

    `smem_per_block` is the kernel's shared memory in bytes (static + dynamic); `regs_per_thread` what ptxas reports.

    >>> occupancy(128, 255, 0, "sm_90").limits["registers"]
    2
    >>> occupancy(256, 64, 100 * 1024, "sm_90").binding
    ('smem',)
    """
    lim = _limits_of(arch)
    for name, value, low, high, fix in (
            ("threads_per_block", threads_per_block, 1, lim.max_threads_per_block, "use 32..1024 threads"),
            ("regs_per_thread", regs_per_thread, 1, lim.max_regs_per_thread,
             f"ptxas caps a thread at {lim.max_regs_per_thread}; spill or use fewer"),
            ("smem_per_block", smem_per_block, 0, lim.smem_per_block_max,
             f"a block may use at most {lim.smem_per_block_max} bytes on this arch; use a smaller tile or fewer "
             f"pipeline stages")):
        if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
            raise ValueError(f"{name}={value!r} is outside {low}..{high}: {fix}")
    warps = math.ceil(threads_per_block / 32)
    # Registers are handed out per warp, rounded up to the allocation unit (256 = 8 per thread).
    regs_per_warp = math.ceil(regs_per_thread * 32 / lim.reg_alloc_unit) * lim.reg_alloc_unit
    # Every block also pays the runtime's reservation, and smem is handed out in allocation units.
    smem = math.ceil((smem_per_block + lim.smem_reserved_per_block) / lim.smem_alloc_unit) * lim.smem_alloc_unit
    limits = {
        "threads": lim.max_threads_per_sm // (warps * 32),
        "blocks": lim.max_blocks_per_sm,
        "registers": (lim.regs_per_sm // regs_per_warp) // warps,
        "smem": lim.smem_per_sm // smem if smem else lim.max_blocks_per_sm,
    }
    blocks = min(limits.values())
    binding = tuple(k for k, v in limits.items() if v == blocks)
    max_warps = lim.max_threads_per_sm // 32
    return Occupancy(blocks, limits, binding, warps, blocks * warps, blocks * warps / max_warps)
