"""Checks of exercises 7.3 and 7.4 (lesson 7): two epilogues of the lesson's sm_80 Tensor Core GEMM (the given
mainloop: a 64 × 64 × 64 tile, m16n8k16 over 4 × 1 warps, cp.async into swizzled shared tiles, ldmatrix.x4).

- 7.3, a fused epilogue: ``D = leaky_relu(row_scale[m] · acc + beta · C, slope)`` in fp32, stored in D's 16-bit
  dtype; ``beta`` and ``slope`` are runtime Float32 scalars; row_scale (M,) fp32 is read through a stride-0 broadcast
  layout partitioned like C, each distinct scale once (its stride-0 modes filtered out); beta = 0 never reads C (C may
  be all NaN).
- 7.4, a vectorized store: ``D = A @ B.T`` rounded to D's 16-bit dtype, staged warp by warp through shared memory
  (a warp's band of 16 rows is written and read by that warp alone, ordered by a warp barrier) and written with
  16-byte ``st.global.v4`` stores, predicated on M and N.

The PTX checks judge what the PTX can show: one kernel, its MMAs, its runtime f32 parameters, which global reads and
stores it makes and how wide, whether they are behind predicates; for 7.3, how many times a thread loads row_scale
(once per row of its accumulators: index arithmetic loads it once per accumulator); for 7.4, its shared-memory round
trip, its barriers after the K loop, and every byte each warp reads back from shared memory, simulated for each of
the CTA's threads from the PTX's own integer arithmetic, against the bytes each warp wrote (with a warp's barrier
only, a warp may read back nothing another warp staged). What the PTX cannot show (whether C is read when beta = 0,
the arithmetic, where each value lands) is judged on a GPU against float64 references computed here from the inputs
as the learner's process held them; the hidden tests (tests/hidden/test_07_epilogue.py) use the same generators on
shapes the notebook never shows.
"""

from __future__ import annotations

import collections
import random
import re
from typing import Any, NamedTuple

from cutecourse.grading import wire
from cutecourse.grading.checks import Check, input_of, relative_error
from cutecourse.grading.checks import l05_tiled_mma as L5
from cutecourse.kernels import ptx

TILE_M = 64  # the answer cells' CTA tile
TILE_N = 64
TILE_K = 64
WARPS_M = 4  # warps stacked along M: warp w owns the tile's rows 16 w .. 16 w + 15
VECTOR = L5.VECTOR  # 16-bit elements per 16-byte vector: N and K are multiples of it
DTYPES = ("float16", "bfloat16")
#: fused_kernel's parameters, in the order of its signature (mA, mB, mC, mRowScale, mD, beta, slope, ...): which
#: tensor an ld.global reads is told by the parameter its address comes from.
C_PARAM = 2
SCALE_PARAM = 3
BETA_PARAM = 5
PTX_CASES = L5.PTX_GRID  # the hidden PTX tests'; the checks compile L5.CHECK_PTX_CASES

_ENTRY = re.compile(r"\.entry\s+\w+\s*\(([^)]*)\)", re.DOTALL)
_LABEL = re.compile(r"^\s*(\$\w+):", re.MULTILINE)
_BRANCH = re.compile(r"\bbra(?:\.uni)?\s+(\$\w+)\s*;")
_GLOBAL = re.compile(r"^\s*(@!?%\w+\s+)?(ld|st)\.global(\.\w+)*\s", re.MULTILINE)


# --------------------------------------------------------------------------- what both PTX checks look for


def _kernel_ptx(code: Any) -> tuple[str, str | None]:
    """The PTX text of `code`, and what is wrong with it as one of this lesson's kernels (one kernel, with the given
    mainloop's m16n8k16 MMAs), or None."""
    text = L5.ptx_text(code)
    if text is None:
        return "", "expected the PTX text (a str with an .entry)"
    entries = len(_ENTRY.findall(text))
    if entries != 1:
        return text, (f"the PTX has {entries} kernels (.entry); the epilogue is fused: one kernel runs the mainloop "
                      f"and the epilogue, and the host launches it once")
    k16, every = ptx.count(text, "mma.sync.aligned.m16n8k16"), ptx.count(text, "mma.sync")
    if not k16 or every != k16:
        return text, (f"the PTX has {k16} mma.sync.m16n8k16 among {every} mma.sync: the given mainloop(...) call "
                      f"computes the accumulators; keep it as it is")
    return text, None


