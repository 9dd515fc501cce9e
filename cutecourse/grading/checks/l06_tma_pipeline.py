"""Checks of lesson 6's exercise 6.5: the full/empty mbarrier hand-off of a TMA + wgmma GEMM whose CTA is two
consumer warpgroups (warps 0-7, each 128 rows of a 256 x 128 tile of C, both reading every B slot) and one producer
warp (warp 8: only TMA), 288 threads; each warpgroup releases a slot with one arrival, from its leader, once its own
named barrier says its four warps are done with it.

Its PTX on any machine: the instructions of the hand-off and the 288-thread CTA; in the consumers' loop, the release
(the plain ``mbarrier.arrive``) after a ``wgmma.wait_group`` since the batch's commit and after a named barrier
(``bar.sync id, 128``) that is not one id for both warpgroups nor the CTA's barrier 0; a released slot other than the
one just waited for (the index register of its mbarrier address, traced by `slot_register`); and
no release on the loop's first pass, when no batch has retired (the loop's first pass evaluated: registers the PTX
sets to constants before the loop, then the loop's arithmetic, compares and branches up to the release). On a Hopper
GPU, real GEMMs: ``C = A @ B`` for a row-major A (M, K) and a row-major, so N-major, B (K, N), fp16 or bf16, into a
NaN-poisoned fp32 C. The reference is lesson 5's (:func:`l05_tiled_mma.gemm_hint`: the float64 product of the inputs
as the learner's process held them). A kernel that deadlocks (a wait whose phase never completes: a wrong arrival
count or parity) never returns: the grader stops its process at the call's timeout and the call fails; the next
call gets a fresh process and a fresh GPU context. The hidden tests (tests/hidden/test_06_smem_pipelines.py) use the
same hints and generators on shapes the notebook never shows.
"""

from __future__ import annotations

import re
from typing import Any, Callable

from cutecourse.grading.checks import l05_tiled_mma as L5
from cutecourse.kernels import ptx

VECTOR = L5.VECTOR  # 16-bit elements per 16-byte vector: N and K are multiples of it
#: (dtype, arch) of the PTX check: wgmma and TMA exist on sm_90a only.
PTX_CASES = [("float16", "sm_90a"), ("bfloat16", "sm_90a")]
#: The CTA the exercise asks for: two consumer warpgroups and one producer warp.
TMA_THREADS = 2 * 128 + 32
#: Threads of a consumer warpgroup: what its named barrier counts.
WARPGROUP = 128
#: Shared-memory slots of the exercise's ring; a ring that wraps (K > TMA_STAGES * 64) is where a wrong arrival count on
#: "empty" or a wrong producer parity past the first pass shows.
TMA_STAGES, TMA_TILE_K = 4, 64
#: (M, N, K) of the GPU check: one whole tile; ragged M, N and K below one tile; K = 8 (one k-block); M inside the
#: first warpgroup's rows; two rings that wrap (9 and 5 k-tiles, the last one partial).
SHAPES = [(256, 128, 64), (100, 72, 40), (7, 8, 8), (130, 136, 520), (257, 264, 264)]

_BLOCK = re.compile(r"^\s*\.(reqntid|maxntid)\s+(\d+)(?:\s*,\s*(\d+))?(?:\s*,\s*(\d+))?", re.MULTILINE)


def block_threads(code: str) -> int | None:
    """The CTA size the PTX declares for its kernel (``.reqntid x, y, z`` or ``.maxntid``), or None if none."""
    match = _BLOCK.search(code)
    if match is None:
        return None
    size = 1
    for extent in match.groups()[1:]:
        size *= int(extent or 1)
    return size


def threads_hint(code: str, threads: int, cta: str) -> str | None:
    """None if the PTX declares CTAs of `threads` threads; else what it declares, and what the exercise's CTA is
    (`cta`: its size and what its threads do)."""
    have = block_threads(code)
    if have == threads:
        return None
    have = "declares no CTA size" if have is None else f"has CTAs of {have} threads"
    return f"the kernel {have} (.reqntid in the PTX); this exercise's CTA is {cta}"


