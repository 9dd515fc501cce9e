"""Run a learner's answers in a jailed process of their own, and call into it.

The grader never runs learner code in its own process. It starts this module inside a jail
(:mod:`cutecourse.grading.isolation`), which executes the answer cells and then serves calls over a pipe: the grader
sends inputs, the learner's function runs, and the result comes back as data. References and comparisons stay in the
grader, so a submission that patches ``torch.allclose``, redefines a check or prints an expected line patches only
its own process. A crash, a hang, ``os._exit`` or a dead CUDA context ends only that process: the call fails, the
test scores 0, and the next call gets a fresh process.

Inside the learner's process:

- ``cutecourse.grading.checks`` is a stand-in that records what the learner's functions return on the checks'
  cases, for the grader to judge; the real checks (the references) are not even on the file system there.
- The functions an exercise asks the learner to write by hand (its ``forbid`` list) are replaced by stubs that
  raise, wherever they are bound, and their source files cannot be opened.
- An audit hook refuses to start programs, and to open the denied folders (defence in depth: in a bubblewrap jail
  they are not mounted at all).

A call names how to run the learner's object: ``call`` it with the arguments, ``launch`` it (a ``@cute.jit`` host) on
GPU tensors through :mod:`harness`, or compile it to ``ptx`` through :mod:`harness`. Requests and replies carry their
values in the format of :mod:`wire`.
"""

from __future__ import annotations

import ast
import collections
import fcntl
import gc
import importlib
import importlib.util
import json
import linecache
import math
import os
import re
import signal
import stat
import subprocess
import sys
import threading
import time
import traceback
import types
from pathlib import Path
from typing import Any, Callable

from cutecourse.grading import wire

VIAS = ("call", "launch", "ptx", "module")
#: The most a learner process may send back in one reply; a larger one fails the call.
MAX_REPLY_BYTES = 256 * 2**20
#: How much of a learner process's stderr the grader keeps (the end of it), to show with a failure.
STDERR_TAIL_BYTES = 4096
CHECK_SPECS_ENV = "CUTECOURSE_CHECK_SPECS"
RECORDS_ENV = "CUTECOURSE_RECORDS"

# ---------------------------------------------------------------------------------------------------------------------
# Tensor requests, made into tensors inside the learner process (for kernels).


def _materialise(value: Any, outputs: list[Any]) -> Any:
    """An argument as the learner's function receives it: tensors for tensor requests, plain data otherwise."""
    if not wire.is_tensor_request(value):
        return wire.decode(value)
    import torch

    if "$tensor" in value:
        spec = value["$tensor"]
        values = torch.as_tensor(wire.decode(spec["array"]))
        return values.to(device=spec["device"], dtype=getattr(torch, spec["dtype"]))
    spec = value["$poisoned"]
    dtype = getattr(torch, spec["dtype"])
    out = torch.full(spec["shape"], float("nan") if dtype.is_floating_point else -1, dtype=dtype,
                     device=spec["device"])
    outputs.append(out)
    return out


def _example(value: Any) -> Any:
    """What a compile needs to know of an argument, before the argument exists: a TensorSpec, or the scalar."""
    from cutecourse.grading import harness

    if not wire.is_tensor_request(value):
        return wire.decode(value)
    spec = value.get("$tensor") or value["$poisoned"]
    return harness.TensorSpec(spec["dtype"], _ndim(spec), spec["device"])


def _ndim(spec: dict[str, Any]) -> int:
    """The rank of a tensor request's tensor (its values may be sent as an array or as nested lists)."""
    import numpy as np

    return len(spec["shape"]) if "shape" in spec else np.ndim(wire.decode(spec["array"]))


