"""The code a learner's process runs, sliced from the master notebook: the learner's answers in place of the stubs,
the master cells they need (`needed_cells`), and the master with the answers in it for nbval (`merged_notebook`).
"""

from __future__ import annotations

import ast
import contextlib
import symtable
from typing import Any

from cutecourse.grading import harness
from cutecourse.grading import notebook as nbio


def _strip_magics(text: str) -> str:
    # IPython-only lines (%magic, !shell) mean nothing to a plain Python process.
    return "\n".join("pass  # " + line if line.lstrip().startswith(("%", "!")) else line for line in text.splitlines())


def answer_source(cell: dict[str, Any], answers: dict[str, dict[str, Any]]) -> str:
    """The learner's answer for the master's answer `cell` (or the master's stub); a kernel answer that is not kernel
    code only becomes a line that raises why, so that the exercise fails with it."""
    info = nbio.meta(cell)
    text = nbio.source(answers.get(info["exercise"], cell))
    why = harness.restricted(text, info.get("forbid", [])) if info.get("kernel") else None
    if why:
        return f"raise PermissionError({'exercise ' + info['exercise'] + ' is not graded: ' + why!r})\n"
    return text


def learner_cells(master: dict[str, Any], sub: dict[str, Any], hidden: str = "") -> list[dict[str, str]]:
    """The code a plain learner process runs: the learner's answers in place of the stubs, and of the master's other
    code cells only what they need (:func:`needed_cells`); check cells and GPU demonstration cells are left out.
    `hidden` is the lesson's hidden-test source, whose string constants may name what the tests call."""
    answers = nbio.answers(sub)
    cells, roots = [], set()
    for index, cell in enumerate(master["cells"]):
        if cell.get("cell_type") != "code":
            continue
        if nbio.is_check(cell):
            roots |= _reads(_strip_magics(nbio.source(cell)))
        elif nbio.is_answer(cell):
            exercise = nbio.meta(cell)["exercise"]
            cells.append({"label": f"exercise {exercise}", "exercise": exercise,
                          "source": _strip_magics(answer_source(cell, answers))})
        elif "gpu" not in nbio.tags(cell):
            cells.append({"label": f"cell {index}", "source": _strip_magics(nbio.source(cell))})
    if hidden:
        with contextlib.suppress(SyntaxError, ValueError):
            roots |= {n.value for n in ast.walk(ast.parse(hidden)) if isinstance(n, ast.Constant)
                      and isinstance(n.value, str) and n.value.isidentifier()}
    return needed_cells(cells, roots)


def _reads(source: str) -> set[str]:
    """The global names `source` reads: at its top level, or free in its functions, classes and comprehensions."""
    try:
        tables = [symtable.symtable(source, "<cell>", "exec")]
    except (SyntaxError, ValueError):
        return set()
    found = set()
    while tables:
        table = tables.pop()
        tables += table.get_children()
        top = table.get_type() == "module"
        found |= {s.get_name() for s in table.get_symbols()
                  if s.is_referenced() and (top or s.is_global() or (table.get_type() == "class" and not s.is_local()))}
    return found


def _bindings_of(statement: ast.stmt) -> set[str] | None:
    """The global names a top-level statement binds or changes (``x.a = ...`` and ``x[i] = ...`` change ``x``);
    None where it cannot be told (``global``, a star import)."""
    found: set[str] = set()
    for node in ast.walk(statement):
        if isinstance(node, (ast.Global, ast.Nonlocal)) or (isinstance(node, ast.alias) and node.name == "*"):
            return None
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            found.add(node.name)
        elif isinstance(node, ast.alias):
            found.add((node.asname or node.name).split(".")[0])
        elif isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
            found.add(node.id)
        elif isinstance(node, (ast.Attribute, ast.Subscript)) and not isinstance(node.ctx, ast.Load):
            base = node.value
            while isinstance(base, (ast.Attribute, ast.Subscript)):
                base = base.value
            if isinstance(base, ast.Name):
                found.add(base.id)
    return found