def ptx_hint(code: Any) -> str | None:
    """What the PTX of a 6.5 answer lacks, or None: wgmma and TMA, no mma.sync/ldmatrix, 288 threads (two consumer
    warpgroups and the producer warp), mbarriers initialised, a full barrier armed with TMA's bytes, a plain arrive
    that releases an empty slot, waits on both sides of the hand-off, and the consumers' release in its order (see the
    module's docstring)."""
    code = L5.ptx_text(code)
    if code is None:
        return "expected the PTX text (a str with an .entry)"
    sync = ptx.count(code, "mma.sync") + ptx.count(code, "ldmatrix")
    if sync:
        return (f"the PTX has {sync} mma.sync/ldmatrix: the consumers multiply with wgmma straight from the shared "
                f"slots (cute.gemm with the given tiled_mma on tCrA/tCrB), not through registers")
    if not ptx.count(code, "wgmma.mma_async"):
        return "no wgmma.mma_async in the PTX: the consumers' mainloop must run cute.gemm(tiled_mma, ...) on each slot"
    if not ptx.count(code, "cp.async.bulk.tensor"):
        return ("no TMA load (cp.async.bulk.tensor) in the PTX: the producer warp must issue cute.copy with tma_atom_a "
                "and tma_atom_b into the slot, with tma_bar_ptr naming the barrier that counts the bytes")
    hint = threads_hint(code, TMA_THREADS, f"{TMA_THREADS} threads: two consumer warpgroups (warps 0-7) and a "
                        f"producer warp (warp 8) that only issues TMA. Launch with block=(TMA_THREADS, 1, 1)")
    if hint:
        return hint
    if not ptx.count(code, "mbarrier.init"):
        return "no mbarrier.init in the PTX: every full and empty barrier needs its arrival count before first use"
    if not ptx.count(code, "mbarrier.arrive.expect_tx"):
        return ("no mbarrier.arrive.expect_tx in the PTX: before its TMA copies the producer must arrive on full[s] "
                "and announce the bytes they will deliver, or the phase cannot wait for the data")
    releases = ptx.count(code, "mbarrier.arrive") - ptx.count(code, "mbarrier.arrive.expect_tx")
    if not releases:
        return ("no plain mbarrier.arrive in the PTX: the consumers never release a slot (an arrive on empty[s] once "
                "the wgmmas that read it are done), so the producer cannot refill it")
    waits = ptx.count(code, "mbarrier.try_wait") + ptx.count(code, "mbarrier.test_wait")
    if waits < 2:
        return (f"the PTX has {waits} mbarrier wait{'s' if waits != 1 else ''}; the hand-off needs one on each side: "
                f"the consumers wait until a slot is full, the producer until it is empty")
    return _release_hint(code.splitlines())


def index_of(lines: list[str], after: int, test: Callable[[str], bool], before: int | None = None) -> int:
    """The first line from `after` on (up to `before`, else the end) that passes `test`; that end if none does."""
    end = len(lines) if before is None else before
    return next((i for i in range(after, end) if test(lines[i])), end)


def is_wait(line: str) -> bool:
    """Whether `line` waits on an mbarrier."""
    return "mbarrier.try_wait" in line or "mbarrier.test_wait" in line


def is_release(line: str) -> bool:
    """Whether `line` is a plain arrive on an mbarrier (a release; not the producer's expect_tx)."""
    return "mbarrier.arrive" in line and "expect_tx" not in line


#: What computes a barrier's address from its slot's index.
_SLOT_ARITHMETIC = ("add", "shl", "mul", "mov", "cvt", "or")


def _slot_sources(statement: ptx.Statement) -> list[str]:
    return [o for o in statement.operands[1:] if o.startswith("%")] if statement.opcode.startswith(
        _SLOT_ARITHMETIC) else []


