"""Checks of the grading demo (tests/grading/demo): one CPU exercise and one GPU kernel exercise."""

from __future__ import annotations

from typing import Any

from cutecourse.grading import wire
from cutecourse.grading.checks import Check, relative_error


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
        cases.append((wire.tensor(x), wire.poisoned((n,)), alpha))
    return cases


def _judge_scale(case: tuple[Any, ...], value: Any, outputs: list[Any]) -> str | None:
    import numpy as np

    x = wire.decode(case[0]["$tensor"]["array"]).astype(np.float64)
    (out,) = outputs
    if np.isnan(out).any():
        first = int(np.flatnonzero(np.isnan(out))[0])
        return f"{int(np.isnan(out).sum())} of {out.size} outputs were never written (the first is out[{first}])"
    err = relative_error(out, case[2] * x)
    if err > 1e-6:
        return f"relative error {err:.2e} against alpha * x (bound 1e-6)"
    return None


scale = Check("scale", "scale_host", _scale_cases, _judge_scale, gpu=80, via="launch")
