"""The PTX reader the kernel checks share (cutecourse.kernels.ptx): statements, who writes a register, the trace of
an address back through the arithmetic that computed it, and the per-thread integer evaluator."""

from __future__ import annotations

import numpy as np
import pytest

from cutecourse.kernels import ptx

KERNEL = """//
// a comment; with a semicolon
.version 8.8
.target sm_80

.visible .entry k(
\t.param .u64 k_param_0
)
{
\t.reg .b32 \t%r<20>;

\tmov.u32 \t%r1, %tid.x;   // the thread
\tshl.b32 \t%r2, %r1, 3;
\tadd.s32 \t%r3, %r2, 16;
\tmov.b32 \t%r4, %r3;
$L__BB0_1:
\tsetp.lt.u32 \t%p1|%p2, %r1, 32;
\t@!%p1 bra \t$L__BB0_2;
\tldmatrix.sync.aligned.m8n8.x2.shared.b16 {%r5, %r6}, [%r4+-8];
\tmma.sync.aligned.m16n8k8.row.col.f32.f16.f16.f32
\t\t{%r7, %r8, %r9, %r10},
\t\t{%r5, %r6},
\t\t{%r5},
\t\t{%r11, %r12, %r13, %r14};
\t// begin inline asm
\t{
\t.reg .pred P1;
\tLAB_WAIT:
\tmbarrier.try_wait.parity.shared.b64 P1, [%r3], %r1;
\t@P1 bra.uni DONE;
\tDONE:
\t}
\t// end inline asm
\tst.shared.v2.b32 \t[%r4], {%r7, %r8};
\tbar.sync \t0;
$L__BB0_2:
\tret;

}
"""


@pytest.fixture(scope="module")
def stmts() -> list[ptx.Statement]:
    return ptx.statements(KERNEL)


def _at(stmts: list[ptx.Statement], opcode: str) -> int:
    return next(i for i, s in enumerate(stmts) if s.opcode.startswith(opcode))


def test_a_statement_has_its_line_labels_guard_opcode_and_operands(stmts):
    lines = KERNEL.splitlines()
    for s in stmts:
        assert s.opcode in lines[s.line], s  # the line of its opcode, comments and all before it counted
    setp = stmts[_at(stmts, "setp")]
    assert setp.labels == ("$L__BB0_1",) and setp.guard is None and setp.operands == ("%p1|%p2", "%r1", "32")
    branch = stmts[_at(stmts, "bra")]
    assert branch.guard == "!%p1" and branch.operands == ("$L__BB0_2",)
    mma = stmts[_at(stmts, "mma.sync")]
    assert mma.operands == ("{%r7, %r8, %r9, %r10}", "{%r5, %r6}", "{%r5}", "{%r11, %r12, %r13, %r14}")
    assert stmts[-1].opcode == "ret" and stmts[-1].labels == ("$L__BB0_2",)


def test_comments_directives_and_an_inline_asm_block_are_told_apart(stmts):
    opcodes = [s.opcode for s in stmts]
    assert not any("comment" in " ".join(s.operands) or "the thread" in " ".join(s.operands) for s in stmts)
    assert opcodes[0] == ".version" and ".reg" in opcodes
    wait = stmts[_at(stmts, "mbarrier.try_wait")]
    assert wait.labels == ("LAB_WAIT",) and wait.operands == ("P1", "[%r3]", "%r1")
    done = next(s for s in stmts if s.guard == "P1")
    assert done.opcode == "bra.uni" and done.operands == ("DONE",)
    assert stmts[_at(stmts, "st.shared")].labels == ("DONE",)  # a label before a block's end goes to what follows


def test_split_operands_keeps_vectors_and_addresses_whole():
    assert ptx.split_operands(" {%r1,  %r2}, [%rd1+8], 3 ") == ["{%r1, %r2}", "[%rd1+8]", "3"]
    assert ptx.split_operands("") == []


def test_writes_is_the_destination_only(stmts):
    assert ptx.writes(stmts[_at(stmts, "setp")]) == ["%p1", "%p2"]
    assert ptx.writes(stmts[_at(stmts, "ldmatrix")]) == ["%r5", "%r6"]
    for opcode in ("st.shared", "bar.sync", "bra", ".reg", "ret"):
        assert ptx.writes(stmts[_at(stmts, opcode)]) == [], opcode


def test_writer_is_the_last_write_before_the_reader(stmts):
    mma = _at(stmts, "mma.sync")
    assert ptx.writer(stmts, "%r5", mma) == _at(stmts, "ldmatrix")
    assert ptx.writer(stmts, "%r5", _at(stmts, "ldmatrix")) is None
    assert ptx.writer(stmts, "%r99", len(stmts)) is None


def test_trace_follows_only_the_sources_it_is_told_to(stmts):
    load = _at(stmts, "ldmatrix")
    base, offset = ptx.address(stmts[load].operands[1])
    assert (base, offset) == ("%r4", -8)

    def every_register(s: ptx.Statement) -> list[str]:
        return [o for o in s.operands[1:] if o.startswith("%r")]

    chain = [stmts[i].opcode.split(".")[0] for i in ptx.trace(stmts, base, load, every_register)]
    assert chain == ["mov", "add", "shl", "mov"]
    assert [stmts[i].opcode for i in ptx.trace(stmts, base, load, lambda s: [])] == ["mov.b32"]


def test_address_and_immediate_read_what_ptx_writes():
    assert ptx.address("[%r1+16]") == ("%r1", 16)
    assert ptx.address("[ %rd2 + -0x10 ]") == ("%rd2", -16)
    assert ptx.address("[__dynamic_shmem__0]") == ("__dynamic_shmem__0", 0)
    assert ptx.address("%r1") is None
    assert [ptx.immediate(t) for t in ("16", "-8", "0x1F", "3U", "%r1", "1.5")] == [16, -8, 31, 3, None, None]


def test_evaluate_wraps_compares_and_selects_per_thread():
    tid = np.arange(4, dtype=np.int64)
    assert ptx.evaluate("add.s32", [tid * 0 + 2**31 - 1, tid * 0 + 1], tid).tolist() == [-(2**31)] * 4
    assert ptx.evaluate("shl.b32", [tid, tid * 0 + 3], tid).tolist() == [0, 8, 16, 24]
    # unsigned, the first thread's -1 is 2**32 - 1
    assert ptx.evaluate("setp.lo.u32", [tid - 1, tid * 0 + 2], tid).tolist() == [False, True, True, False]
    flags = np.array([True, False, True, False])
    assert ptx.evaluate("selp.b32", [tid, tid * 0 - 1, flags], tid).tolist() == [0, -1, 2, -1]
    assert ptx.evaluate("shfl.sync.idx.b32", [tid * 10, tid * 0 + 1], tid).tolist() == [10, 10, 10, 10]
    assert ptx.evaluate("add.s32", [tid, None], tid) is None  # an unknown source
    assert ptx.evaluate("add.f32", [tid, tid], tid) is None  # floating point is not followed
    assert ptx.evaluate("ld.shared.b32", [tid], tid) is None
