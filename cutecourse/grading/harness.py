"""Compile, capture and launch a learner's kernel the course's way, so that what is judged is what the kernel did.

In a kernel exercise the learner writes a ``@cute.kernel`` and the ``@cute.jit`` host function that launches it; the
host takes CuTe tensors (made from row-major torch tensors, every extent dynamic), then any scalars, and last the
stream. The learner writes no launch wrapper and no PTX capture: checks, the grader and the hidden tests go through
`launch` and `ptx` here, in the learner's sandboxed process.

- The host is compiled from *stand-in* tensors of the same dtypes and ranks, before the real inputs exist in the
  process, so the learner's code never sees the data while it is traced. One compile serves every shape.
- ``ptx(host, "sm_90a", x, out)`` compiles for that arch on any machine and returns the PTX the DSL emitted.
- `restricted` tells whether an answer cell is kernel code only: the DSL, math, and the cell's own definitions;
  no torch, no imports inside functions, no dunder attributes, no reflection. A kernel answer that is more than
  kernel code is refused before it runs, with the line that is not.

>>> # launch(naive_host, x, out)          # x: (M, N) CUDA tensor, out: (N, M); runs the learner's kernel
>>> # ptx(naive_host, "sm_80", x, out)    # the PTX text, on a CPU too
"""

from __future__ import annotations

import ast
import functools
import sys
from dataclasses import dataclass
from typing import Any, Callable, Sequence

#: Modules a kernel answer may import (and nothing else): the DSL, math, typing helpers.
KERNEL_IMPORTS = ("cutlass", "math", "typing", "functools", "operator")
#: Names a kernel answer may not use: ways out of "kernel code" into the process.
KERNEL_FORBIDDEN_NAMES = frozenset({
    "__import__", "__builtins__", "builtins", "compile", "eval", "exec", "globals", "locals", "vars", "getattr",
    "setattr", "delattr", "open", "input", "breakpoint", "memoryview", "object", "type", "super", "help",
    "torch", "numpy", "np", "sys", "os", "gc", "inspect", "ctypes", "importlib", "subprocess", "threading",
    "cutecourse", "signal", "atexit", "io", "pathlib", "shutil", "pickle", "marshal", "weakref"})


@dataclass(frozen=True)
class TensorSpec:
    """What a compile needs to know of a tensor argument: dtype ("float32", ...), rank, device ("cuda"/"cpu")."""

    dtype: str
    ndim: int
    device: str


def _is_jit(fn: Any) -> bool:
    return callable(fn) and getattr(fn, "_decorator_kind", None) == "jit"


def _require_jit(host: Any) -> None:
    if not _is_jit(host):
        raise TypeError(f"expected your @cute.jit host function (it builds the layouts and launches the kernel), got "
                        f"{type(host).__name__} {getattr(host, '__name__', '')!r}: decorate it with @cute.jit")


def spec_of(value: Any) -> Any:
    """A torch tensor's TensorSpec; anything else (a scalar) as it is. Without importing torch: a process that has not
    imported it holds no tensor (a learner process compiling a module from stand-ins never needs it)."""
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(value, torch.Tensor):
        return TensorSpec(str(value.dtype).removeprefix("torch."), value.dim(), value.device.type)
    return value


def as_cute(t: Any, vector: int) -> Any:
    """A row-major tensor as CuTe sees it in the course: every extent dynamic, the last divisible by `vector`, the base
    aligned to one vector, 32-bit strides (what ``kernels.launch.cute_tensor`` makes of a matrix). `t` is a torch
    tensor, or anything with ``__dlpack__``, ``dim()`` and ``element_size()`` (the grader's launcher has no torch)."""
    from cutlass.cute.runtime import from_dlpack

    x = from_dlpack(t, assumed_align=vector * t.element_size(), use_32bit_stride=True)
    order = tuple(range(t.dim()))  # row-major: the last mode is the contiguous one
    for mode in order:
        x = x.mark_compact_shape_dynamic(mode=mode, stride_order=order,
                                         divisibility=vector if mode == t.dim() - 1 else 1)
    return x


def _stand_ins(examples: list[Any], vector: int) -> list[Any]:
    """CuTe tensors of the examples' dtypes and ranks, on fresh GPU memory: what the host is traced with."""
    import torch

    out = []
    for example in examples:
        if isinstance(example, TensorSpec):
            shape = (4,) * (example.ndim - 1) + (4 * vector,)
            out.append(as_cute(torch.empty(shape, dtype=getattr(torch, example.dtype), device="cuda"), vector))
        else:
            out.append(example)
    return out