def execute(fn: Any, args: list[Any], via: str = "call", options: dict[str, Any] | None = None
            ) -> tuple[Any, list[Any]]:
    """Run the learner's `fn` on wire `args` the way `via` says; (its value, the poisoned outputs after the run).

    ``launch`` compiles the learner's host from stand-ins before the inputs are made, then launches it on them;
    ``ptx`` takes an arch first and returns the PTX. Used by the learner's process, the checks' stand-in, and the real
    checks in a learner's own notebook, so all three run the learner's code the same way."""
    from cutecourse.grading import harness

    options = dict(options or {})
    outputs: list[Any] = []
    if via == "call":
        result = fn(*[_materialise(a, outputs) for a in args])
    elif via == "launch":
        kernel = harness.prepare(fn, [_example(a) for a in args], **options)
        kernel(*[_materialise(a, outputs) for a in args])
        result = None
    elif via in ("ptx", "module"):
        # A compile needs each tensor's dtype and rank only: no tensor is made, so a process whose answers use no
        # torch does not import it (over a CPU-second, in every notebook kernel the grader starts).
        arch, *rest = [wire.decode(args[0])] + list(args[1:])
        compile_ = harness.ptx if via == "ptx" else harness.module
        result = compile_(fn, arch, *[_example(a) for a in rest], **options)
    else:
        raise ValueError(f"via={via!r}: one of {', '.join(VIAS)}")
    if outputs and any(o.is_cuda for o in outputs):
        sys.modules["torch"].cuda.synchronize()  # a kernel's faults surface here, inside this process
    return result, outputs


# ---------------------------------------------------------------------------------------------------------------------
# The learner side.


def _folders_held() -> list[str]:
    """Every folder a relative path may be opened from now: the current one, and each folder this process holds a
    descriptor of (``os.open(name, dir_fd=N)`` opens from N, and the audit event does not say which N)."""
    held = []
    try:
        held.append(os.getcwd())
    except OSError:
        pass  # the current folder was removed: a relative path opens nothing there
    try:
        fds = os.listdir("/proc/self/fd")
    except OSError:
        return held  # no /proc (not Linux, where no jail runs either): only the current folder is known
    for fd in fds:
        try:
            if stat.S_ISDIR(os.fstat(int(fd)).st_mode):
                held.append(os.readlink(f"/proc/self/fd/{fd}"))
        except (OSError, ValueError):
            continue  # closed since it was listed
    return held


def _doors(folders: list[str], files: tuple[str, ...] = ()) -> Callable[[str, tuple[Any, ...]], None]:
    """The audit hook `_deny` installs: no programs, nothing under `folders`, none of `files`, and where there are
    `files`, no foreign function calls and no symlinks (ways past the hook's look at a path).

    A path is judged where it leads, symlinks and ``..`` resolved. A relative one is judged from the current folder
    and from every folder the process holds open, since a ``dir_fd`` may be any of them. And one that ends in the name
    of one of `files` is refused wherever it leads if its folder may change between the hook's look and the open
    (another thread can move a descriptor or the current folder): a relative path, or one through a link
    (``/proc/self/fd/N/``, ``/dev/fd/N/``, ``/proc/self/cwd/``)."""
    roots = [os.path.realpath(f) + os.sep for f in folders]
    closed = {os.path.realpath(f) for f in files}
    names = {os.path.basename(f) for f in closed}
    blocked_events = {"subprocess.Popen", "os.system", "os.exec", "os.posix_spawn", "os.spawn", "os.fork",
                      "os.forkpty", "pty.spawn"}
    if files:
        blocked_events |= {"ctypes.dlopen", "ctypes.dlsym", "ctypes.dlsym/handle", "ctypes.cdata", "os.symlink"}

    def refuse(path: Any, dir_fd: Any = None) -> None:
        if isinstance(path, int):  # a descriptor: the folder or file it was opened on
            path, dir_fd = f"/proc/self/fd/{path}", None
        if not isinstance(path, (str, bytes, os.PathLike)):
            return  # None: the current folder (listdir), already open
        path = os.fsdecode(path)
        folder = os.path.dirname(path)
        if os.path.basename(os.path.normpath(path)) in names and (
                not os.path.isabs(path) or os.path.realpath(folder) != os.path.normpath(folder)):
            raise PermissionError(f"grading sandbox: answers may not read {path}")
        if os.path.isabs(path):
            starts = [""]
        elif isinstance(dir_fd, int) and dir_fd >= 0:  # -1: none given
            starts = [f"/proc/self/fd/{dir_fd}"]
        else:
            starts = _folders_held()
        for start in starts:
            full = os.path.realpath(os.path.join(start, path))
            if full in closed or any((full + os.sep).startswith(root) for root in roots):
                raise PermissionError(f"grading sandbox: answers may not read {full}")

    def hook(event: str, args: tuple[Any, ...]) -> None:
        if event in blocked_events:
            raise PermissionError(f"grading sandbox: {event} is not allowed in an answer")
        if event in ("open", "os.listdir", "os.scandir") and args:  # open's (path, mode, flags) has no dir_fd
            refuse(args[0])
        elif event in ("os.link", "os.rename") and len(args) > 2:  # (src, dst, src_dir_fd, dst_dir_fd)
            refuse(args[0], args[2])

    return hook


