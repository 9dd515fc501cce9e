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
_EXERCISE_ID = re.compile(r"^\d{1,2}\.\d{1,2}$")
#: What a submission may be: a notebook file of at most this size, this many cells, answers of at most this length.
MAX_SUBMISSION_BYTES = 16 * 2**20
MAX_CELLS = 5000
MAX_ANSWER_CHARS = 200_000


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


def load_submission(path: str | Path) -> dict[str, Any]:
    """A learner's notebook, checked before anything of it is used: its size, its JSON, and the structure and types
    of every cell the grader reads. ValueError("submission rejected: why") otherwise; only answer cells are used."""
    path = Path(path)

    def rejected(why: str) -> ValueError:
        return ValueError(f"submission rejected: {why}")

    if not path.exists():
        raise rejected(f"{path.name} was not handed in; hand in your notebook under exactly that name")
    try:
        size = path.stat().st_size
        if size > MAX_SUBMISSION_BYTES:
            raise rejected(f"{path.name} is {size:,} bytes; the limit is {MAX_SUBMISSION_BYTES >> 20} MiB "
                           f"(clear the outputs: Edit > Clear Outputs of All Cells, then save)")
        with path.open("rb") as f:
            data = f.read(MAX_SUBMISSION_BYTES + 1)
        nb = json.loads(data.decode("utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise rejected(f"cannot read {path.name} as a notebook ({type(exc).__name__}: {str(exc)[:200]}); submit the "
                       f".ipynb file itself") from None
    except RecursionError:
        raise rejected(f"{path.name} nests JSON too deeply to be a notebook") from None
    if not isinstance(nb, dict) or nb.get("nbformat") != 4 or not isinstance(nb.get("cells"), list):
        raise rejected(f"{path.name} is not an nbformat-4 notebook; save it from Jupyter and submit the .ipynb")
    if len(nb["cells"]) > MAX_CELLS:
        raise rejected(f"{len(nb['cells'])} cells; a lesson has far fewer than {MAX_CELLS}")
    seen: set[str] = set()
    for index, cell in enumerate(nb["cells"]):
        if not isinstance(cell, dict):
            raise rejected(f"cell {index} is a {type(cell).__name__}, not a cell")
        if not isinstance(cell.get("metadata", {}), dict) or not isinstance(cell.get("cell_type", ""), str):
            raise rejected(f"cell {index} has metadata or a cell type of the wrong type")
        info = cell.get("metadata", {}).get("cutecourse", {})
        tag_list = cell.get("metadata", {}).get("tags", [])
        tags_ok = isinstance(tag_list, list) and all(isinstance(t, str) for t in tag_list)
        if not isinstance(info, dict) or not tags_ok:
            raise rejected(f"cell {index}: its cutecourse metadata or its tags have the wrong type")
        if not is_answer(cell):
            continue
        exercise, text = info["exercise"], cell.get("source", "")
        if not isinstance(exercise, str) or not _EXERCISE_ID.match(exercise):
            raise rejected(f"cell {index}: exercise id {str(exercise)[:40]!r} is not of the form N.M")
        if exercise in seen:
            raise rejected(f"exercise {exercise} has two answer cells; keep one")
        seen.add(exercise)
        if not (isinstance(text, str) or (isinstance(text, list) and all(isinstance(t, str) for t in text))):
            raise rejected(f"exercise {exercise}: the cell's source is not text")
        if len(source(cell)) > MAX_ANSWER_CHARS:
            raise rejected(f"exercise {exercise}: the answer has {len(source(cell))} characters; the limit is "
                           f"{MAX_ANSWER_CHARS}")
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
