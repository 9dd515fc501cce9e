"""Run a learner's answers in a process of their own, and call into it.

The grader never runs learner code in its own process. It starts this module as a subprocess, which executes the
answer cells and then serves calls over a pipe: the grader sends inputs, the learner's function runs, and the result
comes back as data. References and comparisons stay in the grader, so a submission that patches ``torch.allclose``,
redefines a check or prints an expected line patches only its own process. A crash, a hang, ``os._exit`` or a dead
CUDA context ends only that process: the call fails, the test scores 0, and the next call gets a fresh process.

Inside the learner process an audit hook, which Python does not let the code remove, refuses to open anything under
the denied folders (hidden tests, solutions) and to start other programs.
"""

from __future__ import annotations

import base64
import json
import linecache
import os
import selectors
import signal
import subprocess
import sys
import time
import traceback
from typing import Any

# ---------------------------------------------------------------------------------------------------------------------
# The wire: JSON with tags for the types the checks exchange. No pickle: nothing from the learner is ever unpickled.


def encode(value: Any) -> Any:
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, tuple):
        return {"$tuple": [encode(v) for v in value]}
    if isinstance(value, list):
        return [encode(v) for v in value]
    if isinstance(value, dict):
        return {"$dict": [[encode(k), encode(v)] for k, v in value.items()]}
    module = type(value).__module__.split(".")[0]
    if module == "torch":
        value = value.detach().float().cpu().numpy() if value.is_floating_point() else value.detach().cpu().numpy()
        module = "numpy"
    if module == "numpy" and hasattr(value, "dtype") and hasattr(value, "shape"):
        import numpy as np

        array = np.ascontiguousarray(value)
        return {"$array": {"dtype": array.dtype.str, "shape": list(array.shape),
                           "data": base64.b64encode(array.tobytes()).decode()}}
    if module == "numpy":  # numpy scalars
        return encode(value.item())
    return {"$str": str(value)}  # layouts and other objects are compared by what they print


def decode(value: Any) -> Any:
    if isinstance(value, list):
        return [decode(v) for v in value]
    if not isinstance(value, dict):
        return value
    if "$tuple" in value:
        return tuple(decode(v) for v in value["$tuple"])
    if "$dict" in value:
        return {decode(k): decode(v) for k, v in value["$dict"]}
    if "$array" in value:
        import numpy as np

        spec = value["$array"]
        return np.frombuffer(base64.b64decode(spec["data"]), dtype=np.dtype(spec["dtype"])).reshape(spec["shape"]).copy()
    if "$str" in value:
        return Printed(value["$str"])
    raise ValueError(f"unknown value on the wire: {sorted(value)}")


class Printed(str):
    """An object that came back from the learner as the text it prints (e.g. a Layout)."""


# ---------------------------------------------------------------------------------------------------------------------
# Requests that build torch tensors inside the learner process (for kernels).


def tensor(array: Any, dtype: str = "float32", device: str = "cuda") -> dict[str, Any]:
    """Ask the learner process for a torch tensor with these values (sent as float32/int data, cast there)."""
    return {"$tensor": {"array": encode(array), "dtype": dtype, "device": device}}


def poisoned(shape: tuple[int, ...], dtype: str = "float32", device: str = "cuda") -> dict[str, Any]:
    """Ask for an output tensor filled with NaN (or -1 for integers), returned to the grader after the call."""
    return {"$poisoned": {"shape": list(shape), "dtype": dtype, "device": device}}


def _materialise(value: Any, outputs: list[Any]) -> Any:
    """An argument as the learner's function receives it: tensors for tensor requests, plain data otherwise."""
    if not (isinstance(value, dict) and ("$tensor" in value or "$poisoned" in value)):
        return decode(value)
    import torch

    if "$tensor" in value:
        spec = value["$tensor"]
        return torch.as_tensor(decode(spec["array"])).to(device=spec["device"], dtype=getattr(torch, spec["dtype"]))
    spec = value["$poisoned"]
    dtype = getattr(torch, spec["dtype"])
    out = torch.full(spec["shape"], float("nan") if dtype.is_floating_point else -1, dtype=dtype,
                     device=spec["device"])
    outputs.append(out)
    return out


def _wire(value: Any) -> Any:
    if isinstance(value, dict) and ("$tensor" in value or "$poisoned" in value):
        return value
    encoded = encode(value)
    if isinstance(encoded, dict) and "$str" in encoded:
        raise TypeError(f"cannot send {type(value).__name__} to the learner; send data (ints, tuples, arrays)")
    return encoded


# ---------------------------------------------------------------------------------------------------------------------
# The learner side.


def _deny(folders: list[str]) -> None:
    roots = [os.path.realpath(f) + os.sep for f in folders]
    blocked_events = {"subprocess.Popen", "os.system", "os.exec", "os.posix_spawn", "os.spawn", "os.fork",
                      "os.forkpty", "pty.spawn"}

    def hook(event: str, args: tuple[Any, ...]) -> None:
        if event in blocked_events:
            raise PermissionError(f"grading sandbox: {event} is not allowed in an answer")
        if event == "open" and args and isinstance(args[0], (str, bytes, os.PathLike)):
            path = os.path.realpath(os.fsdecode(args[0]))
            if any((path + os.sep).startswith(root) for root in roots):
                raise PermissionError(f"grading sandbox: answers may not read {path}")

    sys.addaudithook(hook)


def _limit_memory(megabytes: int) -> None:
    import resource

    limit = megabytes * 2**20
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))


