"""Build exercise notebooks from solutions: answers become stubs, check cells keep the solution's outputs.

``cutecourse build`` writes ``exercises/NN_name.ipynb`` for every ``solutions/NN_name.ipynb``;
``cutecourse build --check`` fails when an exercise on disk differs from what the build would write.
``--execute`` first runs each solution top to bottom, so the expected outputs are the solution's own.
"""

from __future__ import annotations

import re
import textwrap
from pathlib import Path
from typing import Any

from cutecourse.grading import notebook as nbio

_REGION = re.compile(rf"^([ \t]*){re.escape(nbio.BEGIN)}[^\n]*\n.*?^[ \t]*{re.escape(nbio.END)}[^\n]*(\n|$)",
                     re.MULTILINE | re.DOTALL)


def stub_message(cell: dict[str, Any]) -> str:
    info = nbio.meta(cell)
    return f"Exercise {info['exercise']}: {info.get('title', 'fill in this cell')}"


def stub(cell: dict[str, Any]) -> str:
    """The answer cell's source with every solution region replaced by a ``raise NotImplementedError``."""
    text = nbio.source(cell)
    if nbio.BEGIN not in text:
        raise ValueError(f"exercise {nbio.meta(cell)['exercise']}: the answer cell has no '{nbio.BEGIN}' marker; "
                         f"wrap the answer in {nbio.BEGIN} / {nbio.END}")
    message = stub_message(cell)
    out = _REGION.sub(lambda m: f"{m.group(1)}raise NotImplementedError({message!r}){m.group(2)}", text)
    if nbio.BEGIN in out or nbio.END in out:
        raise ValueError(f"exercise {nbio.meta(cell)['exercise']}: unbalanced {nbio.BEGIN} / {nbio.END} markers")
    return out


def exercise_from_solution(solution: dict[str, Any]) -> dict[str, Any]:
    """The exercise notebook: stubs for answers; outputs cleared everywhere except in check cells."""
    nb = nbio.clone(solution)
    seen: set[str] = set()
    for cell in nb["cells"]:
        if cell.get("cell_type") != "code":
            continue
        if nbio.is_answer(cell):
            exercise = nbio.meta(cell)["exercise"]
            if exercise in seen:
                raise ValueError(f"exercise {exercise} has two answer cells; give each its own id")
            seen.add(exercise)
            nbio.set_source(cell, stub(cell))
        elif nbio.BEGIN in nbio.source(cell):
            raise ValueError(f"a cell holds {nbio.BEGIN} but no exercise id; add metadata "
                             '{"cutecourse": {"exercise": "N.M", "title": "..."}} to it')
        if not nbio.is_check(cell):
            cell["outputs"], cell["execution_count"] = [], None
        elif "gpu" in nbio.tags(cell):  # whatever the solution's run left there ("not run" without a GPU)
            cell["outputs"] = expected_gpu_outputs(cell)
    return nb


def expected_gpu_outputs(cell: dict[str, Any]) -> list[dict[str, Any]]:
    """A GPU check cell cannot run where solutions are executed (no GPU), and the grader runs it only on a GPU; its
    expected outputs are what a passing check prints and returns there, which is deterministic: the pass line and
    ``True``. The hidden GPU tests, run against the solution on a GPU, keep that honest."""
    from cutecourse.grading import checks

    name = nbio.meta(cell).get("check")
    if name not in checks.REGISTRY:
        raise ValueError(f"GPU check cell names check {name!r}, which cutecourse.grading.checks does not define")
    check = checks.REGISTRY[name]
    return [{"name": "stdout", "output_type": "stream",
             "text": [f"{checks.PASS} {check.name}: all {len(check.cases())} cases pass\n"]},
            {"data": {"text/plain": ["True"]}, "execution_count": None, "metadata": {},
             "output_type": "execute_result"}]


def as_submitted(solution: dict[str, Any]) -> dict[str, Any]:
    """The solution as a learner would hand it in: the answers in place, the marker lines gone."""
    nb = nbio.clone(solution)
    for cell in nbio.answers(nb).values():
        lines = nbio.source(cell).splitlines(keepends=True)
        nbio.set_source(cell, "".join(l for l in lines if l.strip() not in (nbio.BEGIN, nbio.END)))
    return nb


def filled(exercise: dict[str, Any], answers: dict[str, str]) -> dict[str, Any]:
    """The exercise notebook with some answer cells filled in, as a learner would hand it in: `answers` maps exercise
    ids to code (dedented). For trying submissions: the grading tests, an instructor checking a rubric."""
    nb = nbio.clone(exercise)
    for exercise_id, cell in nbio.answers(nb).items():
        if exercise_id in answers:
            nbio.set_source(cell, textwrap.dedent(answers[exercise_id]).strip("\n"))
    return nb


def execute(path: Path, timeout: int = 600) -> None:
    """Run a solution notebook in a fresh kernel and store its outputs (needs jupyter: `make setup`)."""
    import nbformat
    from nbclient import NotebookClient

    nb = nbformat.read(path, as_version=4)
    NotebookClient(nb, timeout=timeout, kernel_name="python3", resources={"metadata": {"path": str(path.parent)}},
                   skip_cells_with_tag="gpu").execute()
    nbformat.write(nb, path)


def build(root: Path, check: bool = False, run: bool = False) -> list[str]:
    """Build (or with `check`, compare) every exercise under `root`; returns the stale or written file names."""
    solutions, exercises = root / "solutions", root / "exercises"
    changed = []
    for path in sorted(solutions.glob("[0-9][0-9]_*.ipynb")):
        if run and not check:
            execute(path)
        target = exercises / path.name
        text = nbio.dumps(exercise_from_solution(nbio.load(path)))
        if not target.exists() or target.read_text(encoding="utf-8") != text:
            changed.append(str(target.relative_to(root)))
            if not check:
                target.write_text(text, encoding="utf-8")
    for orphan in sorted(exercises.glob("[0-9][0-9]_*.ipynb")):
        if not (solutions / orphan.name).exists():
            changed.append(f"{orphan.relative_to(root)} (no solution)")
    return changed
