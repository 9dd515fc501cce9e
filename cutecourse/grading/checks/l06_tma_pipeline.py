"""Checks of lesson 6's exercise 6.5: the full/empty mbarrier hand-off of a TMA + wgmma GEMM whose CTA is two
consumer warpgroups (warps 0-7, each 128 rows of a 256 x 128 tile of C, both reading every B slot) and one producer
warp (warp 8: only TMA), 288 threads; each warpgroup releases a slot with one arrival, from its leader, once its own
named barrier says its four warps are done with it.

Its PTX on any machine: the instructions of the hand-off and the 288-thread CTA; in the consumers' loop, the release
(the plain ``mbarrier.arrive``) after a ``wgmma.wait_group`` since the batch's commit and after a named barrier
(``bar.sync id, 128``) that is not one id for both warpgroups nor the CTA's barrier 0; a released slot other than the
one just waited for (the index register of its mbarrier address, traced as ``l06_wgmma_rs.slot_register`` does); and
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
from typing import Any

from cutecourse.grading.checks import Check
from cutecourse.grading.checks import l05_tiled_mma as L5
from cutecourse.grading.checks.l05_tiled_mma import VECTOR

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


def ptx_hint(code: Any) -> str | None:
    """What the PTX of a 6.5 answer lacks, or None: wgmma and TMA, no mma.sync/ldmatrix, 288 threads (two consumer
    warpgroups and the producer warp), mbarriers initialised, a full barrier armed with TMA's bytes, a plain arrive
    that releases an empty slot, waits on both sides of the hand-off, and the consumers' release in its order (see the
    module's docstring)."""
    from cutecourse.kernels import ptx

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
    threads = block_threads(code)
    if threads != TMA_THREADS:
        have = "declares no CTA size" if threads is None else f"has CTAs of {threads} threads"
        return (f"the kernel {have} (.reqntid in the PTX); this exercise's CTA is {TMA_THREADS} threads: two consumer "
                f"warpgroups (warps 0-7) and a producer warp (warp 8) that only issues TMA. Launch with "
                f"block=(TMA_THREADS, 1, 1)")
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


_NAMED = re.compile(r"^\s*(?:@!?%\w+\s+)?(?:bar|barrier)\.sync(?:\.aligned)?\s+(%?\w+)\s*(?:,\s*(%?\w+))?\s*;")
_LABEL = re.compile(r"^(\$L\w+):")
_BRANCH = re.compile(r"^\s*@(!?)(%p\d+)\s+bra(?:\.uni)?\s+(\$L\w+)\s*;")
_JUMP = re.compile(r"^\s*bra(?:\.uni)?\s+(\$L\w+)\s*;")
_INT = re.compile(r"^-?\d+$")


def _release_hint(lines: list[str]) -> str | None:
    """The consumers' release in its order: after a ``wgmma.wait_group`` since the batch's commit (wgmma reads shared
    memory asynchronously: before that wait TMA could refill a slot it still reads), after the warpgroup's named
    barrier, of a slot other than the one just waited for, and not on the loop's first pass; the accumulators stored
    only after ``wgmma.wait_group 0``."""
    from cutecourse.grading.checks.l06_wgmma_rs import _index, _is_release, _is_wait, slot_register

    commit = _index(lines, 0, lambda line: "wgmma.commit_group" in line)
    release = _index(lines, commit, _is_release)
    retire = _index(lines, commit, lambda line: "wgmma.wait_group" in line)
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
    head = max((i for i in range(release) if _is_wait(lines[i])), default=None)  # the wait for a full slot
    if head is not None:
        waited, released = slot_register(lines, head), slot_register(lines, release)
        if waited is not None and waited == released:
            return ("the slot released is the one the loop has just waited for (the same index): this k-tile's "
                    "wgmmas may still read it. Which k-tile's batch has the wait retired?")
        if _released_on_first_pass(lines, head, commit, release):
            return ("on the loop's first k-tile the consumers release a slot too: no batch has retired yet, so that "
                    "arrival counts toward a use of the slot that has not happened, and the producer may refill it "
                    "while a later batch reads it. What is there to release on the first k-tile?")
    store = _index(lines, commit, lambda line: "st.global" in line)
    if not any(re.search(r"wgmma\.wait_group\S*\s+0\s*;", line) for line in lines[commit:store]):
        return ("the epilogue stores the accumulators with no warpgroup.wait_group(0) before it: the last batches of "
                "wgmma may still be writing them")
    return None