def _deny(folders: list[str], files: tuple[str, ...] = ()) -> None:
    """Install `_doors(folders, files)`, an audit hook which Python does not let the code remove."""
    sys.addaudithook(_doors(folders, files))


_COLOURS = re.compile(r"\x1b\[[0-9;]*m")


class Forbidden(PermissionError):
    """Raised by a function the exercise asks the learner to write by hand."""


def _resolve(dotted: str) -> Any:
    """The object a dotted name such as ``cutecourse.layout.coalesce`` or ``a.b.Class.method`` names."""
    parts = dotted.split(".")
    for cut in range(len(parts) - 1, 0, -1):
        try:
            value: Any = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for attr in parts[cut:]:
            value = getattr(value, attr)
        return value
    raise ImportError(f"no module in {dotted!r}")


def _forbid(names: list[str], exercise: str) -> tuple[str, ...]:
    """Replace each named function by a stub that raises, in every module, class and module-level dict that holds it;
    returns the source files of the modules they came from, for the audit hook to close."""
    files: set[str] = set()
    originals: dict[int, tuple[Any, str]] = {}
    original: Any = None
    for dotted in names:
        try:
            original = _resolve(dotted)
        except (ImportError, AttributeError):
            continue  # not installed here (the DSL on a machine without it): nothing to take away
        originals.setdefault(id(original), (original, dotted))
        for source in (getattr(original, "__code__", None) and original.__code__.co_filename,
                       getattr(sys.modules.get(getattr(original, "__module__", "") or ""), "__file__", None)):
            if source:
                files.add(source)
                files.add(importlib.util.cache_from_source(source) if source.endswith(".py") else source)
    for key, holders in _bindings(originals).items():
        original, dotted = originals[key]

        def stub(*args: Any, _name: str = dotted, **kwargs: Any) -> Any:
            raise Forbidden(f"exercise {exercise} asks you to write this yourself: {_name} is not available to "
                            f"your answer while it is graded")

        stub.__name__ = getattr(original, "__name__", dotted.rpartition(".")[2])
        stub.__qualname__ = stub.__name__
        for holder, name in holders:
            if isinstance(holder, dict):
                holder[name] = stub
            else:
                setattr(holder, name, stub)
    original = None  # no reference to a forbidden function is left here
    originals.clear()
    for source in files:
        linecache.cache.pop(source, None)
    gc.collect()
    return tuple(sorted(files))


def _bindings(values: dict[int, Any]) -> dict[int, list[tuple[Any, str]]]:
    """For each value (by id), every (holder, name) that binds it: module globals, module-level dicts, and classes
    defined in modules. One pass over the modules for all the values."""
    found: dict[int, list[tuple[Any, str]]] = {key: [] for key in values}
    for module in list(sys.modules.values()):
        namespace = getattr(module, "__dict__", None)
        if not isinstance(namespace, dict):
            continue
        holders: list[Any] = [namespace]
        holders += [v for v in namespace.values() if isinstance(v, dict)]
        holders += [v for v in namespace.values() if isinstance(v, type)]
        for holder in holders:
            items = holder.items() if isinstance(holder, dict) else vars(holder).items()
            for name, v in list(items):
                if id(v) in found:
                    found[id(v)].append((holder, name))
    return found


