"""pytest plugin for the course's tests and the hidden tests: the `gpu(cc)` and `exercise(id, points)` markers,
the `learner` fixture, and, under nbval, GPU-tagged notebook cells whose output is not compared.

`gpu(cc)` skips a test, with the reason, on machines without the DSL or a GPU of compute capability `cc`; the grader
reports such tests as "not run", never as passed. Hidden tests use `learner`, a :class:`sandbox.Learner` holding the
answers the grader extracted (``CUTECOURSE_ANSWERS`` names their JSON file), and call into it.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Iterator

import pytest

from cutecourse import env
from cutecourse.grading import sandbox

ANSWERS_ENV, DENY_ENV = "CUTECOURSE_ANSWERS", "CUTECOURSE_DENY"
#: Address space for a learner process on a CPU machine; CUDA reserves far more, so GPU machines get no limit.
CPU_MEMORY_MB = 8192


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "gpu(cc): needs a GPU of compute capability cc (e.g. gpu(90))")
    config.addinivalue_line("markers", "exercise(id, points=1): the exercise a hidden test grades, and its points")
    config._cutecourse_machine = env.probe()  # type: ignore[attr-defined]


def _required_capability(marker: pytest.Mark) -> int:
    cc = marker.args[0] if marker.args else marker.kwargs.get("cc", 80)
    if not isinstance(cc, int) or cc < 50:
        raise pytest.UsageError(f"@pytest.mark.gpu({cc!r}): give the compute capability as an int, e.g. gpu(90)")
    return cc


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    machine: env.Machine = config._cutecourse_machine  # type: ignore[attr-defined]
    have = None if machine.capability is None else machine.capability[0] * 10 + machine.capability[1]
    for item in items:
        cell_tags = getattr(item, "cell", {}).get("metadata", {}).get("tags", [])  # nbval's notebook cells
        if "gpu" in cell_tags and "nbval-check-output" not in cell_tags:
            # A GPU cell's output is the machine's (timings; "not run" without a GPU): it runs, but is not compared.
            # The grader tags the GPU check cells it grades nbval-check-output, and those stay compared.
            item.options["check"] = False
        exercise = item.get_closest_marker("exercise")
        if exercise is not None:
            item.user_properties.append(("exercise", str(exercise.args[0])))
            item.user_properties.append(("points", str(exercise.kwargs.get("points", 1))))
        marker = item.get_closest_marker("gpu")
        if marker is None:
            continue
        need = _required_capability(marker)
        if machine.dsl is None:
            reason = f"not run: needs the CuTe DSL and sm_{need}"
        elif have is None:
            reason = f"not run: needs sm_{need}; this machine has no GPU"
        elif have < need:
            reason = f"not run: needs sm_{need}; this GPU is sm_{have}"
        else:
            continue
        item.add_marker(pytest.mark.skip(reason=reason))


@pytest.fixture(scope="session")
def learner(pytestconfig: pytest.Config) -> Iterator[sandbox.Learner]:
    path = os.environ.get(ANSWERS_ENV)
    if not path:
        raise pytest.UsageError(f"hidden tests need the learner's answers: run them through `cutecourse grade`, "
                                f"which sets {ANSWERS_ENV}")
    cells = json.loads(Path(path).read_text())
    deny = [d for d in os.environ.get(DENY_ENV, "").split(os.pathsep) if d]
    machine: env.Machine = pytestconfig._cutecourse_machine  # type: ignore[attr-defined]
    with sandbox.Learner(cells, deny=deny, memory_mb=None if machine.capability else CPU_MEMORY_MB,
                         preload=sandbox.PRELOAD) as process:
        yield process
