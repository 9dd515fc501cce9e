"""Compile kernels without a GPU and count the instructions in their PTX.

`cute.compile` emits PTX for any arch on a machine with no GPU; the census tells whether the instructions a lesson
promises (``ld.global.v4``, ``mma.sync``, ``cp.async``, ``wgmma``...) are really there.
"""

from __future__ import annotations

import collections
import os
import re
import shlex
import tempfile
from dataclasses import dataclass
from typing import Any, Callable, Iterator

#: An instruction line in PTX: optional predicate, then the opcode with its dotted modifiers.
_INSTRUCTION = re.compile(r"^\s*(?:@!?%\w+\s+)?([a-z][\w.:]*)", re.MULTILINE)
_DIRECTIVE_OR_LABEL = re.compile(r"^[.$]|^\w+:$")


def check_arch(arch: str) -> None:
    """ValueError unless `arch` names an SM arch ("sm_80", "sm_90a", "sm_100f")."""
    if not isinstance(arch, str) or not re.fullmatch(r"sm_\d{2,3}[af]?", arch):
        raise ValueError(f"arch={arch!r} is not an SM arch name; use one like 'sm_80' or 'sm_90a'")


def ptx_of(compile_fn: Any, arch: str) -> str:
    """PTX of what ``compile_fn(options)`` compiles for `arch` (e.g. ``"sm_80"``, ``"sm_90a"``): `compile_fn` passes
    the options string on to ``cute.compile``, so any kernel module's ``compile(config, ..., options=...)`` fits.

    >>> # ptx_of(lambda options: copy_tiled.compile(config, x, y, stream, options), "sm_80")  # doctest: +SKIP
    """
    check_arch(arch)
    return compiled_with_ptx(compile_fn, arch)[1]


def compiled_with_ptx(compile_fn: Any, arch: str | None) -> tuple[Any, str]:
    """(what ``compile_fn(options)`` compiled, its PTX), for `arch`, or for this machine's GPU where `arch` is None."""
    target = f"--gpu-arch {arch} " if arch else ""
    with tempfile.TemporaryDirectory() as dump:
        compiled = compile_fn(f"{target}--keep-ptx --dump-dir {option_path(dump)}")
        ptx = compiled.__ptx__
    if not ptx:
        raise RuntimeError(f"the DSL returned no PTX for {arch or 'this GPU'}; is nvidia-cutlass-dsl installed "
                           "correctly? Run: cutecourse doctor")
    return compiled, ptx


def _on_windows() -> bool:
    return os.name == "nt"


def option_path(path: str) -> str:
    """`path` as one word of a ``cute.compile`` options string, which the DSL splits as a POSIX shell would, having
    first doubled every backslash on Windows: a temporary folder such as ``C:\\Users\\Jane Doe\\AppData\\Local\\Temp``
    holds a space, and Windows paths hold no double quote."""
    return f'"{path}"' if _on_windows() else shlex.quote(path)


def compile_ptx(jit_fn: Any, *args: Any, arch: str) -> str:
    """PTX of `jit_fn` compiled for `arch` (e.g. ``"sm_80"``, ``"sm_90a"``) with the given (fake) arguments.

    >>> # compile_ptx(host, fake_x, fake_y, make_fake_stream(), arch="sm_90a")  # doctest: +SKIP
    """
    import cutlass.cute as cute

    return ptx_of(lambda options: cute.compile(jit_fn, *args, options=options), arch)


def census(ptx: str) -> collections.Counter[str]:
    """How many times each opcode (with its modifiers, e.g. ``ld.global.v4.f32``) appears in `ptx`."""
    counts: collections.Counter[str] = collections.Counter()
    for match in _INSTRUCTION.finditer(ptx):
        opcode = match.group(1)
        if not _DIRECTIVE_OR_LABEL.match(opcode) and not opcode.endswith(":"):
            counts[opcode] += 1
    return counts


_GUARD = re.compile(r"^\s*@!?%p\w*\s+(?:bra|ld\.global|st\.global)", re.MULTILINE)


def guarded(ptx: str) -> int:
    """How many predicated branches or predicated global accesses `ptx` has: each guards an access from a thread
    whose element lies outside the tensor."""
    return len(_GUARD.findall(ptx))


def count(ptx: str, prefix: str) -> int:
    """Number of instructions whose opcode starts with `prefix` (``count(ptx, "ld.global.v4")``)."""
    return sum(n for op, n in census(ptx).items() if op.startswith(prefix))


# ------------------------------------------------------------------ statements, and where a register comes from

