"""The checks that exercise notebooks call. Each prints one deterministic line, the same on every machine.

The checks of each lesson live in a module of this package (``demo``, ``l01_hardware``, ...); all are imported with
the package and reachable by name, so a check cell just says ``checks.row_major_strides(row_major_strides)``.

A check is data plus a judge: fixed inputs (`cases`), the name of the learner's function (`target`), and a `judge`
that looks at what the function returned and says what is wrong, as a hint that does not give the answer away. The
same check runs two ways:

- in the notebook, ``checks.row_major_strides(row_major_strides)`` calls the learner's function in the kernel and
  prints ``✓ row_major_strides: all 5 cases pass`` (nbval compares that line with the solution's);
- in the grader, :func:`grade` calls the function inside the learner's sandboxed process and judges the result in
  the grader's own process, so a notebook that redefines or patches a check gains nothing there.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable

from cutecourse import env
from cutecourse.grading import sandbox, wire

PASS = "✓"
FAIL = "✗"
NOT_RUN = "–"


@dataclass(frozen=True)
class Check:
    name: str
    target: str  # the learner's function this check calls
    cases: Callable[[], list[tuple[Any, ...]]]  # argument lists, as `wire` values
    judge: Callable[[tuple[Any, ...], Any, list[Any]], str | None]  # (case, value, outputs) -> hint, or None if right
    gpu: int | None = None  # compute capability the check needs, e.g. 80
    #: How the learner's object is run on a case (see `sandbox.execute`): "call" it; "launch" it, a ``@cute.jit``
    #: host, through the course's harness; or compile it to "ptx" (each case then starts with the arch).
    via: str = "call"
    options: tuple[tuple[str, Any], ...] = ()  # keyword options of the harness, e.g. (("vector", 8),)

    def __call__(self, fn: Callable[..., Any]) -> bool:
        """Run in the notebook: print the verdict line, return whether it passed."""
        line = self.run(fn)
        print(line)
        return line.startswith(PASS)

    def run(self, fn: Callable[..., Any]) -> str:
        if self.gpu is not None:
            missing = env.gpu_missing(self.gpu)
            if missing:
                return f"{NOT_RUN} {self.name}: not run ({missing})"
        if not callable(fn):
            return f"{FAIL} {self.name}: expected the function {self.target}, got {type(fn).__name__}"
        return self.verdict(lambda case: _call_here(fn, case, self.via, dict(self.options)))

    def spec(self) -> dict[str, Any]:
        """What a learner process needs to run this check's cases (not to judge them): for the checks' stand-in."""
        return {"target": self.target, "via": self.via, "options": dict(self.options),
                "cases": [[wire.argument(a) for a in case] for case in self.cases()]}

    def verdict(self, call: Callable[[tuple[Any, ...]], tuple[Any, list[Any]]]) -> str:
        cases = self.cases()
        for case in cases:
            try:
                value, outputs = call(case)
            except Exception as exc:  # noqa: BLE001 - any failure of the learner's code is a hint, not a crash
                return f"{FAIL} {self.name}: {self.target}{_show(case)} raised {sandbox.describe(exc)}"
            try:
                hint = self.judge(case, value, outputs)
            except Exception as exc:  # noqa: BLE001 - a judge that trips on an answer fails it; the report is kept
                hint = f"the check could not judge {value!r} ({sandbox.describe(exc)}); tell your instructor"
            if hint is not None:
                return f"{FAIL} {self.name}: {self.target}{_show(case)}: {hint}"
        return f"{PASS} {self.name}: all {len(cases)} cases pass"


def grade(check: Check, learner: sandbox.Learner) -> str:
    """The check's line, with the learner's function run in its own process and judged here."""
    def call(case: tuple[Any, ...]) -> tuple[Any, list[Any]]:
        try:
            return learner.call(check.target, *case, via=check.via, options=dict(check.options))
        except sandbox.LearnerError as exc:
            raise RuntimeError(str(exc)) from None

    return check.verdict(call)


def judge_records(check: Check, records: list[Any]) -> str:
    """The check's line from what the checks' stand-in recorded in a learner's notebook kernel (one entry per case,
    in order, stopping at the first failure), judged here against this check's own cases."""
    replies = iter(records if isinstance(records, list) else [])

    def call(case: tuple[Any, ...]) -> tuple[Any, list[Any]]:
        reply = next(replies, None)
        if not isinstance(reply, dict):
            raise RuntimeError("the notebook recorded no result for this case (did the check cell run?)")
        if not reply.get("ok"):
            raise RuntimeError(str(reply.get("error"))[:500])
        return wire.decode(reply.get("value")), [wire.decode(o) for o in reply.get("outputs", [])]

    return check.verdict(call)