def slot_register(lines: list[str], at: int) -> str | None:
    """The register that selects the slot of the mbarrier operand of the statement on line `at`: its address register
    traced back through the ``add``/``shl``/``mul``/``mov``/``cvt``/``or`` that computed it to the one shifted or
    multiplied by 8 (a barrier is 8 bytes), or None where the trace finds none."""
    stmts = ptx.statements("\n".join(lines))
    here = next((i for i, statement in enumerate(stmts) if statement.line == at), None)
    if here is None:
        return None
    bases = [found[0] for o in stmts[here].operands if (found := ptx.address(o)) and found[0].startswith("%")]
    if not bases:
        return None
    for i in ptx.trace(stmts, bases[0], here, _slot_sources):
        opcode, operands = stmts[i].opcode, stmts[i].operands
        if opcode.startswith(("shl", "mul")) and operands[-1] in ("3", "8"):
            return operands[1]
    return None


_NAMED = re.compile(r"^\s*(?:@!?%\w+\s+)?(?:bar|barrier)\.sync(?:\.aligned)?\s+(%?\w+)\s*(?:,\s*(%?\w+))?\s*;")
_LABEL = re.compile(r"^(\$L\w+):")
_PREDICATE = re.compile(r"!?%p\d+")
_REGISTER = re.compile(r"%\w+")
_INT = re.compile(r"^-?\d+$")


def _release_hint(lines: list[str]) -> str | None:
    """The consumers' release in its order: after a ``wgmma.wait_group`` since the batch's commit (wgmma reads shared
    memory asynchronously: before that wait TMA could refill a slot it still reads), after the warpgroup's named
    barrier, of a slot other than the one just waited for, and not on the loop's first pass; the accumulators stored
    only after ``wgmma.wait_group 0``."""
    commit = index_of(lines, 0, lambda line: "wgmma.commit_group" in line)
    release = index_of(lines, commit, is_release)
    retire = index_of(lines, commit, lambda line: "wgmma.wait_group" in line)
    if commit == len(lines) or retire > release:
        return ("the consumers release a slot (the plain mbarrier.arrive on empty) with no warpgroup.wait_group "
                "after their batch's commit: wgmma reads shared memory asynchronously, so TMA could refill the slot "
                "while the wgmmas still read it; release the slot of a batch that wait_group says is done")
    named = [m for line in lines[retire:release] if (m := _NAMED.match(line))]
    if not named:
        return ("the release follows no barrier of the warpgroup's threads: one thread's wait_group covers its own "
                "warp's wgmmas, and the other three warps of its warpgroup may still be reading the slot. Let the "
                "warpgroup meet at a named barrier of its own before its one arrival")
    ids, counts = {m.group(1) for m in named}, {m.group(2) for m in named}
    if None in counts:
        return ("the barrier before the release is the CTA's (sync_threads: every thread, the producer warp too, "
                "which never reaches it): the release needs a barrier of the warpgroup's threads only")
    if counts != {str(WARPGROUP)}:
        return (f"the named barrier before the release waits for {', '.join(sorted(counts))} threads: which threads "
                f"take part in one warpgroup's release, and how many are they?")
    if ids == {"0"}:
        return ("the barrier before the release is barrier 0, the CTA's own (sync_threads, and the barrier after the "
                "mbarrier init): a named barrier of one warpgroup needs an id no other group of threads uses")
    if len(ids) == 1 and _INT.match(next(iter(ids))):
        return (f"both consumer warpgroups meet at named barrier {next(iter(ids))}: a barrier completes with the "
                f"first {WARPGROUP} threads that reach it, from either warpgroup, so a leader may release a slot that "
                f"its own warps still read. Each warpgroup needs a barrier of its own")
    head = max((i for i in range(release) if is_wait(lines[i])), default=None)  # the wait for a full slot
    if head is not None:
        waited, released = slot_register(lines, head), slot_register(lines, release)
        if waited is not None and waited == released:
            return ("the slot released is the one the loop has just waited for (the same index): this k-tile's "
                    "wgmmas may still read it. Which k-tile's batch has the wait retired?")
        if _released_on_first_pass(lines, head, commit, release):
            return ("on the loop's first k-tile the consumers release a slot too: no batch has retired yet, so that "
                    "arrival counts toward a use of the slot that has not happened, and the producer may refill it "
                    "while a later batch reads it. What is there to release on the first k-tile?")
    store = index_of(lines, commit, lambda line: "st.global" in line)
    if not any(re.search(r"wgmma\.wait_group\S*\s+0\s*;", line) for line in lines[commit:store]):
        return ("the epilogue stores the accumulators with no warpgroup.wait_group(0) before it: the last batches of "
                "wgmma may still be writing them")
    return None