#: CUDA's names for a kernel's access outside its memory. Which one a stray access gets depends on where it lands (an
#: unmapped page, another allocation's, a shared-memory window), which differs run to run and when submissions are
#: graded side by side: the report says the one thing they mean, so the same kernel gets the same feedback.
MEMORY_FAULTS = ("cudaErrorIllegalAddress", "cudaErrorInvalidAddressSpace", "an illegal memory access was encountered",
                 "operation not supported on global/shared address space")
MEMORY_FAULT = ("CUDA memory fault: the kernel read or wrote memory outside the tensors it was given, which ends the "
                "CUDA context; check the guards (predicates) on every access")


def describe(exc: BaseException) -> str:
    """One line about an exception, even for those whose str() is empty (the DSL's errors often are), without the
    terminal colours the DSL puts in its messages; the DSL's first lines ("error: ...") joined by " / "; any of CUDA's
    memory faults as `MEMORY_FAULT`."""
    text = _COLOURS.sub("", str(exc)).strip() or next((line.strip() for line in reversed(
        traceback.format_exception_only(type(exc), exc)) if line.strip()), "")
    if any(fault in text for fault in MEMORY_FAULTS):
        return f"{type(exc).__name__}: {MEMORY_FAULT}"
    lines = [line.strip() for line in text.splitlines() if line.strip()] or [repr(exc)]
    return f"{type(exc).__name__}: {' / '.join(lines[:3])[:300]}"


def _record_checks() -> types.ModuleType:
    """The stand-in for ``cutecourse.grading.checks`` in a learner process: ``checks.NAME(fn)`` runs `fn` on the
    check's cases (from the file ``$CUTECOURSE_CHECK_SPECS`` names) and writes what came back, for the grader to judge
    against its references. Nothing of the real checks is in the process."""
    module = types.ModuleType("cutecourse.grading.checks", "Stand-in: the grader judges the recorded results.")
    specs_path, records = os.environ.get(CHECK_SPECS_ENV), os.environ.get(RECORDS_ENV)

    def recorder(name: str) -> Callable[[Any], None]:
        def record(fn: Any) -> None:
            specs = json.loads(Path(specs_path).read_text()) if specs_path else {}
            if name not in specs:
                print(f"{name}: not a check of this lesson")
                return
            spec, results = specs[name], []
            for case in spec["cases"]:
                try:
                    value, outputs = execute(fn, case, spec["via"], spec["options"])
                    results.append({"ok": True, "value": wire.encode(value),
                                    "outputs": [wire.encode(o) for o in outputs]})
                except Exception as exc:  # noqa: BLE001 - a failing answer is recorded, not raised
                    results.append({"ok": False, "error": describe(exc)})
                    break
            if records:
                Path(records, f"{name}.json").write_text(json.dumps(results))
            print(f"{name}: {len(results)} case(s) recorded for the grader")

        return record

    def attribute(name: str) -> Callable[[Any], None]:
        if name.startswith("__"):  # module machinery (__file__, __path__...) asked by importers and tools
            raise AttributeError(name)
        return recorder(name)

    module.__getattr__ = attribute  # type: ignore[method-assign]
    return module


def enter_jail(forbid: list[str], exercise: str, deny: list[str], preload: tuple[str, ...] = ()) -> None:
    """What every learner process does before any learner code: the checks' stand-in, the preloads, the forbidden
    functions taken away, the doors closed."""
    sys.modules["cutecourse.grading.checks"] = _record_checks()
    import cutecourse.grading

    cutecourse.grading.checks = sys.modules["cutecourse.grading.checks"]  # type: ignore[attr-defined]
    for module in preload:  # heavy imports happen before the doors close
        try:
            importlib.import_module(module)
        except ImportError:
            pass  # not installed here (the DSL off Linux): the cell that imports it fails as it would anyway
    closed = _forbid(forbid, exercise) if forbid else ()
    _deny(deny, closed)