def _fake_stand_ins(examples: list[Any], vector: int) -> list[Any]:
    """What `_as_cute` makes of a row-major tensor, without memory: a global-memory tensor of the example's dtype
    and rank, every extent dynamic, the last divisible by `vector`, the base aligned to one vector. The PTX is that
    of the launch, on a machine without a GPU (a CPU tensor would be in the generic address space, which cp.async
    and TMA refuse)."""
    import cutlass.cute as cute
    from cutlass.cute.runtime import make_fake_tensor

    out = []
    for example in examples:
        if isinstance(example, TensorSpec):
            n = example.ndim
            dtype = _cute_dtype(example.dtype)
            shape = tuple(cute.sym_int(divisibility=vector if mode == n - 1 else 1) for mode in range(n))
            stride = tuple(cute.sym_int(divisibility=vector) for _ in range(n - 1)) + (1,)
            out.append(make_fake_tensor(dtype, shape, stride, assumed_align=vector * dtype.width // 8))
        else:
            out.append(example)
    return out


_COMPILED: dict[Any, Any] = {}


#: The DSL's element type of each torch dtype name, as from_dlpack maps it (test_kernel_judge holds the two to each
#: other): a compile from stand-ins needs no torch, whose import takes a learner process over a CPU-second.
CUTE_DTYPES = {"float16": "Float16", "bfloat16": "BFloat16", "float32": "Float32", "float64": "Float64",
               "int8": "Int8", "uint8": "Uint8", "int16": "Int16", "int32": "Int32", "int64": "Int64",
               "float8_e4m3fn": "Float8E4M3FN", "float8_e5m2": "Float8E5M2", "bool": "Boolean"}


@functools.lru_cache(maxsize=None)
def _cute_dtype(name: str) -> Any:
    """The DSL's element type of a torch dtype name ("float16" -> Float16), as from_dlpack maps it."""
    if name in CUTE_DTYPES:
        import cutlass

        return getattr(cutlass, CUTE_DTYPES[name])
    import torch
    from cutlass.cute.runtime import from_dlpack

    return from_dlpack(torch.empty(1, dtype=getattr(torch, name))).element_type


def prepare(host: Any, examples: list[Any], vector: int = 1) -> Callable[..., None]:
    """The learner's `host` compiled for arguments like `examples` (TensorSpecs and scalars), as a function of the
    real torch tensors and scalars that launches it on the current stream. Compiled once per signature."""
    _require_jit(host)
    from cutecourse.kernels import launch as course_launch

    device = next((e.device for e in examples if isinstance(e, TensorSpec)), "cuda")
    if device != "cuda":
        raise ValueError(f"kernels run on the GPU; the tensors are on {device}: move them with .cuda()")
    key = (host, tuple(e if isinstance(e, TensorSpec) else type(e) for e in examples), vector)
    compiled = _COMPILED.get(key)
    if compiled is None:
        import cutlass.cute as cute

        compiled = _COMPILED[key] = cute.compile(host, *_stand_ins(examples, vector),
                                                 course_launch.current_stream())

    def run(*args: Any) -> None:
        import torch

        if any(isinstance(a, torch.Tensor) and a.numel() == 0 for a in args):
            return
        compiled(*[as_cute(a, vector) if isinstance(a, torch.Tensor) else a for a in args],
                 course_launch.current_stream())

    return run


def launch(host: Any, *args: Any, vector: int = 1) -> None:
    """Compile the learner's `host` for these arguments' dtypes (once) and launch it on them.

    `vector`: elements per access the host may assume (the last extent of each tensor is promised divisible by it,
    and its base aligned to it): 8 for 128-bit copies of 16-bit data."""
    prepare(host, [spec_of(a) for a in args], vector)(*args)


def ptx(host: Any, arch: str, *args: Any, vector: int = 1) -> str:
    """The PTX of the learner's `host` compiled for `arch` (e.g. "sm_80", "sm_90a") for arguments like these (their
    dtypes and ranks; tensors may be on the CPU). Works on any machine with the DSL."""
    _require_jit(host)
    from cutlass.cute.runtime import make_fake_stream

    from cutecourse.kernels import ptx as course_ptx

    examples = [spec_of(a) for a in args]
    return course_ptx.compile_ptx(host, *_fake_stand_ins(examples, vector), make_fake_stream(), arch=arch)


#: The name the grader's launcher looks a compiled module's host function up by (the DSL's export prefixes its
#: symbols with it).
MODULE_PREFIX = "answer"


def module(host: Any, arch: str | None, *args: Any, vector: int = 1) -> dict[str, Any]:
    """The learner's `host` compiled for arguments like these, as the DSL exports it for loading elsewhere:
    ``{"object": the object file's bytes (the host launch code, the kernels' cubin inside), "ptx": that compile's
    PTX}``. With `arch` (e.g. "sm_90a") it compiles from stand-ins without memory, on any machine; with None, for
    this process's GPU from stand-ins on it, exactly as `prepare` does (the module the grader's launcher runs).

    What the grader judges: this, read as data, never what the learner's process says a kernel computed."""
    import numpy as np

    _require_jit(host)
    import cutlass.cute as cute

    from cutecourse.kernels import ptx as course_ptx

    _load_runtime()
    examples = [spec_of(a) for a in args]
    if arch is None:
        from cutecourse.kernels import launch as course_launch

        stand_ins = [*_stand_ins(examples, vector), course_launch.current_stream()]
    else:
        from cutlass.cute.runtime import make_fake_stream

        course_ptx.check_arch(arch)
        stand_ins = [*_fake_stand_ins(examples, vector), make_fake_stream()]
    compiled, ptx_text = course_ptx.compiled_with_ptx(lambda options: cute.compile(host, *stand_ins, options=options),
                                                      arch)
    obj = compiled.dump_to_object(MODULE_PREFIX)
    return {"object": np.frombuffer(obj, dtype=np.uint8), "ptx": ptx_text}


@functools.lru_cache(maxsize=None)
def _load_runtime() -> None:
    """The DSL's runtime library loaded for every module to see: the export links the host code against it (without
    it, `dump_to_object` fails where no GPU compile has loaded it yet)."""
    import ctypes

    from cutlass.runtime import find_runtime_libraries

    for path in find_runtime_libraries(enable_tvm_ffi=False):
        ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)


def restricted(source: str, forbid: Sequence[str] = ()) -> str | None:
    """None if `source` is kernel code only (see the module docstring) and names nothing of `forbid` (dotted names
    of modules or functions, e.g. "cutlass.pipeline"), else what is wrong, with its line.

    A kernel exercise's ``forbid`` is kept here, in the source, not by stubs in the learner's process (those close
    ctypes, which the DSL's compiler needs): kernel code has no reflection, so every way it can reach a module or a
    function is an import or an attribute chain from one, and each is read off the syntax tree."""
    try:
        tree = ast.parse(source)
    except SyntaxError as exc:
        return f"line {exc.lineno}: {exc.msg}"
    used = _forbidden_use(tree, tuple(forbid))
    if used:
        line, name = used
        return (f"line {line}: `{name}` is not available to this answer: the exercise asks you to write what it "
                f"does yourself")
    for node in ast.walk(tree):
        line = getattr(node, "lineno", "?")
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
            if isinstance(node, ast.ImportFrom) and node.level:
                return f"line {line}: relative imports are not kernel code"
            for name in names:
                if name.split(".")[0] not in KERNEL_IMPORTS:
                    return f"line {line}: a kernel answer imports only {', '.join(KERNEL_IMPORTS)}; not {name}"
        elif isinstance(node, ast.Name) and node.id in KERNEL_FORBIDDEN_NAMES:
            return f"line {line}: `{node.id}` is not kernel code; the kernel and its host use cute and cutlass only"
        elif isinstance(node, ast.alias) and (node.asname or node.name) in KERNEL_FORBIDDEN_NAMES:
            return f"line {line}: `{node.asname or node.name}` is not kernel code"
        elif isinstance(node, ast.Attribute) and node.attr.startswith("__"):
            return f"line {line}: dunder attributes (.{node.attr}) are not kernel code"
        elif isinstance(node, (ast.Global, ast.Nonlocal)):
            return f"line {line}: global/nonlocal state is not kernel code"
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            for inner in ast.walk(node):
                if isinstance(inner, (ast.Import, ast.ImportFrom)):
                    return f"line {inner.lineno}: import at the top of the cell, not inside a function"
    return None


def import_aliases(tree: ast.AST) -> dict[str, str]:
    """Each name an import in `tree` binds, and the dotted name it stands for (``import a.b`` binds ``a``)."""
    aliases: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                aliases[a.asname or a.name.split(".")[0]] = a.name if a.asname else a.name.split(".")[0]
        elif isinstance(node, ast.ImportFrom) and node.module:
            for a in node.names:
                aliases[a.asname or a.name] = f"{node.module}.{a.name}"
    return aliases


def dotted_name(expr: ast.expr, aliases: dict[str, str]) -> str | None:
    """The dotted name ``x.y.z`` stands for, its root through `aliases`; None if it is not such a chain."""
    if isinstance(expr, ast.Name):
        return aliases.get(expr.id)
    if isinstance(expr, ast.Attribute):
        base = dotted_name(expr.value, aliases)
        return None if base is None else f"{base}.{expr.attr}"
    return None


def _forbidden_use(tree: ast.AST, forbid: tuple[str, ...]) -> tuple[int, str] | None:
    """(line, dotted name) of the first import or attribute chain in `tree` that names something of `forbid`."""
    if not forbid:
        return None
    aliases = import_aliases(tree)
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            names = [f"{node.module}.{a.name}" for a in node.names] + [node.module]
        elif isinstance(node, ast.Attribute):
            names = [dotted_name(node, aliases)]
        else:
            continue
        for name in names:
            if name and any(name == f or name.startswith(f + ".") for f in forbid):
                return node.lineno, name
    return None
