"""The suite's work units for pytest-xdist, with ``--dist loadgroup`` (tools/course.py test loads this plugin with it).

A work unit runs whole on one worker, its tests in order. Two kinds of tests must share one:

- a notebook's cells (nbval): they run in order in one kernel;
- the tests of a module that share a module-, package- or class-scoped fixture (a shared grade, a compiled kernel):
  on one worker it is made once.

Every other test is a unit of its own, so that a slow file's tests spread over the workers instead of keeping one of
them busy while the other waits (``--dist loadfile`` pins a file to one worker). Session-scoped fixtures are made once
per worker whatever the units are, so they tie nothing together.

Why not xdist's own ``xdist_group`` marks: xdist 3.8 turns them into units by rewriting ``item._nodeid``, which
pytest 9 no longer reads (a node's id comes from its ``_id``), so the marks group nothing. Instead each worker writes
the units it computed from its collection to a file the scheduler (controller side) reads.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path

import pytest
from xdist.scheduler import LoadScopeScheduling

#: Fixture scopes whose value tests of one module share.
SHARED_SCOPES = {"module", "package", "class"}
#: The workerinput entry naming the file the workers write the units to (the controller's stash keeps it).
UNITS = "cutecourse_units"
_UNITS_FILE = pytest.StashKey[Path]()


def shared_fixtures(item: pytest.Item) -> list[str]:
    """The fixtures (direct or not, autouse included) that `item` shares with other tests of its module."""
    info = getattr(item, "_fixtureinfo", None)
    if info is None:
        return []
    return sorted(name for name, defs in info.name2fixturedefs.items() if defs and defs[-1].scope in SHARED_SCOPES)


def units(items: list[pytest.Item]) -> dict[str, str]:
    """Each item's nodeid -> its work unit: a notebook's path for its cells; for tests linked by shared fixtures
    (directly or through another test of the module), the module's path and one of those fixtures; the nodeid itself
    for any other test."""
    parent: dict[str, str] = {}

    def find(key: str) -> str:
        while parent.setdefault(key, key) != key:
            parent[key] = key = parent[parent[key]]
        return key

    linked: dict[str, str] = {}
    for item in items:
        path = item.nodeid.split("::")[0]
        if not hasattr(item, "_fixtureinfo"):  # not a Python test: a notebook's cell
            linked[item.nodeid] = path
            continue
        keys = [f"{path}::{name}" for name in shared_fixtures(item)]
        for key in keys[1:]:
            a, b = find(keys[0]), find(key)
            parent[max(a, b)] = min(a, b)
        linked[item.nodeid] = keys[0] if keys else item.nodeid
    return {nodeid: find(key) for nodeid, key in linked.items()}


class UnitScheduling(LoadScopeScheduling):
    """xdist's scope scheduling (units handed out whole, the largest first) over `units`' work units."""

    def __init__(self, config: pytest.Config, log, source: Path) -> None:
        super().__init__(config, log)
        self.source = source
        self.unit: dict[str, str] | None = None

    def _split_scope(self, nodeid: str) -> str:
        if self.unit is None:  # first called once every worker has collected (and written the units)
            self.unit = json.loads(self.source.read_text()) if self.source.exists() else {}
        # Without the workers' units (this plugin not loaded there), a file is a unit, as with --dist loadfile.
        return self.unit.get(nodeid) or nodeid.split("::")[0]


def _units_file(config: pytest.Config) -> Path | None:
    return config.stash.get(_UNITS_FILE, None)


def pytest_configure(config: pytest.Config) -> None:
    if config.getoption("dist", None) == "loadgroup" and not hasattr(config, "workerinput"):
        config.stash[_UNITS_FILE] = Path(tempfile.mkdtemp(prefix="cutecourse-units-")) / "units.json"


def pytest_unconfigure(config: pytest.Config) -> None:
    source = _units_file(config)
    if source is not None:
        shutil.rmtree(source.parent, ignore_errors=True)


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node) -> None:
    source = _units_file(node.config)
    if source is not None:
        node.workerinput[UNITS] = str(source)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log):
    source = _units_file(config)
    return None if source is None else UnitScheduling(config, log, source)


@pytest.hookimpl(trylast=True)  # the items as run: after every other plugin has reordered or deselected them
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    target = getattr(config, "workerinput", {}).get(UNITS)
    if target is None:
        return
    mine = Path(f"{target}.{config.workerinput['workerid']}")
    mine.write_text(json.dumps(units(items)))
    os.replace(mine, target)  # every worker writes the same units: whichever lands last, the file is whole