REGISTER = re.compile(r"%\w+")
IMMEDIATE = re.compile(r"-?(?:0[xX][0-9a-fA-F]+|\d+)[uU]?")
_COMMENT = re.compile(r"//[^\n]*|/\*.*?\*/", re.DOTALL)
_BLOCK = re.compile(r"^[ \t]*[{}][ \t]*$", re.MULTILINE)  # a brace alone on its line opens or closes a block
_LABEL = re.compile(r"\s*([$\w]+)\s*:(?!:)")
_PREDICATE = re.compile(r"@(!?%?\w+)\s+")
_BODY = re.compile(r"(\S+)\s*(.*)", re.DOTALL)
_ADDRESS = re.compile(r"\[\s*([%$\w.]+)\s*(?:\+\s*(-?(?:0[xX][0-9a-fA-F]+|\d+)))?\s*\]")
#: Opcodes whose first operand is read, not written (its register, if any, is a source).
_READS_FIRST = ("bar", "bra")


@dataclass(frozen=True)
class Statement:
    """One PTX statement: the line its opcode stands on (0-based, as in ``ptx.splitlines()``), the labels before it,
    its guard predicate (``"%p1"``, ``"!%p1"``; None when it runs unguarded), its opcode with the modifiers, and its
    operands, whitespace collapsed (a ``{...}`` vector and a ``[...]`` address are one operand each)."""

    line: int
    labels: tuple[str, ...]
    guard: str | None
    opcode: str
    operands: tuple[str, ...]


def split_operands(text: str) -> list[str]:
    """The comma-separated operands of `text`, braces (vectors) and brackets (addresses) kept whole."""
    out: list[str] = []
    depth, current = 0, ""
    for ch in text:
        depth += (ch in "{[") - (ch in "}]")
        if ch == "," and depth == 0:
            out.append(" ".join(current.split()))
            current = ""
        else:
            current += ch
    return out + [" ".join(current.split())] if current.strip() else out


def statements(ptx: str) -> list[Statement]:
    """The statements of `ptx` in order, comments dropped, a directive (``.reg``, ``.entry``...) kept with its opcode
    (its dot included): each ends at its ``;`` or at a block's brace alone on its line."""
    text = _BLOCK.sub(";", _COMMENT.sub(lambda m: "\n" * m.group().count("\n"), ptx))
    found: list[Statement] = []
    labels: list[str] = []
    line = 0
    for chunk in text.split(";"):
        at = 0
        while (label := _LABEL.match(chunk, at)) is not None:
            labels.append(label.group(1))
            at = label.end()
        at += len(chunk[at:]) - len(chunk[at:].lstrip())
        guard = _PREDICATE.match(chunk, at)
        body = _BODY.match(chunk, guard.end() if guard else at)
        if body is not None:
            found.append(Statement(line + chunk.count("\n", 0, at), tuple(labels), guard and guard.group(1),
                                   body.group(1), tuple(split_operands(body.group(2)))))
            labels = []
        line += chunk.count("\n")
    return found


def writes(statement: Statement) -> list[str]:
    """The registers `statement` writes: those of its first operand (a register, ``%r1|%p2``, or a vector of them),
    unless that operand is an address or the opcode only reads it (a branch, a barrier) or is a directive."""
    if not statement.operands or statement.opcode.startswith(".") or statement.operands[0].startswith("[") \
            or statement.opcode.startswith(_READS_FIRST):
        return []
    return REGISTER.findall(statement.operands[0])


def writer(stmts: list[Statement], register: str, before: int) -> int | None:
    """The index of the last statement before `before` that writes `register`, or None."""
    return next((i for i in range(before - 1, -1, -1) if register in writes(stmts[i])), None)


def trace(stmts: list[Statement], register: str, before: int,
          through: Callable[[Statement], list[str]]) -> Iterator[int]:
    """The statements that computed `register` as statement `before` reads it, depth first: its writer, then the
    writers of the registers ``through(writer)`` names (the sources the caller follows: none ends that branch), each
    as the statement that reads it sees it; each statement once."""
    todo, seen = [(register, before)], set()
    while todo:
        reg, at = todo.pop()
        i = writer(stmts, reg, at)
        if i is None or i in seen:
            continue
        seen.add(i)
        yield i
        todo += [(source, i) for source in through(stmts[i])]


def immediate(token: str) -> int | None:
    """The value of an integer immediate (``16``, ``-8``, ``0x1F``, ``3U``), or None for another operand."""
    return int(token.rstrip("uU"), 0) if IMMEDIATE.fullmatch(token) else None


