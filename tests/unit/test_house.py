"""The house (docs/HOUSE.md): the package's import graph, computed from the source with `ast`, has no cycle between
modules, none between packages, and no import that climbs the layer order the page writes down. Imports inside
functions count (they are real dependencies); those under ``if TYPE_CHECKING:`` do not. Each failure names the two
modules and the import line. The checker is shown failing on a small package made to be wrong."""

from __future__ import annotations

import ast
import textwrap
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
HOUSE = ROOT / "docs" / "HOUSE.md"


@dataclass(frozen=True)
class Import:
    """`importer` imports `target` at `line` of its file (`text`: that line)."""

    importer: str
    target: str
    line: int
    text: str

    def __str__(self) -> str:
        return f"{self.importer} -> {self.target} (line {self.line}: {self.text})"


def read_layers(page: Path) -> list[list[str]]:
    """The layers the page's first fenced block writes, lowest first: on each line that does not start with a space,
    the names before the first two spaces (``kernels/gemm/`` is ``kernels.gemm``; ``a, b`` is two names)."""
    text = page.read_text(encoding="utf-8")
    block = text.split("```\n")[1]
    layers = []
    for line in block.splitlines():
        if line and not line[0].isspace():
            names = line.split("  ")[0]
            layers.append([n.strip().strip("/").replace("/", ".") for n in names.split(",")])
    return layers


