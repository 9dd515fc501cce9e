"""Checks of lesson 5's two Tensor Core mainloops: 5.5 (m16n8k8 atoms, an M-major A through ldmatrix.trans, three
k-blocks per K tile) and 5.6 (a batched GEMM whose B is N-major). Their PTX on any machine with the DSL; real GEMMs
on a GPU.

Besides the instruction census, the PTX check follows each ``mma.sync`` back to the ``ldmatrix`` that wrote its A
and B registers (through ``mov``), and each ``ldmatrix`` to its shared-memory address (a register plus a constant,
through ``add`` of an immediate): in an unswizzled tile the constant tells which k-block the instruction loaded. So an
MMA that multiplies A's k-block 0 by B's k-block 2, or a mainloop that skips a k-block, fails on a CPU, before any
GPU runs it. The GEMM judge is lesson 5's (:func:`l05_tiled_mma.gemm_hint`: float64 products of the inputs as the
learner's process held them); the hidden tests (tests/hidden/test_05_tiled_mma.py) use the same hints.
"""

from __future__ import annotations

import collections
import re
from dataclasses import dataclass
from typing import Any, Callable

from cutecourse.grading.checks import Check
from cutecourse.grading.checks.l05_tiled_mma import (GEMM_PTX_CASES, VECTOR, common_ptx_hint, gemm_cases,
                                                     gemm_ptx_case, judge_gemm, ptx_text)
from cutecourse.kernels import ptx

# --------------------------------------------------------------------------- which k-block each mma.sync reads


def _moved(statement: ptx.Statement) -> list[str]:
    """The register a plain move copies (``mov`` of one register into one), else none."""
    ops = statement.operands
    plain = statement.opcode.startswith("mov.") and len(ops) == 2 and "{" not in ops[0]
    return [ops[1]] if plain and ptx.REGISTER.fullmatch(ops[1]) else []


def _offset_from(statement: ptx.Statement) -> list[str]:
    """The register an address is copied from or offset from by an immediate (``add`` of one), else none."""
    sources = statement.operands[1:]
    registers = [s for s in sources if ptx.immediate(s) is None]
    if statement.opcode.startswith("add.") and len(sources) == 2 and len(registers) == 1:
        return registers
    return _moved(statement)


def loaded_by(stmts: list[ptx.Statement], register: str, before: int) -> int | None:
    """The statement of the ldmatrix that wrote `register`, through plain moves; None where something else wrote it
    (a zero, an ld.shared, an arithmetic result)."""
    for i in ptx.trace(stmts, register, before, _moved):
        if stmts[i].opcode.startswith("ldmatrix"):
            return i
        if not _moved(stmts[i]):
            return None
    return None


def address(stmts: list[ptx.Statement], at: int) -> tuple[str, int]:
    """The shared-memory address of the ldmatrix at statement `at`: (root register, bytes added to it), following the
    moves and the additions of an immediate that computed it."""
    register, offset = ptx.address(stmts[at].operands[1])
    for i in ptx.trace(stmts, register, at, _offset_from):
        source = _offset_from(stmts[i])
        if not source:
            break
        offset += sum(ptx.immediate(s) or 0 for s in stmts[i].operands[1:])
        register = source[0]
    return register, offset


@dataclass(frozen=True)
class MmaRead:
    """One mma.sync: its shape, and per operand the ldmatrix statements that wrote its registers (None for a register
    no ldmatrix wrote)."""

    shape: str
    a: tuple[int | None, ...]
    b: tuple[int | None, ...]


def mma_reads(code: str) -> tuple[list[ptx.Statement], list[MmaRead]]:
    """The PTX's statements and, for each mma.sync in order, where its A and B registers come from."""
    stmts = ptx.statements(code)
    reads = []
    for i, statement in enumerate(stmts):
        if statement.opcode.startswith("mma.sync"):
            shape = re.search(r"m\d+n\d+k\d+", statement.opcode).group()
            a, b = (tuple(loaded_by(stmts, r, i) for r in ptx.REGISTER.findall(op))
                    for op in statement.operands[1:3])
            reads.append(MmaRead(shape, a, b))
    return stmts, reads