def address(operand: str) -> tuple[str, int] | None:
    """(base, bytes added) of an address operand ``[%r1+16]``, ``[sym]``: a register or symbol and a constant; None
    for an operand that is no such address."""
    match = _ADDRESS.fullmatch(operand.strip())
    return None if match is None else (match.group(1), int(match.group(2) or "0", 0))


# ------------------------------------------------------------------ integer arithmetic, per thread

_TYPE = re.compile(r"^(?:[bsu](?:8|16|32|64)|pred)$")


def wrap(value: Any, bits: int, signed: bool) -> Any:
    """`value` (an int64 array) as a `bits`-wide integer, signed or not."""
    import numpy as np

    if bits >= 64:
        return value
    value = np.bitwise_and(value, (1 << bits) - 1)
    return np.where(value >= 1 << (bits - 1), value - (1 << bits), value) if signed else value


def evaluate(opcode: str, args: list[Any], tid: Any) -> Any:
    """What the integer or predicate instruction `opcode` computes from `args` (numpy arrays over the threads, int64
    or bool; None for an unknown one), wrapped to its type's width; `tid` (the threads' indices) serves ``shfl``. None
    where it is not followed: floating point, an unknown argument, an opcode outside mov, cvt(a), add, sub, mul, mad,
    div, rem, min, max, logic, shifts, setp, selp and shfl.idx."""
    import numpy as np

    parts = opcode.split(".")
    types = [p for p in parts if _TYPE.match(p)]
    bits = int(types[-1][1:]) if types and types[-1] != "pred" else 64
    signed = bool(types) and types[-1].startswith("s")
    op = parts[0]
    if any(a is None for a in args) or any(p.startswith("f") and p[1:].isdigit() for p in parts[1:]):
        return None
    unsigned = [np.bitwise_and(a, (1 << bits) - 1) if bits < 64 else a for a in args]
    if op in ("mov", "cvta") and len(args) == 1:
        return args[0]
    if op == "cvt" and len(types) == 2:
        source_bits, source_signed = int(types[1][1:]), types[1].startswith("s")
        return wrap(wrap(args[0], source_bits, source_signed), int(types[0][1:]), types[0].startswith("s"))
    if op == "shfl" and "idx" in parts and len(args) >= 2:
        lane = args[1] % 32
        return args[0][(tid // 32) * 32 + lane]
    if op == "selp":
        return np.where(args[2].astype(bool), args[0], args[1])
    if op == "setp":
        a, b = (unsigned if types[-1].startswith(("u", "b")) else args)[:2]
        compare = {"eq": a == b, "ne": a != b, "lt": a < b, "le": a <= b, "gt": a > b, "ge": a >= b,
                   "lo": a < b, "ls": a <= b, "hi": a > b, "hs": a >= b}
        return compare.get(parts[1])
    if types and types[-1] == "pred":
        logic = {"and": lambda a, b: a & b, "or": lambda a, b: a | b, "xor": lambda a, b: a ^ b}
        if op == "not":
            return ~args[0].astype(bool)
        return logic[op](args[0].astype(bool), args[1].astype(bool)) if op in logic else None
    wide = "wide" in parts
    result_bits = 2 * bits if wide else bits
    arithmetic = {
        "add": lambda a: a[0] + a[1], "sub": lambda a: a[0] - a[1], "mul": lambda a: a[0] * a[1],
        "mad": lambda a: a[0] * a[1] + a[2], "and": lambda a: a[0] & a[1], "or": lambda a: a[0] | a[1],
        "xor": lambda a: a[0] ^ a[1], "not": lambda a: ~a[0], "neg": lambda a: -a[0],
        "min": lambda a: np.minimum(a[0], a[1]), "max": lambda a: np.maximum(a[0], a[1]),
        "shl": lambda a: a[0] << np.minimum(a[1], 63),
    }
    if op == "shr":
        source = args[0] if signed else unsigned[0]
        return wrap(source >> np.minimum(args[1], 63), bits, signed)
    if op in ("div", "rem") and (args[1] != 0).all():
        a, b = (args if signed else unsigned)[:2]
        quotient = np.sign(a) * np.sign(b) * (np.abs(a) // np.abs(b))
        return wrap(quotient if op == "div" else a - b * quotient, bits, signed)
    if op in arithmetic:
        operands = args if signed or wide is False else unsigned
        return wrap(arithmetic[op](operands), result_bits, signed)
    return None