def _accesses(code: str, kind: str) -> list[tuple[int, int]]:
    """(line index, bits) of each global access of `kind` ("ld" or "st"); bits from the PTX type and vector width."""
    lines = code.splitlines()
    found = []
    for i, line in enumerate(lines):
        m = _GLOBAL.match(line)
        if m and m.group(2) == kind:
            opcode = line.split()[1] if m.group(1) else line.split()[0]
            parts = opcode.split(".")
            width = next((int(p[1:]) for p in parts if re.fullmatch(r"v\d", p)), 1)
            bits = next((int(p[1:]) for p in reversed(parts) if re.fullmatch(r"[bfsu]\d+", p)), 0)
            found.append((i, width * bits))
    return found


def _unguarded(code: str, kind: str, tensors: dict[int, frozenset[int]] | None = None) -> int:
    """How many global accesses of `kind` run without a guard of their own: not predicated, and no conditional branch
    (how the DSL compiles an ``if``) between them and the label or the access of the same kind (and the same tensor,
    where `tensors` maps an access's line to the parameters its address comes from) before them: two elements of a
    tensor in one guarded block share a predicate, which an element-wise guard does not."""
    lines = code.splitlines()
    starts = {i for i, _ in _accesses(code, kind)}
    tensors = tensors or {}
    count = 0
    for i in sorted(starts):
        if _GLOBAL.match(lines[i]).group(1):
            continue
        j = i - 1
        while j >= 0 and not _LABEL.match(lines[j]) and not (j in starts and tensors.get(j) == tensors.get(i)) \
                and not re.match(r"^\s*@!?%\w+\s+bra", lines[j]):
            j -= 1
        if j < 0 or _LABEL.match(lines[j]) or j in starts:
            count += 1
    return count


def _epilogue_start(lines: list[str]) -> int:
    """The index of the PTX's first line after the K loop: after the first backward branch that follows the last MMA
    (the K loop is a dynamic loop around the MMAs; everything after its back edge is the epilogue)."""
    last_mma = max(i for i, line in enumerate(lines) if "mma.sync" in line)
    labels = {m.group(1): i for i, line in enumerate(lines) for m in [_LABEL.match(line)] if m}
    for i in range(last_mma + 1, len(lines)):
        target = _BRANCH.search(lines[i])
        if target and labels.get(target.group(1), len(lines)) <= last_mma:
            return i + 1
    return last_mma + 1


_PARAM_LOAD = re.compile(r"^\s*(?:@!?%\w+\s+)?ld\.param\S*\s+(\{[^}]*\}|%\w+)\s*,\s*\[\w+?_param_(\d+)")


class Read(NamedTuple):
    """One ld.global: its line, the kernel parameters its address is computed from, and those of the predicate it
    runs under (empty when it is not predicated)."""

    line: int
    params: set[int]
    guard: set[int]


def _trace(code: str) -> tuple[list[Read], list[tuple[int, int, set[int]]]]:
    """Every ld.global (`Read`), and every forward conditional branch as (its line, its target label's line, the
    parameters its predicate is computed from). A register's sources are followed through every instruction that
    writes it, from the ld.param of each tensor's pointer and strides, and of each scalar, on."""
    lines = code.splitlines()
    labels = {m.group(1): i for i, line in enumerate(lines) for m in [_LABEL.match(line)] if m}
    sources: dict[str, set[int]] = {}
    reads, skips = [], []
    for i, line in enumerate(lines):
        guard = re.match(r"^\s*@!?(%\w+)\s+", line)
        guarded_by = sources.get(guard.group(1), set()) if guard else set()
        text = line[guard.end():] if guard else line
        text = text.split("//")[0].strip()
        branch = _BRANCH.search(text)
        if branch and guard and labels.get(branch.group(1), -1) > i:
            skips.append((i, labels[branch.group(1)], guarded_by))
        loaded = _PARAM_LOAD.match(text)
        if loaded:
            for register in ptx.REGISTER.findall(loaded.group(1)):
                sources[register] = {int(loaded.group(2))}
            continue
        if text.startswith("ld.global"):
            address = text[text.index("["):]
            reads.append(Read(i, set().union(*(sources.get(r, set()) for r in ptx.REGISTER.findall(address))),
                              guarded_by))
        registers = ptx.REGISTER.findall(text)
        if registers and not text.startswith(("st.", "bra", "bar")):
            dest, used = registers[0], registers[1:]
            sources[dest] = sources.get(dest, set()).union(*(sources.get(r, set()) for r in used))
    return reads, skips