def _serve(spec: dict[str, Any]) -> None:
    channel = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)  # the learner's prints go to stderr; the channel carries only our replies
    sys.stdout = sys.stderr
    enter_jail(spec.get("forbid", []), spec.get("exercise", "?"), spec.get("deny", []), tuple(spec.get("preload", ())))
    namespace: dict[str, Any] = {"__name__": "__answers__"}
    errors: dict[str, str] = {}
    for cell in spec["cells"]:
        filename = f"<{cell['label']}>"
        # Kept where inspect.getsource finds it, as IPython does for cells: the DSL reads a kernel's source to trace it.
        linecache.cache[filename] = (len(cell["source"]), None, cell["source"].splitlines(keepends=True), filename)
        try:
            exec(compile(cell["source"], filename, "exec"), namespace)
        except BaseException as exc:  # noqa: BLE001 - a learner's SystemExit is also just a failed cell
            if cell.get("exercise"):
                errors[cell["exercise"]] = describe(exc)
    channel.write(json.dumps({"ready": True, "errors": errors}) + "\n")
    for line in sys.stdin:
        request = json.loads(line)
        try:
            fn = namespace.get(request["name"])
            if not callable(fn):
                why = "; ".join(f"exercise {e}'s cell raised {m}" for e, m in errors.items()) or \
                    "did its cell run without errors?"
                raise NameError(f"{request['name']} is not defined ({why})")
            value, outputs = execute(fn, request["args"], request.get("via", "call"), request.get("options"))
            reply = {"ok": True, "value": wire.encode(value), "outputs": [wire.encode(o) for o in outputs]}
        except BaseException as exc:  # noqa: BLE001
            reply = {"ok": False, "error": describe(exc), "intact": _intact()}
        channel.write(json.dumps(reply) + "\n")


def _intact() -> bool:
    """Whether this process can take the next call after one that raised: yes, unless torch started a CUDA context
    in it (a kernel's error can leave the context unusable for every later call). The grader replaces a process that
    is not (`Learner._call`). The claim is the learner's own process's, and all it decides is whether the learner's
    next call starts in a fresh process."""
    torch = sys.modules.get("torch")
    try:
        return torch is None or not torch.cuda.is_initialized()
    except Exception:  # noqa: BLE001 - a torch the answers broke
        return False


def serve_kernel(argv: list[str]) -> None:
    """The notebook kernel nbval drives, as a learner process: into the jail, then ipykernel."""
    enter_jail([], "?", [d for d in os.environ.get("CUTECOURSE_DENY", "").split(os.pathsep) if d])
    from ipykernel import kernelapp

    kernelapp.launch_new_instance(argv=argv)


# ---------------------------------------------------------------------------------------------------------------------
# The grader side.


TIMEOUT_ENV = "CUTECOURSE_TIMEOUT_S"
#: The grade's deadline, a `time.monotonic()` reading (one clock for every process of the machine): no call waits
#: past it.
DEADLINE_ENV = "CUTECOURSE_DEADLINE"
DEFAULT_TIMEOUT_S = 120.0
#: The module a learner process runs (this one), and the one the grader's launcher runs (`launcher`).
PROGRAM = "cutecourse.grading.sandbox"
LAUNCHER = "cutecourse.grading.launcher"


class LearnerError(Exception):
    """The learner's code failed: raised, crashed, hung or was never defined. The message says which."""


class _Tail(threading.Thread):
    """Reads a pipe to its end, keeping only the last `STDERR_TAIL_BYTES`."""

    def __init__(self, pipe: Any):
        super().__init__(daemon=True)
        self.pipe = pipe
        self.chunks = collections.deque()
        self.size = 0
        self.total = 0  # bytes read, all told: a mark for `since`
        self.start()

    def run(self) -> None:
        for chunk in iter(lambda: self.pipe.read1(65536) if hasattr(self.pipe, "read1") else self.pipe.read(65536),
                          b""):
            self.chunks.append(chunk)
            self.size += len(chunk)
            self.total += len(chunk)
            while self.size - len(self.chunks[0]) > STDERR_TAIL_BYTES:
                self.size -= len(self.chunks.popleft())

    def text(self) -> str:
        data = b"".join(self.chunks)[-STDERR_TAIL_BYTES:]
        return data.decode("utf-8", "replace").strip()

    def since(self, mark: int) -> str:
        """What the process wrote after `mark` (a `total`), of the tail kept, once the pipe holds nothing unread: the
        process wrote it before its reply, so it is in the pipe or read by then (a few milliseconds at most)."""
        import select

        for _ in range(50):
            before = self.total
            time.sleep(0.002)
            try:
                waiting = select.select([self.pipe], [], [], 0)[0]
            except (OSError, ValueError):  # closed
                break
            if not waiting and self.total == before:
                break
        data = b"".join(self.chunks)
        return data[len(data) - min(self.total - mark, len(data)):].decode("utf-8", "replace").strip()


