"""Evaluate layout-algebra operations in the real CuTe DSL and return the printed strings.

This is the *oracle* the eager algebra (:mod:`cutecourse.layout`) is tested against.
It runs the operations inside ``@cute.jit`` (where static layouts are folded at trace
time and ``str()`` gives exactly what the DSL prints) in a separate worker process,
so that inputs that kill the DSL's process (for example a SIGFPE inside the MLIR
layout folder) cost one case and not the whole run.

Usage::

    from cutecourse.layout.oracle import evaluate
    evaluate([
        ("composition", "(4,8):(8,1)", "4:2"),
        ("logical_divide", "1024:1", "128:1"),
        ("coalesce", "(2,(1,6)):(1,(6,2))", {"target_profile": (1, 1)}),
        ("recast_layout", 16, 0, "8:1"),
    ])
    # ['(2,2):(16,1)', '(128,8):(1,128)', '(2,6):(1,2)', 'crash: ...']

A *case* is ``(op_name, *args)`` with an optional trailing ``dict`` of keyword
arguments.  Arguments are

* strings, parsed as a layout ``"(4,8):(8,1)"``, a swizzle ``"S<3,3,3>"`` or a
  composed layout ``"S<3,3,3> o 0 o (8,64):(64,1)"``;
* ints, ``None`` (a slicing wildcard) and nested tuples/lists of those or of
  layout strings (a tiler of per-mode layouts is ``("4:1", "8:2")``).

``op_name`` is any public function of ``cutlass.cute`` (``composition``,
``logical_divide``, ``make_layout_tv``, ``crd2idx``, ``slice_`` …) or one of the
oracle's own helpers: ``"layout"`` (parse and print the argument), ``"call"``
(``layout(coord)``), ``"getitem"`` (``layout[i]``) and ``"shape"``/``"stride"``.

Each result is ``str()`` of the DSL's return value, ``"error: <Type>: <message>"``
when the DSL raised a Python exception, or ``"crash: <reason>"`` when the DSL's
process died while evaluating that case (found by resuming after the streamed
results and, where that does not pin it down, by bisection).

Importing this module does not import the DSL; only the worker processes do.
Run as ``python -m cutecourse.layout.oracle`` it reads a JSON list of cases on
stdin and streams one JSON line per result on stdout.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from typing import Any, Iterable, List, Optional, Sequence

__all__ = ["evaluate", "dsl_available", "INSTALL_HINT", "OracleUnavailable"]

INSTALL_HINT = (
    "the CuTe DSL oracle needs NVIDIA's CuTe DSL (shipped for Linux and Windows x86_64): "
    "pip install nvidia-cutlass-dsl==4.8.1"
)

#: Cases per worker process are at most this many (a case costs ~0.2-0.5 ms).
MAX_BATCH = 6000
#: A batch's process is killed after this long (seconds) and treated as crashed.
BATCH_TIMEOUT = 300.0


_TAG = "@@oracle "


class OracleUnavailable(RuntimeError):
    """The CuTe DSL cannot be imported here."""


# --------------------------------------------------------------------------- #
# Parsing of layout strings (DSL side; independent of the eager algebra)
# --------------------------------------------------------------------------- #


class _Parser:
    """Tiny recursive-descent parser for the DSL's printed forms."""

    def __init__(self, text: str):
        self.s = text
        self.i = 0

    def _ws(self) -> None:
        while self.i < len(self.s) and self.s[self.i] in " \t\n":
            self.i += 1

    def _peek(self, tok: str) -> bool:
        self._ws()
        return self.s.startswith(tok, self.i)

    def _eat(self, tok: str) -> None:
        self._ws()
        if not self.s.startswith(tok, self.i):
            raise ValueError(f"cannot parse {self.s!r}: expected {tok!r} at {self.i}")
        self.i += len(tok)

    def _int(self) -> int:
        self._ws()
        j = self.i
        if j < len(self.s) and self.s[j] in "+-":
            j += 1
        while j < len(self.s) and self.s[j].isdigit():
            j += 1
        if j == self.i or not self.s[self.i : j].lstrip("+-"):
            raise ValueError(f"cannot parse {self.s!r}: expected an integer at {self.i}")
        v = int(self.s[self.i : j])
        self.i = j
        return v

    def inttuple(self) -> Any:
        if self._peek("("):
            self._eat("(")
            items = [self.inttuple()]
            while self._peek(","):
                self._eat(",")
                items.append(self.inttuple())
            self._eat(")")
            return tuple(items)
        return self._int()

    def swizzle(self) -> tuple:
        self._eat("S<")
        b = self._int()
        self._eat(",")
        m = self._int()
        self._eat(",")
        s = self._int()
        self._eat(">")
        return ("swizzle", b, m, s)

    def layout(self) -> tuple:
        shape = self.inttuple()
        self._eat(":")
        stride = self.inttuple()
        return ("layout", shape, stride)

    def any(self) -> tuple:
        """layout | swizzle | inner ' o ' offset ' o ' layout"""
        first = self.swizzle() if self._peek("S<") else self.layout()
        if self._peek("o "):
            self._eat("o")
            offset = self.inttuple()
            self._eat("o")
            outer = self.layout()
            node: tuple = ("composed", first, offset, outer)
        else:
            node = first
        self._ws()
        if self.i != len(self.s):
            raise ValueError(f"cannot parse {self.s!r}: trailing text at {self.i}")
        return node


