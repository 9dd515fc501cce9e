"""What the linter (ruff, `make test`) does not check of STYLE.md: one assignment a line. ``a, b, c = x, y, z`` packs
three statements into one; unpacking a call's result (``tidx, _, _ = cute.arch.thread_idx()``) is one."""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FOLDERS = ("cutecourse", "tests", "benchmarks", "tools", "cloud")


def packed(source: str) -> list[int]:
    """The lines of `source` that assign three or more values written out as a tuple to as many names."""
    return [node.lineno for node in ast.walk(ast.parse(source))
            if isinstance(node, ast.Assign) and any(isinstance(t, ast.Tuple) for t in node.targets)
            and isinstance(node.value, ast.Tuple) and len(node.value.elts) >= 3]


def test_no_assignment_packs_three_or_more_values():
    found = [f"{path.relative_to(ROOT)}:{line}" for folder in FOLDERS for path in sorted((ROOT / folder).rglob("*.py"))
             for line in packed(path.read_text(encoding="utf-8"))]
    assert found == [], "one assignment a line (STYLE.md): " + ", ".join(found)


def test_the_finder_tells_packing_from_unpacking():
    source = "m, n, k = 1, 2, 3\ntidx, _, _ = thread_idx()\na, b = b, a\nrow = (1, 2, 3)\n"
    assert packed(source) == [1]
