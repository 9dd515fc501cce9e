"""A kernel answer's compiled module, read by the grader as data: what a kernel exercise is judged on.

The learner's process compiles the learner's ``@cute.jit`` host (that runs the learner's Python: tracing *is* running
it) and sends back what the DSL exported (`harness.module`): an object file with the host's launch code and the
kernels' cubin inside, and the PTX of the same compile. Nothing the learner's process says a kernel computed is ever
judged. Here the grader reads those bytes, without loading or running them:

- the object is a relocatable ELF file for this machine whose only undefined symbols are the launch functions of the
  DSL's runtime (`RUNTIME_IMPORTS`): host code the DSL wrote calls nothing else, so an object that would copy memory,
  open a library or call torch is refused before anything loads it;
- the cubin is the fatbin the DSL embeds (``kernels_binary``), one uncompressed ELF for an NVIDIA GPU;
- the PTX belongs to that cubin: its ``.entry`` kernels are the cubin's entry functions, its ``.target`` the cubin's
  SM or an older one (the GPU's assembler takes older PTX). PTX text on its own, or PTX next to another compile's
  module, is refused.

The PTX checks then read `Module.ptx`, and the GPU judges hand `Module.object` to the grader's launcher
(:mod:`launcher`), a process that runs no learner Python, on the grader's tensors.

What this cannot tell on a machine without a GPU: whether the cubin really is what that PTX compiles to (there is no
PTX assembler to compare with). A hand-made module whose PTX was written to please a census passes the PTX checks
there; that is why a verdict without a GPU is provisional, and the report says so.
"""

from __future__ import annotations

import platform
import re
import struct
from dataclasses import dataclass
from typing import Any

#: The undefined symbols of an object the DSL exports (nvidia-cutlass-dsl 4.8, every kernel exercise's solution for
#: sm_80 and sm_90a): the CUDA runtime's library, attribute and launch calls, through the DSL's runtime library.
RUNTIME_IMPORTS = frozenset({
    "_GLOBAL_OFFSET_TABLE_", "_cuKernelGetAttribute", "_cudaDeviceGetAttribute", "_cudaFuncSetAttribute",
    "_cudaGetDevice", "_cudaKernelSetAttributeForDevice", "_cudaLaunchKernelEx", "_cudaLibraryGetKernel",
    "_cudaLibraryLoadData"})
#: The symbol that holds the kernels' fatbin in the DSL's export.
CUBIN_SYMBOL = "kernels_binary"
#: The largest object file the grader reads (the DSL's are tens of KiB).
MAX_OBJECT_BYTES = 64 * 2**20

_ET_REL, _ET_EXEC = 1, 2
_EM_CUDA = 190
_HOST_MACHINES = {"x86_64": 62, "amd64": 62, "aarch64": 183, "arm64": 183}
_SHT_SYMTAB = 2
_SHN_UNDEF = 0
_STT_FUNC = 2
_STO_CUDA_ENTRY = 0x10
_FATBIN_MAGIC = 0xBA55ED50
_ENTRY = re.compile(r"^\s*(?:\.visible\s+)?\.entry\s+([\w$]+)", re.MULTILINE)
_TARGET = re.compile(r"^\s*\.target\s+sm_(\d+)", re.MULTILINE)


class ModuleError(ValueError):
    """What the learner's process sent is not a module the DSL compiled; the message says what is wrong."""


@dataclass(frozen=True)
class Module:
    """A checked module: the object file's bytes, the PTX of its compile, its kernels' names and SM."""

    object: bytes
    ptx: str
    kernels: tuple[str, ...]
    sm: int


@dataclass(frozen=True)
class _Symbol:
    name: str
    info: int
    other: int
    section: int
    value: int
    size: int


class _Elf:
    """The parts of an ELF64 little-endian file the checks need: its header, sections and symbols."""

    def __init__(self, data: bytes, what: str):
        self.data, self.what = data, what
        if len(data) < 64 or data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
            raise ModuleError(f"{what} is not a 64-bit little-endian ELF file")
        self.type, self.machine = struct.unpack_from("<HH", data, 16)
        shoff = struct.unpack_from("<Q", data, 0x28)[0]
        shentsize, shnum = struct.unpack_from("<HH", data, 0x3A)
        if shentsize != 64 or shoff + shnum * 64 > len(data):
            raise ModuleError(f"{what} has a malformed section table")
        self.sections = [struct.unpack_from("<IIQQQQIIQQ", data, shoff + 64 * i) for i in range(shnum)]

    def _bytes(self, index: int) -> bytes:
        if not 0 <= index < len(self.sections):
            raise ModuleError(f"{self.what} names section {index}, which it does not have")
        offset, size = self.sections[index][4], self.sections[index][5]
        if offset + size > len(self.data):
            raise ModuleError(f"{self.what} has a section past its end")
        return self.data[offset:offset + size]

    def symbols(self) -> list[_Symbol]:
        found = []
        for index, header in enumerate(self.sections):
            if header[1] != _SHT_SYMTAB:
                continue
            table, names = self._bytes(index), self._bytes(header[6])
            for at in range(0, len(table) - 23, 24):
                name, info, other, section, value, size = struct.unpack_from("<IBBHQQ", table, at)
                end = names.find(b"\0", name)
                found.append(_Symbol(names[name:end if end >= 0 else None].decode("latin-1"), info, other, section,
                                     value, size))
        return found

    def contents(self, symbol: _Symbol) -> bytes:
        section = self._bytes(symbol.section)
        if symbol.value + symbol.size > len(section):
            raise ModuleError(f"{self.what}'s symbol {symbol.name} lies past its section")
        return section[symbol.value:symbol.value + symbol.size]