#: Modules answer cells may import that load shared libraries through ctypes: where functions are forbidden the
#: doors close ctypes, so each of these that some cell imports is imported before.
PRELOADS = {"numpy": "numpy", "cutlass": "cutlass.cute"}


def preloads(cells: list[dict[str, str]]) -> tuple[str, ...]:
    wanted: set[str] = set()
    for cell in cells:
        try:
            tree = ast.parse(cell["source"])
        except SyntaxError:
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                wanted |= {alias.name.split(".")[0] for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                wanted.add(node.module.split(".")[0])
    return tuple(PRELOADS[name] for name in sorted(wanted) if name in PRELOADS)


class Learner:
    """A learner process holding the answers, in a jail of `walls`; `call` runs one of its functions on grader-chosen
    inputs. `forbid` names the functions the exercise graded through this process may not use.

    After a failed call the process is replaced, so one crash (or a dead CUDA context) cannot spoil the next test;
    after a call that only raised, in a process that started no CUDA context, the process takes the next call (a
    fresh one would import torch and the DSL again, seconds for each of an untouched exercise's tests).
    Without `walls`, the process gets walls of its own (the isolation `isolation.choose()` picks), closed with it.
    """

    def __init__(self, cells: list[dict[str, str]], walls: Any = None, *, forbid: list[str] | tuple[str, ...] = (),
                 exercise: str = "?", deny: list[str] | tuple[str, ...] = (), timeout: float | None = None,
                 preload: tuple[str, ...] | None = None, deadline: float | None = None, program: str = PROGRAM):
        from cutecourse.grading import isolation

        self.own_walls = walls is None
        if walls is None:
            walls = isolation.Walls(isolation.choose(), isolation.Limits(), gpu=_gpu_here(),
                                    package_dir=Path(__file__).resolve().parents[1])
        self.walls = walls
        if forbid and preload is None:
            preload = preloads(cells)
        self.spec = {"cells": cells, "forbid": list(forbid), "exercise": exercise, "deny": [str(d) for d in deny],
                     "preload": list(preload or ()) if forbid else []}  # only where the doors close on ctypes
        #: Seconds allowed for loading the answers and for each call (the grader's --timeout sets it).
        self.timeout = timeout if timeout is not None else float(os.environ.get(TIMEOUT_ENV, DEFAULT_TIMEOUT_S))
        #: The grade's deadline (`time.monotonic()`): each wait is the timeout, or what is left before it if less.
        self.deadline = deadline if deadline is not None else (
            float(os.environ[DEADLINE_ENV]) if DEADLINE_ENV in os.environ else None)
        #: The module the process runs: this one (the answers), or the grader's launcher (no answers at all).
        self.program = program
        self.process: subprocess.Popen[bytes] | None = None
        self.errors: dict[str, str] = {}
        self.modules: dict[Any, Any] = {}  # (host, arch, argument kinds, options) -> modules.Module
        self._launcher: Learner | None = None
        self._buffer = b""
        self._stderr: _Tail | None = None

    def _start(self) -> None:
        from cutecourse.grading import isolation

        scratch = self.walls.scratch("learner")
        self.process = self.walls.popen(isolation.python_module(self.program), scratch,
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        assert self.process.stdin is not None and self.process.stdout is not None
        fcntl.fcntl(self.process.stdout, fcntl.F_SETFL, fcntl.fcntl(self.process.stdout, fcntl.F_GETFL) | os.O_NONBLOCK)
        self._buffer = b""
        self._stderr = _Tail(self.process.stderr)
        self._send(self.spec, "loading the answers")
        ready = self._read(self.timeout, "loading the answers")
        self.errors = ready.get("errors", {})

    def _send(self, message: Any, doing: str) -> None:
        assert self.process is not None and self.process.stdin is not None
        try:
            self.process.stdin.write(json.dumps(message).encode() + b"\n")
            self.process.stdin.flush()
        except (BrokenPipeError, OSError):
            self._fail(f"the learner's process was gone before {doing}")

    def _fail(self, why: str) -> None:
        if getattr(self.walls, "over_memory", False):
            why += f"; the submission went over its {self.walls.limits.memory_mb} MiB of memory and was stopped"
        if getattr(self.walls, "over_disk", False):
            why += f"; the submission wrote more than {self.walls.limits.scratch_mb} MiB to its scratch folders and " \
                   f"was stopped"
        self.close()  # the process is dead and its stderr closed: the tail reader gets everything it wrote
        if self._stderr:
            self._stderr.join(1.0)
        tail = self._stderr.text() if self._stderr else ""
        raise LearnerError(why + (f"; the end of its stderr: {tail[-800:]}" if tail else ""))

    def _wait(self, timeout: float, doing: str) -> tuple[float, str]:
        """How long to wait for a reply: `timeout`, or what is left to the grade's deadline where that is less; and
        what to say when the wait runs out. Fails at once where the deadline has passed."""
        left = math.inf if self.deadline is None else self.deadline - time.monotonic()
        if left <= 0:
            self._fail(f"the grade's time limit had run out before {doing}")
        if left < timeout:
            return left, f"stopped after {left:.1f} s while {doing}: the grade's time limit ran out"
        return timeout, f"timed out after {timeout:g} s while {doing}"

    def _count_reply(self, size: int, doing: str) -> None:
        """Add `size` bytes to the submission's replies (`Walls.count_replies`); fail past `Limits.replies_mb`."""
        limit = self.walls.limits.replies_mb
        if self.walls.count_replies(size) > limit * 2**20:
            self._fail(f"the answer's replies passed {limit} MiB in total while {doing}: that is all a submission's "
                       f"learner processes may send the grader in one grade; return less")

    def _read(self, timeout: float, doing: str) -> dict[str, Any]:
        """One reply line, within `timeout` seconds (or the grade's deadline), `MAX_REPLY_BYTES` and what is left of
        the submission's `Limits.replies_mb`; never blocks past the deadline."""
        import select

        assert self.process is not None and self.process.stdout is not None
        wait, out_of_time = self._wait(timeout, doing)
        fd, deadline = self.process.stdout.fileno(), time.monotonic() + wait
        while b"\n" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0:
                self._fail(out_of_time)
            ready, _, _ = select.select([fd], [], [], min(left, 1.0))
            if not ready:
                continue
            try:
                chunk = os.read(fd, 1 << 20)
            except BlockingIOError:
                continue
            if not chunk:  # the channel closed: the process is ending, or has shut its end and lives on
                try:
                    code = self.process.wait(timeout=max(0.1, deadline - time.monotonic()))
                except subprocess.TimeoutExpired:
                    self._fail(f"{out_of_time} (the learner's process closed its reply channel)")
                why = f"signal {signal.Signals(-code).name}" if code < 0 else f"exit code {code}"
                self._fail(f"the learner's process ended ({why}) while {doing}")
            self._buffer += chunk
            self._count_reply(len(chunk), doing)
            if len(self._buffer) > MAX_REPLY_BYTES:
                self._fail(f"the learner's process sent more than {MAX_REPLY_BYTES >> 20} MiB while {doing}")
        line, self._buffer = self._buffer.split(b"\n", 1)
        try:
            reply = json.loads(line)
            if not isinstance(reply, dict):
                raise ValueError(reply)
            return reply
        except (ValueError, RecursionError):
            self._fail(f"the learner's process wrote something unreadable while {doing}")
        raise AssertionError("unreachable")

    def call(self, name: str, *args: Any, via: str = "call", options: dict[str, Any] | None = None,
             timeout: float | None = None) -> tuple[Any, list[Any]]:
        """(return value, poisoned outputs after the call), decoded; LearnerError if anything went wrong.

        A kernel (`via` "ptx" or "launch") is judged on its compiled module, never on what this process says: the
        process compiles the host and sends the module back (`module`); "ptx" returns that module's PTX, and
        "launch" runs the module in the grader's launcher on these arguments and returns its outputs."""
        if via == "ptx" and self.program == PROGRAM:
            return self.module(name, args[0], args[1:], options, timeout).ptx, []
        if via == "launch" and self.program == PROGRAM:
            module = self.module(name, None, args, options, timeout)
            if self._launcher is None:
                self._launcher = Learner([], self.walls, timeout=self.timeout, deadline=self.deadline,
                                         program=LAUNCHER)
            try:
                return self._launcher.call("run", _bytes(module.object), *args, options=options, timeout=timeout)
            except LearnerError as exc:
                raise LearnerError(f"{name}'s compiled kernel failed in the grader's launcher: {exc}") from None
        return self._call(name, list(args), via, options, timeout)

    def module(self, name: str, arch: str | None, args: Any, options: dict[str, Any] | None = None,
               timeout: float | None = None) -> Any:
        """The checked module (`modules.Module`) of the learner's host `name` compiled in this process for `arch`
        (None: this GPU's) and arguments like `args`; compiled once per signature."""
        from cutecourse.grading import modules

        key = (name, arch, tuple(_kind(a) for a in args), json.dumps(options or {}, sort_keys=True))
        if key not in self.modules:
            value, _ = self._call(name, [arch, *args], "module", options, timeout)
            try:
                self.modules[key] = modules.read(value)
            except modules.ModuleError as exc:
                raise LearnerError(f"{name} did not compile to a module the grader can judge: {exc}") from None
        return self.modules[key]

    def _call(self, name: str, args: list[Any], via: str, options: dict[str, Any] | None,
              timeout: float | None) -> tuple[Any, list[Any]]:
        self._wait(timeout or self.timeout, f"running {name}")  # no process is started past the deadline
        self._count_reply(0, f"running {name}")  # nor once the replies' budget is spent
        if self.process is None:
            self._start()
        mark = self._stderr.total if self._stderr else 0
        self._send({"name": name, "args": [wire.argument(a) for a in args], "via": via, "options": options or {}},
                   f"{name} was called")
        reply = self._read(timeout or self.timeout, f"running {name}")
        if not reply.get("ok"):
            if reply.get("intact") is True and self._stderr:  # an exception, nothing worse: it takes the next call
                said = self._stderr.since(mark)
                raise LearnerError(f"{name} raised {reply.get('error')}" +
                                   (f"; what it wrote to stderr: {said[-800:]}" if said else ""))
            self._fail(f"{name} raised {reply.get('error')}")
        try:
            return wire.decode(reply["value"]), [wire.decode(o) for o in reply["outputs"]]
        except (KeyError, TypeError, ValueError, RecursionError) as exc:
            self._fail(f"the learner's process sent a malformed reply ({type(exc).__name__})")
        raise AssertionError("unreachable")

    def close(self) -> None:
        if self._launcher is not None:
            self._launcher.close()
            self._launcher = None
        if self.process is not None:
            try:
                os.killpg(self.process.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
            self.process.wait()
            for pipe in (self.process.stdin, self.process.stdout):
                try:
                    pipe.close()
                except (OSError, AttributeError):
                    pass
            self.process = None
        if self.own_walls:
            self.walls.kill()

    def __enter__(self) -> "Learner":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
        if self.own_walls:
            self.walls.close()


def _kind(value: Any) -> Any:
    """What a compile depends on in an argument: a tensor request's dtype and rank; a scalar's value."""
    if wire.is_tensor_request(value):
        spec = value.get("$tensor") or value["$poisoned"]
        return (spec["dtype"], _ndim(spec), spec["device"])
    return json.dumps(wire.argument(value), sort_keys=True)


def _bytes(data: bytes) -> Any:
    import numpy as np

    return np.frombuffer(data, dtype=np.uint8)


def _gpu_here() -> bool:
    from cutecourse import env

    return env.gpu_missing(80) is None


if __name__ == "__main__":
    if sys.argv[1:2] == ["--kernel"]:
        serve_kernel(sys.argv[2:])
    else:
        _serve(json.loads(sys.stdin.readline()))