def _released_on_first_pass(lines: list[str], wait: int, commit: int, release: int) -> bool:
    """Whether the loop whose full wait is on line `wait` runs its release (line `release`) on its first pass, with
    the loop's registers at the constants the PTX sets before it. False where it is no loop, where a batch is
    committed before it (its first k-tile peeled off: the loop's first pass is not the first k-tile), or where a
    branch the first pass takes (its predicate known) jumps over the release."""
    labels = {m.group(1): i for i, line in enumerate(lines) if (m := _LABEL.match(line))}
    head = max((i for i in labels.values() if i < wait), default=None)
    if head is None or any("wgmma.commit_group" in line for line in lines[:head]):
        return False
    name = lines[head].split(":")[0]
    back = next((i for i in range(release, len(lines)) if name in lines[i] and "bra" in lines[i]), None)
    if back is None:
        return False
    known: dict[str, int | bool] = {}
    for line in lines[:head]:
        _assign(line, known, constants_only=True)
    i = head + 1
    while i < release:
        line = lines[i]
        branch = _BRANCH.match(line)
        if branch and branch.group(2) in known and branch.group(3) in labels:
            taken = known[branch.group(2)] != (branch.group(1) == "!")
            target = labels[branch.group(3)]
            if taken and release < target <= back + 1:
                return False
            if taken and i < target < release:
                i = target
                continue
        _assign(line, known, constants_only=False)
        i += 1
    return True


_DEF = re.compile(r"^\s*(?:@!?%\w+\s+)?([a-z][\w.]*)\s+(%\w+)\s*,\s*(.*?);")
_COMPARE = {"eq": lambda a, b: a == b, "ne": lambda a, b: a != b, "lt": lambda a, b: a < b,
            "le": lambda a, b: a <= b, "gt": lambda a, b: a > b, "ge": lambda a, b: a >= b}
_ARITHMETIC = {"add": lambda a, b: a + b, "sub": lambda a, b: a - b, "mul": lambda a, b: a * b,
               "shl": lambda a, b: a << b, "and": lambda a, b: a & b, "or": lambda a, b: a | b}


def _assign(line: str, known: dict[str, int | bool], constants_only: bool) -> None:
    """Update `known` (register -> value) with the definition on `line`: its value where it is a constant or a copy
    of a known one (or, unless `constants_only`, arithmetic, a compare or a select of known values), else the
    register forgotten."""
    d = _DEF.match(line)
    if d is None:
        return
    op, reg = d.group(1), d.group(2)
    args = [a.strip() for a in d.group(3).split(",")]
    values = [int(a) if _INT.match(a) else known.get(a) for a in args]
    value: int | bool | None = None
    kind = op.split(".")[0]
    if kind == "mov" and len(values) == 1 and isinstance(values[0], int):
        value = values[0]
    elif constants_only:
        value = None
    elif kind in _ARITHMETIC and len(values) == 2 and all(isinstance(v, int) for v in values):
        value = _ARITHMETIC[kind](values[0], values[1])
    elif kind == "setp" and len(values) == 2 and all(isinstance(v, int) for v in values):
        value = _COMPARE[op.split(".")[1]](values[0], values[1]) if op.split(".")[1] in _COMPARE else None
    elif kind == "selp" and len(values) == 3 and isinstance(values[2], bool) and isinstance(values[0], int):
        value = values[0] if values[2] else values[1]
    if value is None:
        known.pop(reg, None)
    else:
        known[reg] = value


def ptx_case(dtype: str, arch: str) -> tuple[Any, ...]:
    """A PTX case: the arch, then CPU stand-ins of A (M, K), B (K, N) (in `dtype`) and C (M, N) (fp32)."""
    return L5.gemm_ptx_case(dtype, arch, True, batch=None)


def cases(seed: int, shapes: list[tuple[int, int, int]], dtype: str) -> list[tuple[Any, ...]]:
    """(A (M, K), B (K, N), poisoned fp32 C (M, N)) per (M, N, K): random normal inputs, rounded to `dtype` in the
    learner's process."""
    return L5.gemm_cases(seed, [(None, m, n, k) for m, n, k in shapes], dtype, True)


#: What a ring gets wrong when its products are: said after the GEMM judge's hint.
SUSPECTS = "; in a ring also: is a slot read before its k-tile landed, or refilled before its wgmmas were done?"


def gemm_result_hint(case: tuple[Any, ...], out: Any) -> str | None:
    """`out` (C after the launch) against A @ B in float64 (lesson 5's bounds, B (K, N)), or None."""
    return L5.gemm_hint(case, out, True, SUSPECTS)


def _judge_ptx(case: tuple[Any, ...], value: Any, outputs: list[Any]) -> str | None:
    return ptx_hint(value)


tma_ptx = Check("tma_ptx", "tma_host", lambda: [ptx_case(d, a) for d, a in PTX_CASES], _judge_ptx, via="ptx",
                options=(("vector", VECTOR),))
tma_gemm = Check("tma_gemm", "tma_host", lambda: cases(65, SHAPES, "float16"), L5.judge_gemm(True, SUSPECTS),
                 gpu=90, via="launch", options=(("vector", VECTOR),))