def _cubin(fatbin: bytes) -> tuple[bytes, int]:
    """The one ELF cubin in the DSL's fatbin, and the SM its entry says it is for."""
    if len(fatbin) < 16 or struct.unpack_from("<I", fatbin, 0)[0] != _FATBIN_MAGIC:
        raise ModuleError("the module's kernels are not a CUDA fatbin")
    header = struct.unpack_from("<H", fatbin, 6)[0]
    if header + 32 > len(fatbin):
        raise ModuleError("the module's fatbin is cut short")
    kind, _, entry_header, payload = struct.unpack_from("<HHIQ", fatbin, header)
    sm = struct.unpack_from("<I", fatbin, header + 28)[0]  # the entry's SM (80, 90); the ELF flags vary by CUDA
    start = header + entry_header
    cubin = fatbin[start:start + payload]
    if kind != 2 or cubin[:4] != b"\x7fELF":
        raise ModuleError("the module's fatbin holds no plain cubin (PTX only, or compressed): the DSL embeds one")
    return cubin, sm


def _names(names: tuple[str, ...]) -> str:
    return ", ".join(n if len(n) <= 40 else f"{n[:30]}…{n[-8:]}" for n in names[:3]) or "none"


def read(value: Any) -> Module:
    """The Module in what a learner process sent for `harness.module` ({"object": uint8 array, "ptx": text}); a
    ModuleError naming what is wrong otherwise."""
    import numpy as np

    if not isinstance(value, dict) or set(value) != {"object", "ptx"}:
        raise ModuleError("the learner's process sent no compiled module (the answer's compile was replaced?)")
    raw, ptx = value["object"], value["ptx"]
    if not isinstance(raw, np.ndarray) or raw.dtype != np.uint8 or raw.ndim != 1 or not isinstance(ptx, str):
        raise ModuleError("the learner's process sent no compiled module (the answer's compile was replaced?)")
    if raw.size > MAX_OBJECT_BYTES:
        raise ModuleError(f"the module has {raw.size} bytes; a compiled answer has at most {MAX_OBJECT_BYTES}")
    data = raw.tobytes()
    host = _Elf(data, "the module")
    machine = _HOST_MACHINES.get(platform.machine().lower())
    if host.type != _ET_REL or host.machine != machine:
        raise ModuleError(f"the module is not a relocatable object for this machine ({platform.machine()})")
    symbols = host.symbols()
    imports = {s.name for s in symbols if s.section == _SHN_UNDEF and s.name}
    foreign = sorted(imports - RUNTIME_IMPORTS)
    if foreign:
        raise ModuleError(f"the module's host code calls {', '.join(foreign[:5])}, which code the DSL compiles does "
                          f"not: it calls only the CUDA runtime's launch functions")
    binaries = [s for s in symbols if s.name == CUBIN_SYMBOL and s.section != _SHN_UNDEF]
    if len(binaries) != 1:
        raise ModuleError("the module embeds no kernels (no cubin): was the host compiled with its kernel?")
    cubin, sm = _cubin(host.contents(binaries[0]))
    device = _Elf(cubin, "the module's cubin")
    if device.type != _ET_EXEC or device.machine != _EM_CUDA:
        raise ModuleError("the module's cubin is not code for an NVIDIA GPU")
    kernels = tuple(sorted(s.name for s in device.symbols()
                           if s.info & 0xF == _STT_FUNC and s.other & _STO_CUDA_ENTRY))
    entries, targets = tuple(sorted(_ENTRY.findall(ptx))), [int(t) for t in _TARGET.findall(ptx)]
    # PTX for an older SM is assembled for the GPU at hand (compute capability 8.0 PTX into an sm_90 cubin).
    if entries != kernels or len(targets) != 1 or targets[0] > sm:
        raise ModuleError(f"the PTX sent with the module is not its compile's: its PTX is for sm_"
                          f"{','.join(map(str, targets)) or '?'} with {len(entries)} kernel(s) "
                          f"({_names(entries)}), its cubin for sm_{sm} with {len(kernels)} ({_names(kernels)})")
    return Module(data, ptx, kernels, sm)