def _released_on_first_pass(lines: list[str], wait: int, commit: int, release: int) -> bool:
    """Whether the loop whose full wait is on line `wait` runs its release (line `release`) on its first pass, with
    the loop's registers at the constants the PTX sets before it. False where it is no loop, where a batch is
    committed before it (its first k-tile peeled off: the loop's first pass is not the first k-tile), or where a
    branch the first pass takes (its predicate known) jumps over the release."""
    import numpy as np

    labels = {m.group(1): i for i, line in enumerate(lines) if (m := _LABEL.match(line))}
    head = max((i for i in labels.values() if i < wait), default=None)
    if head is None or any("wgmma.commit_group" in line for line in lines[:head]):
        return False
    name = lines[head].split(":")[0]
    back = next((i for i in range(release, len(lines)) if name in lines[i] and "bra" in lines[i]), None)
    if back is None:
        return False
    stmts = ptx.statements("\n".join(lines))
    one = np.zeros(1, dtype=np.int64)  # the first pass of one thread: every value an array of one
    known: dict[str, object] = {}
    for statement in stmts:
        if statement.line < head:
            _assign(statement, known, one, constants_only=True)
    k = next((k for k, statement in enumerate(stmts) if statement.line > head), len(stmts))
    while k < len(stmts) and stmts[k].line < release:
        statement = stmts[k]
        guard, target = statement.guard or "", labels.get((statement.operands or ("",))[0])
        if statement.opcode in ("bra", "bra.uni") and _PREDICATE.fullmatch(guard) and guard.lstrip("!") in known \
                and target is not None:
            taken = bool(known[guard.lstrip("!")][0]) != guard.startswith("!")
            if taken and release < target <= back + 1:
                return False
            if taken and statement.line < target < release:
                k = next((k for k, later in enumerate(stmts) if later.line > target), len(stmts))
                continue
        _assign(statement, known, one, constants_only=False)
        k += 1
    return True


def _assign(statement: ptx.Statement, known: dict[str, object], one: object, constants_only: bool) -> None:
    """Update `known` (register -> its value, an array of one) with what `statement` writes to a register: its value
    where it is a constant or a copy of a known one (or, unless `constants_only`, what `ptx.evaluate` computes from
    known values), else the register forgotten."""
    if statement.opcode.startswith(".") or len(statement.operands) < 2 or not _REGISTER.fullmatch(
            statement.operands[0]):
        return
    args = [one + value if (value := ptx.immediate(a)) is not None else known.get(a) for a in statement.operands[1:]]
    if constants_only:
        value = args[0] if statement.opcode.split(".")[0] == "mov" and len(args) == 1 else None
    else:
        value = ptx.evaluate(statement.opcode, args, one)
    if value is None:
        known.pop(statement.operands[0], None)
    else:
        known[statement.operands[0]] = value


def ptx_case(dtype: str, arch: str) -> tuple[Any, ...]:
    """A PTX case: the arch, then CPU stand-ins of A (M, K), B (K, N) (in `dtype`) and C (M, N) (fp32)."""
    return L5.gemm_ptx_case(dtype, arch, True, batch=None)


def cases(seed: int, shapes: list[tuple[int, int, int]], dtype: str) -> list[tuple[Any, ...]]:
    """(A (M, K), B (K, N), poisoned fp32 C (M, N)) per (M, N, K): random normal inputs, rounded to `dtype` in the
    learner's process."""
    return L5.gemm_cases(seed, [(None, m, n, k) for m, n, k in shapes], dtype, True)


#: What a ring gets wrong when its products are: said after the GEMM judge's hint.
SUSPECTS = "; in a ring also: is a slot read before its k-tile landed, or refilled before its wgmmas were done?"


gemm_result_hint = L5.result_hint(True, SUSPECTS)
tma_ptx, tma_gemm = L5.kernel_checks("tma", "tma_host", ptx_hint, lambda: [ptx_case(d, a) for d, a in PTX_CASES],
                                     lambda: cases(65, SHAPES, "float16"), True, SUSPECTS, gpu=90)