@dataclass(frozen=True)
class Mainloop:
    """What an exercise's mainloop must read: its shared tiles' k offsets and its k-blocks."""

    #: element offset in the shared tile (from the thread's first element) -> k, for A and for B
    k_of_a: Callable[[int], int]
    k_of_b: Callable[[int], int]
    block_k: int  # the MMA's K: one k-block
    k_blocks: int  # k-blocks per K tile
    a_trans: bool  # whether A's ldmatrix transposes (an M-major A)
    b_trans: bool


def k_block_hint(code: str, loop: Mainloop) -> str | None:
    """None if every mma.sync reads A and B registers loaded by ldmatrix, both of one k-block, and the MMAs of a K
    tile read each of its k-blocks equally often; else what is wrong."""
    stmts, reads = mma_reads(code)
    if not reads:
        return "no mma.sync in the PTX: cute.gemm(tiled_mma, ...) must run in the mainloop"
    for name, side, trans in (("A", "a", loop.a_trans), ("B", "b", loop.b_trans)):
        sources = {s for r in reads for s in getattr(r, side)}
        if None in sources:
            return (f"an mma.sync reads {name} registers that no ldmatrix wrote: every k-block's fragment must be "
                    f"copied from shared memory (cute.copy with the tiled copy of {name}) before cute.gemm reads it")
        plain = sorted({".trans" in stmts[s].opcode for s in sources} - {trans})
        if plain:
            major = "M" if name == "A" else "N"
            return (f"{name}'s ldmatrix {'has' if plain[0] else 'lacks'} .trans: .trans is for an operand whose "
                    f"16-byte rows in shared memory run along {major}, not K; which is {name}'s contiguous mode here?")
    base: dict[tuple[str, str], int] = {}
    for r in reads:
        for side in ("a", "b"):
            for s in getattr(r, side):
                root, offset = address(stmts, s)
                base[side, root] = min(base.get((side, root), offset), offset)

    def k_blocks_of(side: str, sources: tuple[int, ...], k_of: Callable[[int], int]) -> set[int]:
        found = set()
        for s in sources:
            root, offset = address(stmts, s)
            found.add(k_of((offset - base[side, root]) // 2) // loop.block_k)
        return found

    per_block: collections.Counter[int] = collections.Counter()
    for r in reads:
        ka, kb = k_blocks_of("a", r.a, loop.k_of_a), k_blocks_of("b", r.b, loop.k_of_b)
        if len(ka) != 1 or ka != kb:
            return (f"an mma.sync multiplies A's k-block {sorted(ka)} by B's k-block {sorted(kb)}: each cute.gemm "
                    f"must read the A and B fragments of one k-block, the one just loaded")
        per_block[ka.pop()] += 1
    if sorted(per_block) != list(range(loop.k_blocks)) or len(set(per_block.values())) != 1:
        read = ", ".join(f"{k}: {n}" for k, n in sorted(per_block.items()))
        return (f"the MMAs of a K tile read its k-blocks as {{{read}}} (k-block: mma.sync count); a K tile has "
                f"{loop.k_blocks} k-blocks of {loop.block_k}, each multiplied once")
    return None


def _census_hint(code: str, shape: str, copies: set[str]) -> str | None:
    """The MMAs are all `shape`, and the kinds of ldmatrix are exactly `copies` (".x2.trans", ".x2", ...)."""
    mine = ptx.count(code, f"mma.sync.aligned.{shape}")
    other = ptx.count(code, "mma.sync") - mine
    if not mine or other:
        return (f"the PTX has {mine} mma.sync.{shape} and {other} other mma.sync; the exercise asks for the {shape} "
                f"atom only")
    kinds = collections.Counter(re.findall(r"ldmatrix\.sync\.aligned\.m8n8(\.x\d(?:\.trans)?)", code))
    if set(kinds) != copies:
        found = ", ".join(f"{n} ldmatrix{k}" for k, n in sorted(kinds.items())) or "no ldmatrix"
        return (f"the PTX has {found}: per warp and k-block, how many 8 x 8 matrices are A's fragment and B's (an "
                f"ldmatrix that loads more repeats them), and along which mode do each operand's 16-byte rows run "
                f"in shared memory?")
    return None


# --------------------------------------------------------------------------- 5.5 an M-major A on m16n8k8

#: 5.5's CTA (given in the exercise): a 64 x 64 x 24 tile, 2 x 1 warps; sA (64, 24) M-contiguous, sB (64, 24)
#: K-contiguous; three k-blocks of 8 per K tile.
K8_LOOP = Mainloop(k_of_a=lambda e: e // 64, k_of_b=lambda e: e % 24, block_k=8, k_blocks=3, a_trans=True,
                   b_trans=False)


def k8_ptx_hint(code: Any) -> str | None:
    """5.5: m16n8k8 MMAs only, fed by ldmatrix.x2.trans (A) and ldmatrix.x2 (B); each MMA reads one k-block of both,
    every k-block of the tile."""
    code = ptx_text(code)
    if code is None:
        return "expected the PTX text (a str with an .entry)"
    hint = _census_hint(code, "m16n8k8", {".x2.trans", ".x2"})
    return hint or k_block_hint(code, K8_LOOP) or common_ptx_hint(code)


# --------------------------------------------------------------------------- 5.6 a batched GEMM with an N-major B

#: 5.6's CTA: 64 x 64 x 32, 2 x 2 warps; sA (64, 32) K-contiguous, sB (64, 32) N-contiguous; two k-blocks of 16.
BATCHED_LOOP = Mainloop(k_of_a=lambda e: e % 32, k_of_b=lambda e: e // 64, block_k=16, k_blocks=2, a_trans=False,
                        b_trans=True)


def batched_ptx_hint(code: Any) -> str | None:
    """5.6: m16n8k16 MMAs fed by ldmatrix.x4 (A) and ldmatrix.x4.trans (B, N-major); the batch from blockIdx.z; each
    MMA reads one k-block of both, every k-block of the tile."""
    code = ptx_text(code)
    if code is None:
        return "expected the PTX text (a str with an .entry)"
    hint = _census_hint(code, "m16n8k16", {".x4", ".x4.trans"})
    if hint:
        return hint
    if "%ctaid.z" not in code:
        return ("the kernel never reads blockIdx.z: each CTA must slice its batch (the L mode) with "
                "cute.arch.block_idx()'s third coordinate")
    return k_block_hint(code, BATCHED_LOOP) or common_ptx_hint(code)


def _judge_k8_ptx(case: tuple[Any, ...], value: Any, outputs: list[Any]) -> str | None:
    return k8_ptx_hint(value)


def _judge_batched_ptx(case: tuple[Any, ...], value: Any, outputs: list[Any]) -> str | None:
    return batched_ptx_hint(value)


#: (L, M, N, K) of the GPU checks. 5.5: M, N and K multiples of 8 (A's and B's contiguous extents, and C's), not all
#: of the tile; K = 8 (one k-block) and K tails of one and two k-blocks.
K8_SHAPES = [(1, 64, 64, 24), (1, 104, 72, 40), (1, 8, 8, 8), (1, 136, 136, 264)]
BATCHED_SHAPES = [(2, 64, 64, 32), (3, 50, 40, 48), (1, 129, 72, 24)]

k8_ptx = Check("k8_ptx", "tc_host", lambda: [gemm_ptx_case(d, a, False, a_transposed=True) for d, a in GEMM_PTX_CASES],
               _judge_k8_ptx, via="ptx", options=(("vector", VECTOR),))
k8_gemm = Check("k8_gemm", "tc_host", lambda: gemm_cases(505, K8_SHAPES, "bfloat16", False, a_transposed=True),
                judge_gemm(False, a_transposed=True), gpu=80, via="launch", options=(("vector", VECTOR),))
bgemm_ptx = Check("bgemm_ptx", "batched_host", lambda: [gemm_ptx_case(d, a, True) for d, a in GEMM_PTX_CASES],
                  _judge_batched_ptx, via="ptx", options=(("vector", VECTOR),))
bgemm = Check("bgemm", "batched_host", lambda: gemm_cases(506, BATCHED_SHAPES, "float16", True), judge_gemm(True),
              gpu=80, via="launch", options=(("vector", VECTOR),))
