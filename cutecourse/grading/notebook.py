"""Notebooks as plain JSON, and the roles of their cells.

A solution notebook marks answers nbgrader-style, between ``### BEGIN SOLUTION`` and ``### END SOLUTION``, in a cell
whose metadata names the exercise: ``{"cutecourse": {"exercise": "2.3", "title": "compose A with B"}}``. Check cells
carry the tag ``check`` and name the check they run: ``{"cutecourse": {"check": "composition"}}``. Cells that need a
GPU carry the tag ``gpu``. Reading needs no jupyter, so the grader's hidden-test half runs on a bare GPU host.
"""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path
from typing import Any

BEGIN, END = "### BEGIN SOLUTION", "### END SOLUTION"
_NAME = re.compile(r"^(\d\d)_[a-z0-9_]+\.ipynb$")


def load(path: str | Path) -> dict[str, Any]:
    """Read a notebook; raise ValueError naming the file if it is not an nbformat-4 notebook."""
    path = Path(path)
    try:
        nb = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValueError(f"{path}: cannot read it as a notebook ({exc}); submit the .ipynb file itself") from None
    if not isinstance(nb, dict) or nb.get("nbformat") != 4 or not isinstance(nb.get("cells"), list):
        raise ValueError(f"{path}: not an nbformat-4 notebook; save it from Jupyter and submit the .ipynb")
    return nb


def dumps(nb: dict[str, Any]) -> str:
    """The stored form: stable key order and indentation, so rebuilding an unchanged notebook changes no byte."""
    return json.dumps(nb, indent=1, ensure_ascii=False, sort_keys=True) + "\n"


def dump(nb: dict[str, Any], path: str | Path) -> None:
    Path(path).write_text(dumps(nb), encoding="utf-8")


def source(cell: dict[str, Any]) -> str:
    src = cell.get("source", "")
    return "".join(src) if isinstance(src, list) else str(src)


def set_source(cell: dict[str, Any], text: str) -> None:
    cell["source"] = text.splitlines(keepends=True)


def tags(cell: dict[str, Any]) -> list[str]:
    return list(cell.get("metadata", {}).get("tags", []))


def meta(cell: dict[str, Any]) -> dict[str, Any]:
    return dict(cell.get("metadata", {}).get("cutecourse", {}))


def is_answer(cell: dict[str, Any]) -> bool:
    return cell.get("cell_type") == "code" and "exercise" in meta(cell) and "check" not in tags(cell)


def is_check(cell: dict[str, Any]) -> bool:
    return cell.get("cell_type") == "code" and "check" in tags(cell)


def answers(nb: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Answer cells by exercise id, in notebook order."""
    return {meta(c)["exercise"]: c for c in nb["cells"] if is_answer(c)}


def checks(nb: dict[str, Any]) -> list[dict[str, Any]]:
    return [c for c in nb["cells"] if is_check(c)]


def lesson_number(path: str | Path) -> str:
    """The NN of ``NN_name.ipynb``; ValueError with the expected form otherwise."""
    name = Path(path).name
    match = _NAME.match(name)
    if not match:
        raise ValueError(f"{name!r} is not a lesson notebook name; expected NN_name.ipynb, e.g. 02_layouts.ipynb")
    return match.group(1)


def clone(nb: dict[str, Any]) -> dict[str, Any]:
    return copy.deepcopy(nb)