def _call_here(fn: Callable[..., Any], case: tuple[Any, ...], via: str, options: dict[str, Any]
               ) -> tuple[Any, list[Any]]:
    # The same wire round trip as in the grader, so both paths see identical values.
    value, outputs = sandbox.execute(fn, [wire.argument(a) for a in case], via, options)
    return wire.decode(wire.encode(value)), [wire.decode(wire.encode(o)) for o in outputs]


#: An argument whose repr is longer than this is cut in a check's line, so that the hint after it stays readable
#: (and inside the grader's report, which cuts each output at 2000 characters).
_SHOW_CHARS = 120


def _show(case: tuple[Any, ...]) -> str:
    def short(a: Any) -> str:
        if isinstance(a, dict) and "$tensor" in a:
            spec = a["$tensor"]
            shape = wire.decode(spec["array"]).shape
            return f"<{spec['dtype']} tensor {tuple(shape)}>"
        if isinstance(a, dict) and "$poisoned" in a:
            return f"<{a['$poisoned']['dtype']} output {tuple(a['$poisoned']['shape'])}>"
        text = repr(a)
        return text if len(text) <= _SHOW_CHARS else f"{text[:_SHOW_CHARS - 40]} … ({len(text)} characters)"

    return "(" + ", ".join(short(a) for a in case) + ")"


def relative_error(got: Any, ref: Any) -> float:
    """‖got − ref‖ / ‖ref‖ in float64; NaN anywhere (an unwritten, poisoned element) gives inf."""
    import numpy as np

    got, ref = np.asarray(got, dtype=np.float64), np.asarray(ref, dtype=np.float64)
    if got.shape != ref.shape:
        return math.inf
    if not np.isfinite(got).all():
        return math.inf
    return float(np.linalg.norm(got - ref) / max(np.linalg.norm(ref), 1e-300))


def rounded(x: Any, dtype: str) -> Any:
    """`x` (float32 numpy) as the learner's process sees it after the cast to `dtype`, back as float64: the exact
    reference for kernels that move data without arithmetic."""
    import numpy as np
    import torch

    return torch.from_numpy(np.asarray(x, dtype=np.float32)).to(getattr(torch, dtype)).double().numpy()


def matrix_cases(seed: int, shapes: Any, transposed: bool = False) -> list[tuple[Any, ...]]:
    """Kernel-check cases: for each (shape, dtype) a random-normal input of that shape (a matrix, or a batch of
    them) and a NaN-poisoned output of the same shape or, `transposed`, with its last two modes swapped, as
    `wire` values."""
    import numpy as np

    rng = np.random.default_rng(seed)
    cases = []
    for shape, dtype in shapes:
        x = rng.standard_normal(shape).astype(np.float32)
        out = (*shape[:-2], shape[-1], shape[-2]) if transposed else tuple(shape)
        cases.append((wire.tensor(x, dtype), wire.poisoned(out, dtype)))
    return cases


def input_of(case: tuple[Any, ...]) -> Any:
    """The input of a `matrix_cases` case as the learner's process holds it (float64 numpy)."""
    spec = case[0]["$tensor"]
    return rounded(wire.decode(spec["array"]), spec["dtype"])


def exact_hint(want: Any, got: Any) -> str | None:
    """What is wrong with `got` against `want` (numpy arrays of one shape; NaN in `got` = never written), or None."""
    import numpy as np

    want, got = np.asarray(want, dtype=np.float64), np.asarray(got, dtype=np.float64)
    if got.shape != want.shape:
        return f"the output has shape {got.shape}, expected {want.shape}"
    unwritten = np.isnan(got)
    if unwritten.any():
        first = ", ".join(str(int(i)) for i in np.argwhere(unwritten)[0])
        return (f"{int(unwritten.sum())} of {got.size} outputs were never written (the first is out[{first}]); "
                f"is the predicate too strict, or a tile missing from the grid?")
    wrong = got != want
    if wrong.any():
        first = ", ".join(str(int(i)) for i in np.argwhere(wrong)[0])
        return f"{int(wrong.sum())} of {got.size} outputs are wrong (the first is out[{first}])"
    return None


def _discover() -> dict[str, Check]:
    import importlib
    import pkgutil

    found: dict[str, Check] = {}
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        module = importlib.import_module(f"{__name__}.{info.name}")
        for value in vars(module).values():
            if isinstance(value, Check):
                if value.name in found and found[value.name] is not value:
                    raise RuntimeError(f"two checks are named {value.name!r}; rename one")
                if not isinstance(globals().get(value.name), (Check, type(None))):  # the names become this module's
                    raise RuntimeError(f"check {value.name!r} has the name of cutecourse.grading.checks."
                                       f"{value.name}; rename the check")
                found[value.name] = value
    return found


#: Every check by name. Discovered at import, so a sandbox that closes file access afterwards still has them all.
REGISTRY: dict[str, Check] = _discover()
globals().update(REGISTRY)