def parse(text: str) -> tuple:
    """Parse a printed layout/swizzle/composed layout into a plain tree.

    ``("layout", shape, stride)``, ``("swizzle", b, m, s)`` or
    ``("composed", inner, offset, ("layout", ...))``.
    """
    return _Parser(text).any()


# --------------------------------------------------------------------------- #
# Worker side (imports the DSL)
# --------------------------------------------------------------------------- #


def _fmt_exc(e: BaseException) -> str:
    msg = " | ".join(line.strip() for line in str(e).strip().splitlines() if line.strip())
    if len(msg) > 400:
        msg = msg[:400] + "..."
    return f"error: {type(e).__name__}: {msg}"


def _worker_main(stream_in, stream_out) -> None:  # pragma: no cover - runs in a subprocess
    try:
        import cutlass  # noqa: F401
        import cutlass.cute as cute
    except Exception as e:  # the parent turns this into OracleUnavailable
        stream_out.write(_TAG + json.dumps({"unavailable": f"{type(e).__name__}: {e}"}) + "\n")
        stream_out.flush()
        return

    cases = json.loads(stream_in.read())

    def build(node: tuple):
        kind = node[0]
        if kind == "layout":
            return cute.make_layout(node[1], stride=node[2])
        if kind == "swizzle":
            return cute.make_swizzle(node[1], node[2], node[3])
        if kind == "composed":
            return cute.make_composed_layout(build(node[1]), node[2], build(node[3]))
        raise ValueError(f"unknown node {kind}")

    def conv(a: Any) -> Any:
        if isinstance(a, str):
            return build(parse(a))
        if isinstance(a, (list, tuple)):
            return tuple(conv(x) for x in a)
        if isinstance(a, dict):
            return {k: conv(v) for k, v in a.items()}
        return a

    def plain(a: Any) -> Any:  # kwargs such as target_profile/order stay plain tuples
        if isinstance(a, list):
            return tuple(plain(x) for x in a)
        return a

    special = {
        "layout": lambda x: x,
        "call": lambda x, c: x(c),
        "getitem": lambda x, i: x[i],
        "shape": lambda x: x.shape,
        "stride": lambda x: x.stride,
    }

    def run_one(case: list) -> str:
        op, *args = case
        kwargs = {}
        if args and isinstance(args[-1], dict):
            kwargs = {k: plain(v) for k, v in args[-1].items()}
            args = args[:-1]
        args = [conv(a) for a in args]
        fn = special.get(op)
        if fn is None:
            if op.startswith("_") or not hasattr(cute, op):
                raise ValueError(f"unknown op {op!r}")
            fn = getattr(cute, op)
        return str(fn(*args, **kwargs))

    def emit(r: str) -> None:
        stream_out.write(_TAG + json.dumps(r) + "\n")
        stream_out.flush()

    def trace(start: int, write) -> None:
        """Evaluate cases[start:] inside one @cute.jit trace; write(i, result) per case."""

        def body() -> None:
            for i in range(start, len(cases)):
                write(i, None)  # "starting case i": pins a crash on this case
                try:
                    r = run_one(cases[i])
                except Exception as e:  # one failing case does not end the batch
                    r = _fmt_exc(e)
                write(i, r)

        @cute.jit
        def trace_all():
            body()  # a plain-Python call: the DSL's AST rewrite does not reach inside

        trace_all()

    if not hasattr(os, "fork"):  # no fork server: one trace, the parent bisects crashes
        trace(0, lambda i, r: r is not None and emit(r))
    else:
        # Fork server: the DSL is imported once here; each child traces the remaining
        # cases and streams "B i" / "R i <json>" lines.  A child killed by a signal
        # (SIGFPE in the layout folder) costs one case and a fork (~50 ms), not a
        # fresh interpreter.
        start = 0
        while start < len(cases):
            rfd, wfd = os.pipe()
            pid = os.fork()
            if pid == 0:  # child
                os.close(rfd)
                code = 0
                try:
                    def write(i: int, r: Optional[str]) -> None:
                        line = f"B {i}\n" if r is None else f"R {i} {json.dumps(r)}\n"
                        os.write(wfd, line.encode())

                    trace(start, write)
                except BaseException:  # noqa: BLE001 - reported by the parent as a crash
                    code = 3
                finally:
                    os._exit(code)
            os.close(wfd)
            with os.fdopen(rfd, "rb") as f:
                data = f.read().decode()
            _, status = os.waitpid(pid, 0)
            last_begun, nxt = start - 1, start
            for line in data.splitlines():
                kind, _, rest = line.partition(" ")
                if kind == "B":
                    last_begun = int(rest)
                elif kind == "R":
                    i, _, js = rest.partition(" ")
                    emit(json.loads(js))
                    nxt = int(i) + 1
            if nxt >= len(cases):
                break
            if os.WIFSIGNALED(status):
                why = _describe_death(-os.WTERMSIG(status))
            else:
                why = _describe_death(os.WEXITSTATUS(status))
            # the case that began without a result killed the child (or, if none began,
            # the trace itself failed: blame the next case so that the loop advances)
            emit(f"crash: {why}")
            start = max(nxt, last_begun) + 1 if last_begun >= nxt else nxt + 1
    stream_out.write(_TAG + json.dumps({"done": True}) + "\n")
    stream_out.flush()