def _reads_of_c_whatever_beta(reads: list[Read], skips: list[tuple[int, int, set[int]]]) -> int:
    """How many reads of C run whatever beta is: neither predicated on a test of beta nor inside a block that a
    branch on one skips."""
    beta_blocks = [(start, end) for start, end, params in skips if BETA_PARAM in params]
    return sum(1 for read in reads if C_PARAM in read.params and BETA_PARAM not in read.guard
               and not any(start < read.line < end for start, end in beta_blocks))


# --------------------------------------------------------------------------- 7.3 the fused epilogue


def fused_ptx_hint(code: Any) -> str | None:
    """What is missing from, or wrong in, the PTX of the fused epilogue; None if it has what 7.3 asks."""
    code, problem = _kernel_ptx(code)
    if problem:
        return problem
    scalars = _ENTRY.search(code).group(1).count(".param .f32")
    if scalars < 2:
        return (f"the kernel has {scalars} .f32 parameters; beta and slope are runtime Float32 arguments of the "
                f"kernel (one compile serves every beta and slope): a Constexpr is baked into the code instead")
    reads, skips = _trace(code)
    if not reads:
        return ("nothing in the kernel reads global memory besides the mainloop's cp.async: D depends on neither "
                "row_scale nor C (is this still the worked example's epilogue?)")
    if not any(SCALE_PARAM in read.params for read in reads):
        return ("no ld.global reads row_scale: each accumulator's row scale comes from the broadcast row_scale "
                "tensor (an (M, N) view of it with stride 0 along N), partitioned like C")
    if not any(C_PARAM in read.params for read in reads):
        return ("no ld.global reads C: D = leaky_relu(row_scale · acc + beta · C, slope) needs C's element at each "
                "accumulator's (row, column) whenever beta is not 0")
    whatever_beta = _reads_of_c_whatever_beta(reads, skips)
    if whatever_beta:
        return (f"{whatever_beta} reads of C run whatever beta is: with beta = 0, C must not be read at all (it may "
                f"hold NaN, and its bytes are wasted traffic), not read and then multiplied by 0 or discarded: put "
                f"every load of C under a run-time test of beta")
    if not _accesses(code, "st"):
        return "no st.global: D is never written"
    tensors = {read.line: frozenset(read.params) for read in reads}
    for kind, what in (("ld", "reads"), ("st", "stores")):
        bare = _unguarded(code, kind, tensors)
        if bare:
            return (f"{bare} global {what} are not behind a predicate: on a ragged edge tile they touch elements "
                    f"outside the matrices; test each element's coordinate (the identity tensor cD, partitioned like "
                    f"the accumulators) against D's shape first")
    return _scale_loads_hint(reads)


def rows_per_thread() -> tuple[int, int]:
    """(rows, accumulators): how many rows of the CTA tile one thread's accumulators lie in (the most of any thread),
    and how many accumulators it has, read off the given TiledMMA's C layout with the eager algebra."""
    from cutecourse import fragments as F

    tiled = F.tiled_mma(F.mma_atom(16), (WARPS_M, 1, 1), (16 * WARPS_M, 16, 16))
    at = F.coords(tiled.tv_layout_C_tiled, (TILE_M, 16))  # (thread, value) -> (m, n) in one N permutation tile
    rows = max(len(set(at[t, :, 0].tolist())) for t in range(at.shape[0]))
    return rows, at.shape[1] * TILE_N // 16