def modules(root: Path, package: str) -> dict[str, Path]:
    """Every module of the package under `root`, by dotted name (a package by its own name: its ``__init__``)."""
    found = {}
    for path in sorted((root / package).rglob("*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def _type_checking_only(node: ast.AST) -> bool:
    test = node.test if isinstance(node, ast.If) else None
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _import_nodes(tree: ast.AST) -> list[ast.Import | ast.ImportFrom]:
    """Every import statement in `tree`, inside functions too, except the body of ``if TYPE_CHECKING:``."""
    found = []
    stack = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            found.append(node)
        elif _type_checking_only(node):
            stack.extend(node.orelse)
        else:
            stack.extend(ast.iter_child_nodes(node))
    return sorted(found, key=lambda n: n.lineno)


def import_graph(root: Path, package: str) -> dict[str, list[Import]]:
    """For each module of `package` (under `root`), the modules of the package it imports. ``from m import name``
    counts as importing ``m.name`` where that is a module, else ``m``; relative imports are resolved."""
    mods = modules(root, package)
    graph: dict[str, list[Import]] = {}
    for name, path in mods.items():
        source = path.read_text(encoding="utf-8")
        lines = source.splitlines()
        here = name if path.name == "__init__.py" else name.rpartition(".")[0]
        edges = []
        for node in _import_nodes(ast.parse(source, str(path))):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            else:
                base = node.module or ""
                if node.level:
                    parts = here.split(".")
                    base = ".".join(parts[:len(parts) - node.level + 1] + ([node.module] if node.module else []))
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in mods else base for a in node.names]
            for target in targets:
                while target and target not in mods:
                    target = target.rpartition(".")[0]
                if target and target != name:
                    edges.append(Import(name, target, node.lineno, lines[node.lineno - 1].strip()))
        graph[name] = list({(e.target, e.line): e for e in edges}.values())
    return graph


def package_of(module: str, layers: list[list[str]], package: str) -> str | None:
    """The longest name of `layers` that `module` is or lies in (``__init__``: the package itself); None if none."""
    inside = module[len(package) + 1:] if module != package else "__init__"
    names = [n for layer in layers for n in layer if inside == n or inside.startswith(n + ".")]
    return max(names, key=len, default=None)


def cycles(graph: dict[str, list[Import]]) -> list[list[Import]]:
    """For each group of nodes that import each other round a loop (a strongly connected component of more than one
    node, by Tarjan's algorithm), every import between two nodes of the group."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[Import]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for e in graph.get(v, []):
            if e.target not in index:
                visit(e.target)
                low[v] = min(low[v], low[e.target])
            elif e.target in stack:
                low[v] = min(low[v], index[e.target])
        if low[v] == index[v]:
            group = {stack.pop()}
            while v not in group:
                group.add(stack.pop())
            if len(group) > 1:
                found.append([e for w in sorted(group) for e in graph.get(w, []) if e.target in group])

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def package_graph(graph: dict[str, list[Import]], layers: list[list[str]], package: str) -> dict[str, list[Import]]:
    """The imports between packages of the house: each import of one module by another in a different package, under
    the importer's package (an edge's `importer` and `target` stay the modules)."""
    found: dict[str, list[Import]] = {}
    for imports in graph.values():
        for e in imports:
            a = package_of(e.importer, layers, package)
            b = package_of(e.target, layers, package)
            if a and b and a != b:
                found.setdefault(a, []).append(Import(a, b, e.line, f"{e.importer} -> {e.target}: {e.text}"))
    return found


def climbs(graph: dict[str, list[Import]], layers: list[list[str]], package: str) -> list[str]:
    """Each import whose target's layer is above the importer's, as a line naming both layers."""
    level = {name: i for i, layer in enumerate(layers) for name in layer}
    found = []
    for imports in graph.values():
        for e in imports:
            a = package_of(e.importer, layers, package)
            b = package_of(e.target, layers, package)
            if a and b and level[b] > level[a]:
                found.append(f"{e} climbs from layer {a} up to layer {b}")
    return found


def unplaced(graph: dict[str, list[Import]], layers: list[list[str]], package: str) -> list[str]:
    return [m for m in sorted(graph) if package_of(m, layers, package) is None]


def describe_cycles(found: list[list[Import]]) -> list[str]:
    return ["these import each other round a loop: " + "; ".join(str(e) for e in group) for group in found]


# --------------------------------------------------------------------------- the real package

@pytest.fixture(scope="module")
def house() -> tuple[dict[str, list[Import]], list[list[str]]]:
    return import_graph(ROOT, "cutecourse"), read_layers(HOUSE)


def test_the_page_names_each_package_once_and_every_module_sits_in_a_layer(house):
    graph, layers = house
    names = [n for layer in layers for n in layer]
    assert len(names) == len(set(names)), names
    assert {"layout", "hw", "kernels", "kernels.gemm", "viz", "grading", "env", "cli", "__init__"} <= set(names)
    missing = unplaced(graph, layers, "cutecourse")
    assert not missing, f"in no layer of {HOUSE.name}: " + ", ".join(missing)


def test_no_two_modules_import_each_other_directly_or_round_a_loop(house):
    graph, _ = house
    found = describe_cycles(cycles(graph))
    assert not found, "\n".join(found)


def test_no_two_packages_import_each_other_directly_or_round_a_loop(house):
    graph, layers = house
    found = describe_cycles(cycles(package_graph(graph, layers, "cutecourse")))
    assert not found, "\n".join(found)


def test_no_import_climbs_the_layers(house):
    graph, layers = house
    found = climbs(graph, layers, "cutecourse")
    assert not found, "\n".join(found)


# --------------------------------------------------------------------------- the checker, on a package made wrong

def write_package(root: Path, files: dict[str, str]) -> None:
    for name, source in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(source), encoding="utf-8")


PAGE = """# layers
```
low/      the bottom
high/     the top, imports low
top       a module
```
"""


def test_the_checker_finds_a_cycle_a_package_cycle_and_a_climb(tmp_path):
    write_package(tmp_path, {
        "pkg/__init__.py": "",
        "pkg/top.py": "from pkg.high import b\n",
        "pkg/low/__init__.py": "",
        "pkg/low/a.py": """
            from typing import TYPE_CHECKING

            if TYPE_CHECKING:
                from pkg.top import nothing  # not counted


            def f():
                from ..high import b  # inside a function: counted, and a climb
                return b
        """,
        "pkg/high/__init__.py": "",
        "pkg/high/b.py": "from . import c\nfrom pkg.low.a import f\n",
        "pkg/high/c.py": "import pkg.high.b\n",
    })
    (tmp_path / "HOUSE.md").write_text(PAGE, encoding="utf-8")
    graph = import_graph(tmp_path, "pkg")
    layers = read_layers(tmp_path / "HOUSE.md")
    assert layers == [["low"], ["high"], ["top"]]
    assert [e.target for e in graph["pkg.low.a"]] == ["pkg.high.b"]  # the TYPE_CHECKING import is left out
    assert [(e.target, e.line) for e in graph["pkg.high.b"]] == [("pkg.high.c", 1), ("pkg.low.a", 2)]

    module_cycles = describe_cycles(cycles(graph))
    assert len(module_cycles) == 1
    assert "pkg.high.b -> pkg.high.c (line 1: from . import c)" in module_cycles[0]
    assert "pkg.high.c -> pkg.high.b (line 1: import pkg.high.b)" in module_cycles[0]
    assert "pkg.low.a -> pkg.high.b (line 9: from ..high import b" in module_cycles[0]

    package_cycles = describe_cycles(cycles(package_graph(graph, layers, "pkg")))
    assert package_cycles == ["these import each other round a loop: "
                              "high -> low (line 2: pkg.high.b -> pkg.low.a: from pkg.low.a import f); "
                              "low -> high (line 9: pkg.low.a -> pkg.high.b: from ..high import b  # inside a "
                              "function: counted, and a climb)"]

    assert climbs(graph, layers, "pkg") == [
        "pkg.low.a -> pkg.high.b (line 9: from ..high import b  # inside a function: counted, and a climb) "
        "climbs from layer low up to layer high"]
    assert unplaced(graph, layers, "pkg") == ["pkg"]  # the package's __init__ is in no layer of this page


def test_the_checker_passes_a_package_that_keeps_the_house(tmp_path):
    write_package(tmp_path, {
        "pkg/__init__.py": "",
        "pkg/top.py": "from pkg.high import b\nfrom .low import a\n",
        "pkg/low/__init__.py": "",
        "pkg/low/a.py": "def f():\n    return 1\n",
        "pkg/high/__init__.py": "from .b import g\n",
        "pkg/high/b.py": "from pkg.low.a import f\n\n\ndef g():\n    return f()\n",
    })
    (tmp_path / "HOUSE.md").write_text(PAGE.replace("top       a module", "top, __init__  the top"), encoding="utf-8")
    graph = import_graph(tmp_path, "pkg")
    layers = read_layers(tmp_path / "HOUSE.md")
    assert layers[-1] == ["top", "__init__"]
    assert cycles(graph) == [] and cycles(package_graph(graph, layers, "pkg")) == []
    assert climbs(graph, layers, "pkg") == [] and unplaced(graph, layers, "pkg") == []