def needed_cells(cells: list[dict[str, str]], roots: set[str] = frozenset()) -> list[dict[str, str]]:
    """Of the master's cells, those the answers (and the names in `roots`) need, in order, with the answers.

    nbval runs the whole lesson once; a plain learner process needs only what its answers read. A master cell is
    kept when it binds a name that a kept cell reads (the last binding before the reader, and the last one of all,
    which is what a function sees when it is called); an import of such a name is kept as that statement alone. A
    cell whose bindings cannot be told (``global``, ``import *``, not Python) is always kept. What the analysis
    cannot see is a change made through a method call (``config.update(...)``): a lesson whose answers need one binds
    it instead (``config = ...``); the solutions' grading tests show every lesson's answers get what they need."""
    parsed: list[list[ast.stmt] | None] = []
    bound_by: dict[str, list[tuple[int, int]]] = {}  # name -> (cell, statement) that bind it, in order
    for i, cell in enumerate(cells):
        try:
            statements = ast.parse(cell["source"]).body
        except (SyntaxError, ValueError):
            statements = None
        bindings = [_bindings_of(st) for st in statements or []]
        parsed.append(None if statements is None or None in bindings else statements)
        for j, names in enumerate(bindings):
            for name in names or ():
                bound_by.setdefault(name, []).append((i, j))
    keep: dict[int, set[int] | None] = {}  # cell -> the statements kept (None: the whole cell)
    work: list[tuple[int, set[str]]] = [(len(cells), set(roots))]

    def whole(i: int) -> None:
        if i not in keep or keep[i] is not None:
            keep[i] = None
            work.append((i, _reads(cells[i]["source"])))

    for i, cell in enumerate(cells):
        if cell.get("exercise") or parsed[i] is None:
            whole(i)
    while work:
        reader, names = work.pop()
        for name in names:
            binders = [b for b in bound_by.get(name, ()) if b[0] != reader]
            before = [b for b in binders if b[0] < reader]
            for i, j in {max(binders, default=None), max(before, default=None)} - {None}:
                if parsed[i] is None:
                    continue  # kept whole already
                if not isinstance(parsed[i][j], (ast.Import, ast.ImportFrom)):
                    whole(i)
                elif keep.get(i, ()) is not None:
                    keep.setdefault(i, set()).add(j)
    kept = []
    for i, cell in enumerate(cells):
        if keep.get(i, ()) is None:
            kept.append(cell)
        elif i in keep:
            text = "\n".join(ast.get_source_segment(cell["source"], parsed[i][j]) or "" for j in sorted(keep[i]))
            kept.append({"label": cell["label"] + " (imports)", "source": text + "\n"})
    return kept


def forbidden(master: dict[str, Any]) -> dict[str, list[str]]:
    """Per exercise, the functions its answer may not use (the answer cell's ``forbid`` metadata), made stubs in its
    learner process; a kernel exercise's are refused in its source instead (`answer_source`)."""
    found = {}
    for cell in master["cells"]:
        if nbio.is_answer(cell) and not nbio.meta(cell).get("kernel"):
            names = nbio.meta(cell).get("forbid", [])
            found[nbio.meta(cell)["exercise"]] = [str(n) for n in names] if isinstance(names, list) else []
    return found


def merged_notebook(master: dict[str, Any], sub: dict[str, Any], gpu: bool,
                    exercises: frozenset[str] | None = None) -> dict[str, Any]:
    """The master with the learner's answers in it, for nbval: the check cells run the checks' stand-in, whose
    records the grader judges, so their output is not compared; GPU cells skip without a GPU; with `exercises`, the
    answer and check cells of other exercises skip."""
    nb = nbio.clone(master)
    answers = nbio.answers(sub)
    for cell in nb["cells"]:
        if cell.get("cell_type") != "code":
            continue
        cell_tags = set(nbio.tags(cell))
        if nbio.is_answer(cell):
            nbio.set_source(cell, answer_source(cell, answers))
            cell["outputs"] = []
        if nbio.is_check(cell) or "gpu" in cell_tags:
            cell_tags.add("nbval-ignore-output")  # the grader judges the checks; GPU demos differ run to run
        if "gpu" in cell_tags and not gpu:
            cell_tags.add("nbval-skip")
        other = nbio.meta(cell).get("exercise")
        if exercises is not None and other is not None and str(other) not in exercises:
            cell_tags.add("nbval-skip")
        cell.setdefault("metadata", {})["tags"] = sorted(cell_tags)
    return nb
