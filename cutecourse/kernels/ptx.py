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
from typing import Any

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