def _scale_loads_hint(reads: list[Read]) -> str | None:
    """row_scale seen as an (M, N) tensor with stride 0 along N, tiled and partitioned like C: its stride-0 modes say
    which accumulators share a scale, so a thread loads each distinct one once, as many as its accumulators have
    rows. An address worked out from each accumulator's coordinate (index arithmetic) loads the scale once per
    accumulator. (An answer that works out each distinct row by hand, from the MMA's fragment, loads as few; it has
    then written the layout's information in its own arithmetic, and the PTX cannot tell the two apart.)"""
    loads = sum(1 for read in reads if SCALE_PARAM in read.params)
    rows, accumulators = rows_per_thread()
    if loads <= rows:
        return None
    return (f"row_scale is loaded {loads} times a thread, though a thread's {accumulators} accumulators lie in only "
            f"{rows} rows of the tile: the scale is read once per accumulator, at an address worked out for each "
            f"(index arithmetic, or a loop over every element of the view). What do the stride-0 modes of the "
            f"partitioned view say about which accumulators share a scale (item 1)?")


def fused_ptx_case(dtype: str, arch: str) -> tuple[Any, ...]:
    """A PTX case: the arch, CPU stand-ins of A (M, K), B (N, K), C (M, N), row_scale (M,) fp32 and D (M, N), then
    beta and slope."""
    import numpy as np

    z = np.zeros
    return (arch, *(wire.tensor(z(s, np.float32), d, "cpu") for s, d in
                    (((64, 96), dtype), ((64, 96), dtype), ((64, 64), dtype), ((64,), "float32"), ((64, 64), dtype))),
            0.5, 0.1)