def _describe(exc: BaseException) -> str:
    """One line about an exception, even for those whose str() is empty (the DSL's errors often are)."""
    text = str(exc).strip() or next((line.strip() for line in reversed(
        traceback.format_exception_only(type(exc), exc)) if line.strip()), "")
    first = next((line for line in text.splitlines() if line.strip()), repr(exc))
    return f"{type(exc).__name__}: {first[:300]}"


def _serve(spec: dict[str, Any]) -> None:
    channel = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)  # the learner's prints go to stderr; the channel carries only our replies
    sys.stdout = sys.stderr
    for module in spec.get("preload", []):  # heavy imports happen before the doors close
        __import__(module)
    _deny(spec.get("deny", []))
    if spec.get("memory_mb"):
        _limit_memory(spec["memory_mb"])
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
                errors[cell["exercise"]] = _describe(exc)
    channel.write(json.dumps({"ready": True, "errors": errors}) + "\n")
    for line in sys.stdin:
        request = json.loads(line)
        outputs: list[Any] = []
        try:
            fn = namespace.get(request["name"])
            if not callable(fn):
                raise NameError(f"{request['name']} is not defined (did its cell run without errors?)")
            args = [_materialise(a, outputs) for a in request["args"]]
            result = fn(*args)
            if any(o.is_cuda for o in outputs):
                sys.modules["torch"].cuda.synchronize()  # a kernel's faults surface here, inside this process
            reply = {"ok": True, "value": encode(result), "outputs": [encode(o) for o in outputs]}
        except BaseException as exc:  # noqa: BLE001
            reply = {"ok": False, "error": _describe(exc)}
        channel.write(json.dumps(reply) + "\n")


# ---------------------------------------------------------------------------------------------------------------------
# The grader side.


#: Imported before the doors close: the masters' set-up cells import the checks, whose folder answers may not read.
PRELOAD = ("cutecourse.grading.checks",)
TIMEOUT_ENV = "CUTECOURSE_TIMEOUT_S"
DEFAULT_TIMEOUT_S = 120.0


class LearnerError(Exception):
    """The learner's code failed: raised, crashed, hung or was never defined. The message says which."""


class Learner:
    """A learner process holding the answers; `call` runs one of its functions on grader-chosen inputs.

    After a failed call the process is replaced, so one crash (or a dead CUDA context) cannot spoil the next test.
    """

    def __init__(self, cells: list[dict[str, str]], deny: list[str] | tuple[str, ...] = (), memory_mb: int | None = None,
                 preload: tuple[str, ...] = (), timeout: float | None = None):
        self.spec = {"cells": cells, "deny": [str(d) for d in deny], "memory_mb": memory_mb,
                     "preload": list(preload)}
        #: Seconds allowed for loading the answers and for each call (the grader's --timeout sets it).
        self.timeout = timeout if timeout is not None else float(os.environ.get(TIMEOUT_ENV, DEFAULT_TIMEOUT_S))
        self.process: subprocess.Popen[str] | None = None
        self.errors: dict[str, str] = {}

    def _start(self) -> None:
        self.process = subprocess.Popen([sys.executable, "-m", "cutecourse.grading.sandbox"], stdin=subprocess.PIPE,
                                        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                                        start_new_session=True, cwd=os.environ.get("TMPDIR", "/tmp"))
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps(self.spec) + "\n")
        self.process.stdin.flush()
        ready = self._read(self.timeout, "loading the answers")
        self.errors = ready.get("errors", {})

    def _read(self, timeout: float, doing: str) -> dict[str, Any]:
        assert self.process is not None and self.process.stdout is not None
        with selectors.DefaultSelector() as sel:
            sel.register(self.process.stdout, selectors.EVENT_READ)
            deadline = time.monotonic() + timeout
            while True:
                left = deadline - time.monotonic()
                if left <= 0:
                    self.close()
                    raise LearnerError(f"timed out after {timeout:g} s while {doing}")
                if sel.select(left):
                    line = self.process.stdout.readline()
                    break
        if not line:
            code = self.process.wait()
            self.process = None
            why = f"signal {signal.Signals(-code).name}" if code < 0 else f"exit code {code}"
            raise LearnerError(f"the learner's process ended ({why}) while {doing}")
        try:
            return json.loads(line)
        except json.JSONDecodeError:
            self.close()
            raise LearnerError(f"the learner's process wrote something unreadable while {doing}") from None

    def call(self, name: str, *args: Any, timeout: float | None = None) -> tuple[Any, list[Any]]:
        """(return value, poisoned outputs after the call), decoded; LearnerError if anything went wrong."""
        if self.process is None:
            self._start()
        assert self.process is not None and self.process.stdin is not None
        try:
            self.process.stdin.write(json.dumps({"name": name, "args": [_wire(a) for a in args]}) + "\n")
            self.process.stdin.flush()
        except BrokenPipeError:
            self.close()
            raise LearnerError(f"the learner's process was gone before {name} was called") from None
        reply = self._read(timeout or self.timeout, f"running {name}")
        if not reply.get("ok"):
            self.close()
            raise LearnerError(f"{name} raised {reply.get('error')}")
        return decode(reply["value"]), [decode(o) for o in reply["outputs"]]

    def close(self) -> None:
        if self.process is not None:
            try:
                os.killpg(self.process.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
            self.process.wait()
            self.process = None

    def __enter__(self) -> "Learner":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


if __name__ == "__main__":
    _serve(json.loads(sys.stdin.readline()))
