"""The checks that exercise notebooks call. Each prints one deterministic line, the same on every machine.

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

from cutecourse.grading import sandbox

PASS, FAIL, NOT_RUN = "✓", "✗", "–"


@dataclass(frozen=True)
class Check:
    name: str
    target: str  # the learner's function this check calls
    cases: Callable[[], list[tuple[Any, ...]]]  # argument lists, as `sandbox` wire values
    judge: Callable[[tuple[Any, ...], Any, list[Any]], str | None]  # (case, value, outputs) -> hint, or None if right
    gpu: int | None = None  # compute capability the check needs, e.g. 80

    def __call__(self, fn: Callable[..., Any]) -> bool:
        """Run in the notebook: print the verdict line, return whether it passed."""
        line = self.run(fn)
        print(line)
        return line.startswith(PASS)

    def run(self, fn: Callable[..., Any]) -> str:
        if self.gpu is not None:
            missing = _gpu_missing(self.gpu)
            if missing:
                return f"{NOT_RUN} {self.name}: not run ({missing})"
        if not callable(fn):
            return f"{FAIL} {self.name}: expected the function {self.target}, got {type(fn).__name__}"
        return self.verdict(lambda case: _call_here(fn, case))

    def verdict(self, call: Callable[[tuple[Any, ...]], tuple[Any, list[Any]]]) -> str:
        cases = self.cases()
        for case in cases:
            try:
                value, outputs = call(case)
            except Exception as exc:  # noqa: BLE001 - any failure of the learner's code is a hint, not a crash
                return f"{FAIL} {self.name}: {self.target}{_show(case)} raised {type(exc).__name__}: {exc}"
            hint = self.judge(case, value, outputs)
            if hint is not None:
                return f"{FAIL} {self.name}: {self.target}{_show(case)}: {hint}"
        return f"{PASS} {self.name}: all {len(cases)} cases pass"


def grade(check: Check, learner: sandbox.Learner) -> str:
    """The check's line, with the learner's function run in its own process and judged here."""
    def call(case: tuple[Any, ...]) -> tuple[Any, list[Any]]:
        try:
            return learner.call(check.target, *case)
        except sandbox.LearnerError as exc:
            raise RuntimeError(str(exc)) from None

    return check.verdict(call)


def _call_here(fn: Callable[..., Any], case: tuple[Any, ...]) -> tuple[Any, list[Any]]:
    outputs: list[Any] = []
    # The same wire round trip as in the grader, so both paths see identical values.
    args = [sandbox._materialise(sandbox._wire(a), outputs) for a in case]
    value = fn(*args)
    if outputs and any(o.is_cuda for o in outputs):
        import torch

        torch.cuda.synchronize()
    return sandbox.decode(sandbox.encode(value)), [sandbox.decode(sandbox.encode(o)) for o in outputs]


def _show(case: tuple[Any, ...]) -> str:
    def short(a: Any) -> str:
        if isinstance(a, dict) and "$tensor" in a:
            spec = a["$tensor"]
            shape = sandbox.decode(spec["array"]).shape
            return f"<{spec['dtype']} tensor {tuple(shape)}>"
        if isinstance(a, dict) and "$poisoned" in a:
            return f"<{a['$poisoned']['dtype']} output {tuple(a['$poisoned']['shape'])}>"
        return repr(a)

    return "(" + ", ".join(short(a) for a in case) + ")"


def _gpu_missing(cc: int) -> str | None:
    """Why this machine cannot run an sm_`cc` check, or None if it can."""
    from cutecourse import env

    machine = env.probe()
    if machine.capability is None:
        return f"needs sm_{cc}; this machine has no GPU"
    have = machine.capability[0] * 10 + machine.capability[1]
    return None if have >= cc else f"needs sm_{cc}; this GPU is sm_{have}"


def relative_error(got: Any, ref: Any) -> float:
    """‖got − ref‖ / ‖ref‖ in float64; NaN anywhere (an unwritten, poisoned element) gives inf."""
    import numpy as np

    got, ref = np.asarray(got, dtype=np.float64), np.asarray(ref, dtype=np.float64)
    if got.shape != ref.shape:
        return math.inf
    if not np.isfinite(got).all():
        return math.inf
    return float(np.linalg.norm(got - ref) / max(np.linalg.norm(ref), 1e-300))


# ---------------------------------------------------------------------------------------------------------------------
# Grading demo (tests/grading/demo): one CPU exercise and one GPU kernel exercise.


def _row_major_cases() -> list[tuple[Any, ...]]:
    return [((4, 8),), ((2, 3, 4),), ((5,),), ((1, 7),), ((3, 1, 2, 2),)]


def _judge_row_major(case: tuple[Any, ...], value: Any, outputs: list[Any]) -> str | None:
    (shape,) = case
    if not isinstance(value, tuple) or len(value) != len(shape):
        return f"expected a tuple of {len(shape)} strides, got {value!r}"
    if any(not isinstance(v, int) for v in value):
        return f"strides must be ints, got {value!r}"
    if value[-1] != 1:
        return f"got {value!r}; in row-major order the last mode is contiguous, so its stride is 1"
    for i in range(len(shape) - 1):
        if value[i] != value[i + 1] * shape[i + 1]:
            return (f"got {value!r}; stepping once along mode {i} must skip a whole row of mode {i + 1}, "
                    f"i.e. stride[{i}] = stride[{i + 1}] * shape[{i + 1}]")
    return None


row_major_strides = Check("row_major_strides", "row_major_strides", _row_major_cases, _judge_row_major)


def _scale_cases() -> list[tuple[Any, ...]]:
    import numpy as np

    rng = np.random.default_rng(2024)
    cases = []
    for n, alpha in ((1, 2.0), (128, -0.5), (1000, 3.25), (4099, 1.5)):
        x = rng.standard_normal(n).astype(np.float32)
        cases.append((sandbox.tensor(x), sandbox.poisoned((n,)), alpha))
    return cases


def _judge_scale(case: tuple[Any, ...], value: Any, outputs: list[Any]) -> str | None:
    import numpy as np

    x = sandbox.decode(case[0]["$tensor"]["array"]).astype(np.float64)
    (out,) = outputs
    if np.isnan(out).any():
        first = int(np.flatnonzero(np.isnan(out))[0])
        return f"{int(np.isnan(out).sum())} of {out.size} outputs were never written (the first is out[{first}])"
    err = relative_error(out, case[2] * x)
    if err > 1e-6:
        return f"relative error {err:.2e} against alpha * x (bound 1e-6)"
    return None


scale = Check("scale", "scale", _scale_cases, _judge_scale, gpu=80)

#: Every check by name, for the grader.
REGISTRY: dict[str, Check] = {c.name: c for c in (row_major_strides, scale)}
