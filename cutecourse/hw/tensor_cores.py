"""Tensor Core generations, Volta → Blackwell: the instruction, its shapes, where operands live, how data arrives.

A shape ``mMnNkK`` multiplies an M×K tile of A by a K×N tile of B into an M×N accumulator, for one warp (mma.sync),
one warpgroup of 4 warps (wgmma), or one CTA or CTA pair issued by a single thread (tcgen05).

>>> GENERATIONS[-1].name
'Blackwell'
>>> [g.sm for g in GENERATIONS]
['sm_70', 'sm_75', 'sm_80', 'sm_90a', 'sm_100a']
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class TensorCoreGen:
    """One Tensor Core generation. `issued_by` is who executes the MMA instruction; `operands` says where A, B and
    the accumulator live; `async_copy` names the engine that fills shared memory without going through registers."""

    name: str
    sm: str
    year: int
    gpus: str
    instruction: str
    shapes: tuple[str, ...]  # 16-bit input shapes first; others after
    issued_by: str
    operands: str
    async_copy: str
    added: str
    per_sm: int = 4  # Tensor Cores per SM: one per sub-partition (scheduler), two on Volta and Turing

    @property
    def per_subpartition(self) -> int:
        """Tensor Cores per SM sub-partition (an SM has 4, each with its warp scheduler and quarter register file)."""
        return self.per_sm // 4


GENERATIONS: tuple[TensorCoreGen, ...] = (
    TensorCoreGen("Volta", "sm_70", 2017, "V100", "mma.sync", ("m8n8k4",), "warp (as 4 quad-pairs)",
                  "A, B, C/D in registers", "none (ld.global → registers → st.shared)",
                  "first Tensor Cores: FP16 × FP16 with FP16 or FP32 accumulate; WMMA API (16×16×16 fragments)",
                  per_sm=8),
    TensorCoreGen("Turing", "sm_75", 2018, "T4, RTX 20", "mma.sync", ("m16n8k8", "m8n8k16 (int8)", "m8n8k32 (int4)"),
                  "warp", "A, B, C/D in registers", "none; ldmatrix loads smem → mma fragments",
                  "INT8/INT4 Tensor Cores; the m16n8 warp-wide shape; ldmatrix", per_sm=8),
    TensorCoreGen("Ampere", "sm_80", 2020, "A100 (Ada sm_89: L4, RTX 4090)", "mma.sync",
                  ("m16n8k16", "m16n8k8 (tf32)", "m16n8k32 (int8; fp8 on Ada)"), "warp",
                  "A, B, C/D in registers", "cp.async (gmem → smem, 4/8/16 B per thread, bypasses registers)",
                  "BF16, TF32, FP64 Tensor Cores, 2:4 sparsity (mma.sp); cp.async multistage pipelines; "
                  "Ada adds FP8"),
    TensorCoreGen("Hopper", "sm_90a", 2022, "H100, H200", "wgmma.mma_async",
                  ("m64nNk16 (N = 8..256, step 8)", "m64nNk8 (tf32)", "m64nNk32 (fp8)"), "warpgroup (4 warps)",
                  "A in registers or smem, B in smem (matrix descriptors), C/D in registers",
                  "TMA (cp.async.bulk.tensor: a whole tile per instruction, completion on an mbarrier)",
                  "asynchronous warpgroup MMA; FP8; TMA; thread-block clusters and distributed smem"),
    TensorCoreGen("Blackwell", "sm_100a", 2024, "B200", "tcgen05.mma",
                  ("M = 64/128 per CTA, 256 per CTA pair; N = 8..256; K = 16 (16-bit)",),
                  "one thread: of the CTA, or of the leader CTA for a CTA pair (cta_group::2)",
                  "A in TMEM or smem, B in smem, D in Tensor Memory (TMEM, 256 KiB per SM)",
                  "TMA (with multicast); tcgen05.cp/ld/st move data to and from TMEM",
                  "Tensor Memory; 2-CTA MMA; FP4/FP6 and block-scaled (MX) formats"),
)


def generation_table() -> str:
    """The generations as text, one block per generation.

    >>> print(generation_table().splitlines()[0])
    Volta (sm_70, 2017; V100): mma.sync m8n8k4
    """
    lines = []
    for g in GENERATIONS:
        lines.append(f"{g.name} ({g.sm}, {g.year}; {g.gpus}): {g.instruction} {', '.join(g.shapes)}")
        lines.append(f"    {g.per_sm} Tensor Cores per SM ({g.per_subpartition} per sub-partition); "
                     f"issued by {g.issued_by}")
        lines.append(f"    operands: {g.operands}")
        lines.append(f"    async copy: {g.async_copy}")
        lines.append(f"    added: {g.added}")
    return "\n".join(lines)
