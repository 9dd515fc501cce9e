"""Shared memory per CTA: what each GEMM step's Config allocates (`smem_bytes`), and the check of it against the
target arch's limit in `cutecourse.hw.ARCH_LIMITS` (`check`), which the launchers and `cutecourse.gemm` run before a
kernel is compiled or chosen.

A CTA that asks for more shared memory than its GPU allows does not launch. The limits differ: 163 KiB on an A100
(sm_80), 227 KiB on an H100/H200 (sm_90), but 99 KiB on the RTX 30/40/50 and L4/L40 GPUs (sm_86, sm_89, sm_120).
Step 5's default Config (256 × 128 × 64, 3 stages: 144 KiB) is the fastest on an H200 but cannot launch on those;
`fitting` gives each arch the first Config of a step's list that fits.

The byte counts follow each step's own allocations (`SmemAllocator` in its kernel): the A and B stage rings of
(tile_m + tile_n) × tile_k operand elements; step 2 stages fp32; step 5 reuses its ring for C's tile, and steps 6-8
do too, with two 8-byte mbarriers a stage after it; the persistent steps (9-11) reserve 1 KiB for their mbarriers and
the 1024-byte alignment of the swizzled rings, size "stages=0" to fill the sm_90 limit, and add what their epilogue
stages C through: C's whole tile (step 9, whose ring is loading the next tile meanwhile) or the epilogue rings of
tile_m × epi_n subtiles (steps 10 and 11). Step 11 with split-K (``splits > 1``) stages float32 partial sums
whatever C's dtype (the reduction kernel, `splitk`, uses no shared memory).

    >>> from cutecourse.kernels.gemm import gemm05_swizzle
    >>> smem_bytes("gemm05_swizzle", gemm05_swizzle.Config(), "bfloat16", "float32")  # 3 × 384 × 64 × 2
    147456
"""

from __future__ import annotations

from typing import Any

from cutecourse import hw

_BYTES = {"float32": 4, "float16": 2, "bfloat16": 2, "float8_e4m3fn": 1, "float8_e5m2": 1}
#: The persistent steps' reservation next to their stage rings: mbarriers and the rings' 1024-byte alignment.
RESERVED = 1024
HOPPER_SMEM = hw.ARCH_LIMITS["sm_90"].smem_per_block_max  # what their hosts fill with "stages=0"


def arch_limits(cc: int) -> tuple[str, hw.ArchLimits]:
    """The `hw.ARCH_LIMITS` entry of compute capability `cc` (86 -> "sm_86"); one not listed takes the nearest older
    entry of its major (sm_87 -> sm_86, sm_103 -> sm_100, sm_121 -> sm_120), whose limits it shares or exceeds.

    >>> arch_limits(121)[0], arch_limits(89)[1].smem_per_block_max // 1024
    ('sm_120', 99)
    """
    known = sorted((int(name[3:]), name) for name in hw.ARCH_LIMITS)
    older = [name for number, name in known if number // 10 == cc // 10 and number <= cc]
    if not older:
        raise ValueError(f"sm_{cc} has no entry in cutecourse.hw.ARCH_LIMITS ({', '.join(hw.ARCH_LIMITS)}): add its "
                         "limits there (CUDA C++ Programming Guide, 'Compute Capabilities')")
    return older[-1], hw.ARCH_LIMITS[older[-1]]


def _ring(config: Any, ab: int) -> int:
    """One stage of A and B tiles, in bytes."""
    return (config.tile_m + config.tile_n) * config.tile_k * ab


def _hopper(config: Any, ab: int, epilogue: int) -> int:
    stage = _ring(config, ab)
    stages = config.stages or (HOPPER_SMEM - RESERVED - epilogue) // stage
    return RESERVED + epilogue + stages * stage


def smem_bytes(step: str, config: Any, ab: str, c: str) -> int:
    """Bytes of shared memory one CTA of `step` (a module name) with `config` allocates, for operands of dtype `ab`
    and C of dtype `c` (names, as `operands.Operands` holds them)."""
    a_bytes = _BYTES[ab]
    c_bytes = _BYTES[c]
    if step in ("gemm01_naive", "gemv"):
        return 0
    if step == "gemm02_smem":
        return (config.tile_m + config.tile_n) * config.tile_k * 4  # staged as fp32
    if step == "gemm03_mma":
        return _ring(config, a_bytes)
    if step == "gemm04_multistage":
        return config.stages * _ring(config, a_bytes)
    if step == "gemm05_swizzle":
        return max(config.stages * _ring(config, a_bytes), config.tile_m * config.tile_n * c_bytes)
    if step in ("gemm06_tma", "gemm07_wgmma", "gemm08_warpspecialized"):  # step 5's buffer and 2 mbarriers a stage
        return max(config.stages * _ring(config, a_bytes), config.tile_m * config.tile_n * c_bytes) + 16 * config.stages
    if step == "gemm09_persistent":  # C's tile beside the ring
        return _hopper(config, a_bytes, config.tile_m * config.tile_n * c_bytes)
    if step in ("gemm10_multicast", "gemm11_pingpong"):
        consumers = 2 if step == "gemm11_pingpong" else 1  # step 11: an epilogue ring per consumer warpgroup
        if step == "gemm11_pingpong" and config.partial:  # split-/stream-K: float32 partial sums, a workspace
            c_bytes = _BYTES["float32"]
        return _hopper(config, a_bytes, config.tile_m * config.epi_n * c_bytes * config.epi_stages * consumers)
    raise ValueError(f"step={step!r}: not a GEMM step; the steps are in cutecourse.kernels.gemm.GEMM_STEPS")


def fits(step: str, config: Any, ab: str, c: str, cc: int) -> bool:
    """Whether `config` of `step` fits the shared memory of one CTA on an sm_`cc` GPU."""
    return smem_bytes(step, config, ab, c) <= arch_limits(cc)[1].smem_per_block_max


def check(step: str, config: Any, ab: str, c: str, cc: int) -> None:
    """A ValueError naming the Config, its bytes, the arch's limit and the way out where `config` does not fit."""
    need = smem_bytes(step, config, ab, c)
    arch, limits = arch_limits(cc)
    if need > limits.smem_per_block_max:
        raise ValueError(f"{step}.{config} needs {need} bytes of shared memory per CTA ({need / 1024:.0f} KiB); "
                         f"{arch} allows {limits.smem_per_block_max} ({limits.smem_per_block_max // 1024} KiB): "
                         "lower stages, tile_k or the tile, or pass config=None and let cutecourse.gemm choose one "
                         "that fits")


def fitting(step: str, configs: tuple[Any, ...], ab: str, c: str, cc: int) -> Any:
    """The first of `configs` (fastest first) that fits an sm_`cc` CTA; a ValueError if none does."""
    for config in configs:
        if fits(step, config, ab, c, cc):
            return config
    raise ValueError(f"no Config of {step} in its list fits sm_{cc}: the smallest needs "
                     f"{smem_bytes(step, configs[-1], ab, c)} bytes of shared memory per CTA, the arch allows "
                     f"{arch_limits(cc)[1].smem_per_block_max}; use torch.matmul")