def padded(m: int) -> int:
    """row_scale's length for M rows: M rounded up to whole 16-byte vectors (every tensor's last extent is a multiple
    of 8 for the harness); the entries past M are NaN, which D never sees."""
    return -(-m // VECTOR) * VECTOR


def fused_cases(seed: int, shapes: list[tuple[int, int, int, float, float]], dtype: str) -> list[tuple[Any, ...]]:
    """(A, B, C, row_scale, poisoned D, beta, slope) per (M, N, K, beta, slope): random normal A (M, K) and
    B (N, K); C (M, N) random normal of the products' scale (sqrt K), or all NaN where beta is 0 (it must not be
    read); row_scale uniform in ±[0.25, 2], NaN-padded; all 16-bit tensors in `dtype`."""
    import numpy as np

    rng = np.random.default_rng(seed)
    cases = []
    for m, n, k, beta, slope in shapes:
        a, b = rng.standard_normal((m, k)), rng.standard_normal((n, k))
        c = np.full((m, n), np.nan) if beta == 0 else rng.standard_normal((m, n)) * k ** 0.5
        scale = np.full(padded(m), np.nan)
        scale[:m] = rng.uniform(0.25, 2.0, m) * rng.choice((-1.0, 1.0), m)
        cases.append((*(wire.tensor(x.astype(np.float32), dtype) for x in (a, b, c)),
                      wire.tensor(scale.astype(np.float32), "float32"), wire.poisoned((m, n), dtype),
                      float(beta), float(slope)))
    return cases


def _leaky(x: Any, slope: float) -> Any:
    import numpy as np

    return np.where(x > 0, x, slope * x)


def fused_variants(case: tuple[Any, ...]) -> dict[str, Any]:
    """The reference (key "") and what common mistakes compute instead, in float64 from the inputs as the learner's
    process held them: each key is the hint that names the mistake."""
    import numpy as np

    a = input_of(case)
    b = input_of(case[1:])
    c = input_of(case[2:])
    m = a.shape[0]
    scale = wire.decode(case[3]["$tensor"]["array"]).astype(np.float64)[:m, None]
    beta, slope = float(np.float32(case[5])), float(np.float32(case[6]))
    acc = a @ b.T
    bc = 0.0 if beta == 0 else beta * c
    x = scale * acc + bc
    out = {"": _leaky(x, slope),
           "row_scale is not applied": _leaky(acc + bc, slope),
           "row_scale multiplies beta · C too; it scales the accumulators only": _leaky(scale * (acc + bc), slope),
           "the activation is a plain ReLU: slope is not used": _leaky(x, 0.0),
           "no activation: leaky_relu is not applied": x,
           "the activation comes before the row scale; it comes last": scale * _leaky(acc, slope) + bc,
           "beta · C is missing": _leaky(scale * acc, slope)}
    if beta != 0:
        out["C is added without its factor beta"] = _leaky(scale * acc + c, slope)
    return out


def _bounded(got: Any, ref: Any, dtype: str) -> tuple[bool, str]:
    """Whether `got` (16-bit values, as float) is `ref` within the course launcher's bounds for `dtype`, and the
    numbers that say so."""
    import numpy as np

    from cutecourse.kernels.gemm.tolerances import BOUNDS

    frobenius, elementwise = BOUNDS[dtype]
    rel = relative_error(got, ref)
    rms = max(float(np.linalg.norm(ref)) / max(ref.size, 1) ** 0.5, 1e-300)
    worst = float(np.abs(got - ref).max()) / rms if np.isfinite(got).all() else float("inf")
    return rel <= frobenius and worst <= elementwise, (f"relative error {rel:.2e} (bound {frobenius:.0e}), worst "
                                                       f"element {worst:.2e}·rms (bound {elementwise:.0e})")


def _nan_hint(got: Any, name: str, why: str) -> str | None:
    import numpy as np

    nan = np.isnan(got)
    if not nan.any():
        return None
    first = ", ".join(str(int(i)) for i in np.argwhere(nan)[0])
    return f"{int(nan.sum())} of {got.size} outputs are NaN (the first is {name}[{first}]): {why}"


def fused_hint(case: tuple[Any, ...], out: Any) -> str | None:
    """D against the float64 reference; where it is off, which common mistake it matches, if one."""
    import numpy as np

    variants = fused_variants(case)
    ref = variants.pop("")
    dtype = case[4]["$poisoned"]["dtype"]
    beta = case[5]
    got = np.asarray(out, dtype=np.float64)
    if got.shape != ref.shape:
        return f"D has shape {got.shape}, expected {ref.shape}"
    why = ("never written (is every tile in the grid, and the predicate right?)" if beta != 0 else
           "never written, or computed from C: with beta = 0, C is all NaN here and must not be read at all "
           "(0 · NaN is NaN); decide at run time, in the kernel, whether to read it")
    problem = _nan_hint(got, "D", why)
    if problem:
        return problem
    right, numbers = _bounded(got, ref, dtype)
    if right:
        return None
    mistake = next((name for name, value in variants.items() if _bounded(got, value, dtype)[0]), None)
    if mistake:
        return f"{numbers}; D matches what you get when {mistake}"
    return (f"{numbers}: some values are wrong (the row each scale belongs to? the element of C added to each "
            f"accumulator? D's rounding?)")


# --------------------------------------------------------------------------- 7.4 the vectorized store


THREADS = 32 * WARPS_M  # the given host's CTA
_SPECIAL = {"%tid.x": lambda t: t, "%laneid": lambda t: t % 32, "%warpid": lambda t: t // 32,
            "%ntid.x": lambda t: t * 0 + THREADS}
_SHARED_ACCESS = re.compile(r"^(?:st|ld)\.shared\b|^(?:stmatrix|ldmatrix)\.")


def _thread_values(stmts: list[ptx.Statement]) -> tuple[dict[str, Any], Any]:
    """Every integer and predicate register's value in each of the CTA's threads (numpy arrays over the thread
    index), for registers written once in the kernel, following what `ptx.evaluate` follows (mov, add, mul, mad,
    shifts, logic, selp, setp, cvt and shfl) from %tid.x and immediates; a shared-memory symbol stands for its
    window's start (0). Registers written more than once (a loop's counters) and values loaded from memory or
    computed in floating point are unknown (absent). Branches are not followed: every instruction counts as
    executed."""
    import numpy as np

    tid = np.arange(THREADS, dtype=np.int64)
    written = collections.Counter(register for statement in stmts for register in ptx.writes(statement))
    values: dict[str, Any] = {}

    def operand(token: str) -> Any:
        if token in _SPECIAL:
            return _SPECIAL[token](tid)
        if token.startswith(("%ctaid", "%tid.", "%ntid.", "%nctaid")):
            return tid * 0 + (1 if token.startswith("%n") else 0)
        if token.startswith("%"):
            return values.get(token)
        if ptx.immediate(token) is not None:
            return tid * 0 + ptx.immediate(token)
        if re.fullmatch(r"[A-Za-z_$][\w$]*", token):
            return tid * 0  # a symbol: the start of its window
        return None

    for statement in stmts:
        if not statement.operands or not re.fullmatch(r"%\w+", statement.operands[0]) or \
                written[statement.operands[0]] != 1:
            continue
        value = ptx.evaluate(statement.opcode, [operand(o) for o in statement.operands[1:]], tid)
        if value is not None and statement.guard is not None:
            condition = values.get(statement.guard.lstrip("!"))
            value = None if condition is None else value  # a guarded write: its value only where the guard holds
            if value is not None:
                value = np.where(~condition if statement.guard.startswith("!") else condition, value, 0)
        if value is not None:
            values[statement.operands[0]] = value
    return values, tid


def _shared_bytes(statement: ptx.Statement, values: dict[str, Any], tid: Any) -> tuple[str, Any] | None:
    """("st" or "ld", per-thread sets of the shared-memory byte addresses the instruction touches), or ("?", None)
    when an address cannot be followed; None for an instruction that is no shared-memory access."""
    opcode = statement.opcode
    if not _SHARED_ACCESS.match(opcode):
        return None
    kind = "st" if opcode.startswith(("st", "stmatrix")) else "ld"
    address = ptx.address(next(o for o in statement.operands if o.startswith("[")))
    start = None if address is None else values.get(address[0]) if address[0].startswith("%") else tid * 0
    if start is None:
        return "?", None
    start = start + address[1]
    parts = opcode.split(".")
    if parts[0] in ("stmatrix", "ldmatrix"):  # 16 bytes at each address of the lanes that give one (8 per matrix)
        lanes = 8 * int(next(p for p in parts if re.fullmatch(r"x\d", p))[1:])
        width, active = 16, tid % 32 < lanes
    else:
        vector = next((int(p[1:]) for p in parts if re.fullmatch(r"v\d", p)), 1)
        width = vector * next(int(p[1:]) for p in reversed(parts) if re.fullmatch(r"[bsu](?:8|16|32|64)", p)) // 8
        active = tid >= 0
    return kind, [set(range(int(s), int(s) + width)) if on else set() for s, on in zip(start, active)]


def staging_hint(code: str) -> str | None:
    """Every shared-memory byte each warp reads back after the K loop, simulated for each of the CTA's threads from
    the PTX's own address arithmetic, against the bytes each warp staged there: with only a warp's barrier between the
    writes and the reads, a warp may read only what it wrote itself."""
    lines = code.splitlines()
    start = _epilogue_start(lines)
    stmts = ptx.statements(code)
    values, tid = _thread_values(stmts)
    staged = [set() for _ in range(WARPS_M)]
    read = [set() for _ in range(WARPS_M)]
    for statement in stmts:
        access = _shared_bytes(statement, values, tid) if statement.line >= start else None
        if access is None:
            continue
        kind, per_thread = access
        if per_thread is None:
            return (f"the check could not follow the shared-memory address of `{lines[statement.line].strip()}` for "
                    f"every thread: it "
                    f"follows straight-line code, so write the epilogue's loops with cutlass.range_constexpr (as the "
                    f"worked example does)")
        for t, addresses in enumerate(per_thread):
            (staged if kind == "st" else read)[t // 32].update(addresses)
    for warp in range(WARPS_M):
        for other in range(WARPS_M):
            foreign = read[warp] & staged[other] if other != warp else set()
            if foreign:
                return (f"warp {warp} reads back {len(foreign)} bytes of the staged tile that warp {other} wrote, "
                        f"with only a warp's barrier between: bar.warp.sync orders the lanes of one warp, so warp "
                        f"{other} may not have written them yet. Which rows of the tile does warp {warp} stage, and "
                        f"which does it read back?")
        missing = read[warp] - set().union(*staged)
        if missing:
            return (f"warp {warp} reads back {len(missing)} bytes of shared memory that no thread staged after the K "
                    f"loop: is the tile read back with the layout it was written with?")
    return None


def vector_ptx_hint(code: Any) -> str | None:
    """What is missing from, or wrong in, the PTX of the staged, vectorized store; None if it has what 7.4 asks."""
    code, problem = _kernel_ptx(code)
    if problem:
        return problem
    stores = _accesses(code, "st")
    if not stores:
        return "no st.global: D is never written"
    narrow = sorted({bits for _, bits in stores if bits != 128})
    if narrow:
        return (f"D is written with {sum(1 for _, bits in stores if bits != 128)} st.global of {narrow} bits; each "
                f"store should move 16 bytes (st.global.v4): 8 consecutive 16-bit values of one row")
    if not ptx.count(code, "st.shared") or not ptx.count(code, "ld.shared.v4"):
        return (f"the PTX has {ptx.count(code, 'st.shared')} st.shared and {ptx.count(code, 'ld.shared.v4')} "
                f"ld.shared.v4: a thread's accumulators are pairs of columns, so the 16-byte row vectors come from "
                f"the tile staged in shared memory (sD) and read back a vector at a time")
    if _unguarded(code, "st"):
        return (f"{_unguarded(code, 'st')} of the st.global.v4 are not behind a predicate: on a ragged edge tile "
                f"they write outside D; test each vector's coordinate against D's shape (N is a multiple of 8, so "
                f"a vector is wholly inside or wholly outside)")
    lines = code.splitlines()
    tail = lines[_epilogue_start(lines):]
    cta = sum(1 for line in tail if re.match(r"^\s*(bar|barrier)\.(sync|cta\.sync)\b", line.strip()))
    if cta:
        return (f"the epilogue has {cta} CTA barrier(s) (bar.sync after the K loop); here each warp stages and reads "
                f"back its own band of rows, so it waits for no other warp: the staged tile needs a barrier of the "
                f"warp only")
    first_read = next(i for i, line in enumerate(tail) if re.match(r"^\s*(@!?%\w+\s+)?ld\.shared", line))
    writes = [i for i, line in enumerate(tail[:first_read]) if re.match(r"^\s*(@!?%\w+\s+)?st\.shared", line)]
    if not any("bar.warp.sync" in line for line in tail[writes[-1] if writes else 0:first_read]):
        return ("nothing orders the staged writes before the reads: a lane reads back 16 bytes that other lanes of "
                "its warp wrote, so the warp must synchronise between the two")
    return staging_hint(code)


def vector_ptx_case(dtype: str, arch: str) -> tuple[Any, ...]:
    """A PTX case: the arch, then CPU stand-ins of A (M, K), B (N, K) and D (M, N), all in `dtype`."""
    import numpy as np

    return (arch, *(wire.tensor(np.zeros(s, np.float32), dtype, "cpu") for s in ((64, 96), (64, 96), (64, 64))))


def vector_cases(seed: int, shapes: list[tuple[int, int, int]], dtype: str) -> list[tuple[Any, ...]]:
    """(A, B, poisoned D) per (M, N, K): random normal A (M, K) and B (N, K), D (M, N) NaN, all in `dtype`."""
    import numpy as np

    rng = np.random.default_rng(seed)
    return [(wire.tensor(rng.standard_normal((m, k)).astype(np.float32), dtype),
             wire.tensor(rng.standard_normal((n, k)).astype(np.float32), dtype), wire.poisoned((m, n), dtype))
            for m, n, k in shapes]


def vector_hint(case: tuple[Any, ...], out: Any) -> str | None:
    """D = A @ B.T against the float64 product, within the bounds of D's dtype."""
    import numpy as np

    ref = input_of(case) @ input_of(case[1:]).T
    got = np.asarray(out, dtype=np.float64)
    if got.shape != ref.shape:
        return f"D has shape {got.shape}, expected {ref.shape}"
    problem = _nan_hint(got, "D", "never written: is every band of every tile stored, and does the predicate test "
                                  "the vector's coordinate in D (not in the tile)?")
    if problem:
        return problem
    right, numbers = _bounded(got, ref, case[2]["$poisoned"]["dtype"])
    if right:
        return None
    return (f"{numbers}: values land in the wrong places or are lost on the way; is the staged tile read back with "
            f"the layout it was written with, and stored at the same (row, column)?")


# --------------------------------------------------------------------------- shapes


def random_shapes(rng: random.Random, count: int) -> list[tuple[int, int, int]]:
    """(M, N, K): M any, N and K multiples of 8 (the launcher's promise) and mostly not of the tile."""
    return [(rng.randint(1, 300), VECTOR * rng.randint(1, 40), VECTOR * rng.randint(1, 60)) for _ in range(count)]


def random_fused(rng: random.Random, count: int) -> list[tuple[int, int, int, float, float]]:
    """(M, N, K, beta, slope): random shapes, beta 0 about one time in three, slopes in [0.05, 0.5) (large enough that
    a plain ReLU is out of bounds even for bf16)."""
    return [(m, n, k, 0.0 if rng.random() < 1 / 3 else round(rng.uniform(-2, 2), 3), round(rng.uniform(0.05, 0.5), 3))
            for m, n, k in random_shapes(rng, count)]


_rng = random.Random(703)
#: The hidden tests' shapes of 7.3 (M, N, K, beta, slope): a single element; ragged M, N and K below one tile; exact
#: tiles; single rows and columns of tiles; beta = 0 (C all NaN) on edge tiles and whole ones; a negative beta; a slope
#: of 0 (ReLU) and a large one; then random ones.
FUSED_SHAPES = [(1, 8, 8, 0.0, 0.2), (65, 72, 24, 0.5, 0.1), (64, 64, 64, 0.0, 0.3), (127, 136, 200, -1.25, 0.25),
                (3, 264, 16, 0.0, 0.0), (200, 8, 520, 2.0, 0.0), (130, 200, 136, 0.0, 0.9)] + random_fused(_rng, 7)
#: The hidden tests' shapes of 7.4 (M, N, K): single rows, columns and elements of a tile, bands of a tile cut by M
#: (M = 17, 33: a warp with rows inside and a warp with none), N of one vector, exact tiles, then random ones.
VECTOR_SHAPES = [(1, 8, 8), (17, 72, 24), (33, 8, 64), (64, 64, 64), (127, 136, 200), (3, 264, 16), (200, 8, 520),
                 (130, 200, 136)] + random_shapes(_rng, 6)
#: The notebook's checks: fewer and smaller, the same kinds.
FUSED_CHECK_SHAPES = [(64, 64, 32, 0.0, 0.2), (100, 72, 40, 0.75, 0.1), (7, 8, 8, 0.0, 0.0), (130, 136, 264, -0.5, 0.3)]
VECTOR_CHECK_SHAPES = [(64, 64, 32), (100, 72, 40), (7, 8, 8), (130, 136, 264)]


def _judge_fused_ptx(case: tuple[Any, ...], value: Any, outputs: list[Any]) -> str | None:
    return fused_ptx_hint(value)


def _judge_fused(case: tuple[Any, ...], value: Any, outputs: list[Any]) -> str | None:
    (out,) = outputs
    return fused_hint(case, out)


def _judge_vector_ptx(case: tuple[Any, ...], value: Any, outputs: list[Any]) -> str | None:
    return vector_ptx_hint(value)


def _judge_vector(case: tuple[Any, ...], value: Any, outputs: list[Any]) -> str | None:
    (out,) = outputs
    return vector_hint(case, out)


OPTIONS = (("vector", VECTOR),)
fused_epilogue_ptx = Check("fused_epilogue_ptx", "fused_host",
                           lambda: [fused_ptx_case(d, a) for d, a in L5.CHECK_PTX_CASES], _judge_fused_ptx,
                           via="ptx", options=OPTIONS)
fused_epilogue_gemm = Check("fused_epilogue_gemm", "fused_host",
                            lambda: fused_cases(733, FUSED_CHECK_SHAPES, "float16"), _judge_fused, gpu=80,
                            via="launch", options=OPTIONS)
vector_store_ptx = Check("vector_store_ptx", "vector_host",
                         lambda: [vector_ptx_case(d, a) for d, a in L5.CHECK_PTX_CASES], _judge_vector_ptx,
                         via="ptx", options=OPTIONS)
vector_store_gemm = Check("vector_store_gemm", "vector_host",
                          lambda: vector_cases(744, VECTOR_CHECK_SHAPES, "bfloat16"), _judge_vector, gpu=80,
                          via="launch", options=OPTIONS)
