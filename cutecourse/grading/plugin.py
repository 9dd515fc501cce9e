"""pytest plugin for the course's tests and the hidden tests: the `gpu(cc)` and `exercise(id, points)` markers,
the `learner` fixture, and, under nbval, GPU-tagged notebook cells whose output is not compared.

`gpu(cc)` skips a test, with the reason, where the doctor's verdict says kernels for `cc` cannot run (no DSL, no GPU
of compute capability `cc`, a driver too old for the DSL's build, a CPU-only torch); the grader reports such tests
as "not run", never as passed. Hidden tests use `learner`, a :class:`sandbox.Learner` holding the answers the grader
extracted (``CUTECOURSE_ANSWERS`` names their JSON file), jailed in the submission's walls (``CUTECOURSE_WALLS``),
without the functions the test's exercise forbids. A hidden test must name its exercise and may not be
parametrized: its points are its marker's, once.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Callable, Iterator

import pytest

from cutecourse import env
from cutecourse.grading import isolation, sandbox

ANSWERS_ENV = "CUTECOURSE_ANSWERS"
#: Memory for one submission's learner processes, without and with a GPU (CUDA, torch and the DSL take more).
CPU_MEMORY_MB = 8192
GPU_MEMORY_MB = 32768


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--cutecourse-exercise", default=None,
                     help="run only the hidden tests of these exercises (comma-separated ids)")


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
    _only_exercise(config, items)
    machine: env.Machine = config._cutecourse_machine  # type: ignore[attr-defined]
    for item in items:
        cell_tags = getattr(item, "cell", {}).get("metadata", {}).get("tags", [])  # nbval's notebook cells
        if "gpu" in cell_tags:
            # A GPU cell's output is the machine's (timings; "not run" without a GPU): it runs, but is not compared.
            item.options["check"] = False
        if item.get_closest_marker("exercise") is not None and hasattr(item, "callspec"):
            # The grader reads a hidden test's points from its marker, once (run_hidden.hidden_tests).
            raise pytest.UsageError(f"{item.nodeid}: a graded test may not be parametrized (its points would "
                                    f"count once per parameter); loop over the cases inside it")
        marker = item.get_closest_marker("gpu")
        if marker is None:
            continue
        blocked = machine.kernels_blocked(_required_capability(marker))  # the doctor's verdict, driver included
        if blocked is not None:
            item.add_marker(pytest.mark.skip(reason=f"not run: {blocked}"))


def _only_exercise(config: pytest.Config, items: list[pytest.Item]) -> None:
    """With --cutecourse-exercise, deselect every test of another exercise."""
    option = config.getoption("--cutecourse-exercise", None)
    if option is None:
        return
    wanted = set(option.split(","))
    keep = [i for i in items if (m := i.get_closest_marker("exercise")) is not None and str(m.args[0]) in wanted]
    config.hook.pytest_deselected(items=[i for i in items if i not in keep])
    items[:] = keep


@pytest.fixture(scope="session")
def _learners() -> Iterator[Callable[[str], sandbox.Learner]]:
    """A learner process for the set of forbidden functions of the test's exercise, made when first needed (hidden
    tests run in the order of their exercises, so a process serves all the tests of a set)."""
    path, walls_spec = os.environ.get(ANSWERS_ENV), os.environ.get(isolation.WALLS_ENV)
    if not path or not walls_spec:
        raise pytest.UsageError(f"hidden tests need the learner's answers: run them through `cutecourse grade`, "
                                f"which sets {ANSWERS_ENV} and {isolation.WALLS_ENV}")
    answers = json.loads(Path(path).read_text())
    walls = isolation.Walls.reopen(walls_spec)
    processes: dict[tuple[str, ...], sandbox.Learner] = {}

    def for_exercise(exercise: str) -> sandbox.Learner:
        forbid = tuple(answers["forbid"].get(exercise, []))
        if forbid not in processes:
            # One learner process at a time: each holds torch and the DSL, and the submission's memory is shared.
            for other in processes.values():
                other.close()
            processes.clear()
            processes[forbid] = sandbox.Learner(answers["cells"], walls, forbid=forbid, exercise=exercise,
                                                deny=answers["deny"])
        return processes[forbid]

    yield for_exercise
    for process in processes.values():
        process.close()


@pytest.fixture
def learner(request: pytest.FixtureRequest, _learners: Callable[[str], sandbox.Learner]) -> sandbox.Learner:
    marker = request.node.get_closest_marker("exercise")
    if marker is None:
        raise pytest.UsageError(f"{request.node.nodeid} uses `learner` but names no exercise: "
                                f"@pytest.mark.exercise(\"N.M\", points=P)")
    return _learners(str(marker.args[0]))