# --------------------------------------------------------------------------- #
# Parent side
# --------------------------------------------------------------------------- #


def _to_json(a: Any) -> Any:
    if isinstance(a, (list, tuple)):
        return [_to_json(x) for x in a]
    if isinstance(a, dict):
        return {k: _to_json(v) for k, v in a.items()}
    if a is None or isinstance(a, (int, str)):
        if isinstance(a, bool):
            raise TypeError(f"unsupported argument {a!r}")
        return a
    # eager Layout / Swizzle / ComposedLayout objects: their printed form
    return str(a)


def _describe_death(rc: int) -> str:
    if rc < 0:
        try:
            return f"process killed by {signal.Signals(-rc).name}"
        except ValueError:
            return f"process killed by signal {-rc}"
    if rc > 128:
        try:
            return f"process exited {rc} ({signal.Signals(rc - 128).name})"
        except ValueError:
            pass
    return f"process exited {rc}"


def _run_batch(cases: List[list], timeout: float) -> tuple:
    """Run one worker; return (results_streamed, finished, death_reason, stderr_tail)."""
    env = dict(os.environ)
    env.setdefault("PYTHONFAULTHANDLER", "")
    proc = subprocess.Popen(
        # run the file itself, so the worker does not import the cutecourse package
        [sys.executable, os.path.abspath(__file__)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    timer = threading.Timer(timeout, proc.kill)
    timer.start()
    try:
        out, err = proc.communicate(json.dumps(cases))
    finally:
        timer.cancel()
    results: List[str] = []
    finished = False
    for line in out.splitlines():
        if not line.startswith(_TAG):
            continue  # anything else the DSL printed
        obj = json.loads(line[len(_TAG) :])
        if isinstance(obj, dict):
            if "unavailable" in obj:
                raise OracleUnavailable(f"{INSTALL_HINT} ({obj['unavailable']})")
            if obj.get("done"):
                finished = True
            continue
        results.append(obj)
    reason = "" if (finished and proc.returncode == 0) else _describe_death(proc.returncode)
    return results, finished and proc.returncode == 0, reason, err[-2000:]


def _evaluate_batch(cases: List[list], timeout: float) -> List[str]:
    """Evaluate, surviving crashes: resume after the streamed results, bisect otherwise."""
    if not cases:
        return []
    results, ok, reason, err = _run_batch(cases, timeout)
    if ok and len(results) == len(cases):
        return results
    if len(cases) == 1:
        if len(results) == 1:  # the case printed its result; the process died afterwards
            return results
        return [f"crash: {reason}"]
    k = len(results)
    if k == len(cases):
        # every case printed its result; the process died afterwards (e.g. compiling the
        # traced module): the strings are what the DSL printed, keep them
        return results
    if k > 0:
        # The worker streams each result as soon as it has it, so case k is the suspect.
        alone = _evaluate_batch([cases[k]], timeout)
        if alone[0].startswith("crash: "):
            return results + alone + _evaluate_batch(cases[k + 1 :], timeout)
        # the suspect survives alone: keep what was streamed, bisect the rest
        return results + _bisect(cases[k:], timeout)
    return _bisect(cases, timeout)


def _bisect(cases: List[list], timeout: float) -> List[str]:
    if len(cases) <= 1:
        return _evaluate_batch(cases, timeout)
    mid = len(cases) // 2
    return _evaluate_batch(cases[:mid], timeout) + _evaluate_batch(cases[mid:], timeout)


_AVAILABLE: Optional[bool] = None


def dsl_available() -> bool:
    """True when ``cutlass.cute`` can be imported (checked without importing it here)."""
    global _AVAILABLE
    if _AVAILABLE is None:
        import importlib.util

        try:
            _AVAILABLE = importlib.util.find_spec("cutlass") is not None and (
                importlib.util.find_spec("cutlass.cute") is not None
            )
        except (ImportError, ValueError):
            _AVAILABLE = False
    return _AVAILABLE


def evaluate(
    cases: Iterable[Sequence[Any]],
    *,
    workers: Optional[int] = None,
    batch_size: Optional[int] = None,
    timeout: float = BATCH_TIMEOUT,
) -> List[str]:
    """Evaluate each case in the CuTe DSL; one printed string per case, in order.

    ``workers`` processes run at once (default: up to 2, never more than the CPUs);
    each gets batches of at most ``batch_size`` cases (default :data:`MAX_BATCH`).
    Raises :class:`OracleUnavailable` (a ``RuntimeError``) when the DSL is missing.
    """
    if not dsl_available():
        raise OracleUnavailable(INSTALL_HINT)
    jcases = []
    for c in cases:
        if isinstance(c, str) or not isinstance(c, (list, tuple)) or not c or not isinstance(c[0], str):
            raise TypeError(f"a case is (op_name, *args), got {c!r}")
        jcases.append(_to_json(list(c)))
    if not jcases:
        return []
    ncpu = os.cpu_count() or 1
    if workers is None:
        workers = min(2, ncpu)
    workers = max(1, workers)
    per = batch_size or MAX_BATCH
    # split into at least `workers` batches when there is enough work to amortise startup
    nb = max(-(-len(jcases) // per), min(workers, -(-len(jcases) // 500)))
    size = -(-len(jcases) // nb)
    batches = [jcases[i : i + size] for i in range(0, len(jcases), size)]
    if len(batches) == 1 or workers == 1:
        out: List[str] = []
        for b in batches:
            out.extend(_evaluate_batch(b, timeout))
        return out
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=workers) as ex:
        parts = list(ex.map(lambda b: _evaluate_batch(b, timeout), batches))
    return [r for p in parts for r in p]


if __name__ == "__main__":  # pragma: no cover - the worker entry point
    _worker_main(sys.stdin, sys.stdout)
