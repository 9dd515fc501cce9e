"""Build exercise notebooks from solutions: answers become stubs, check cells keep the solution's outputs.

``cutecourse build`` writes ``exercises/NN_name.ipynb`` for every ``solutions/NN_name.ipynb``, and puts the Colab
cells at the top of every lesson, solution and exercise notebook: an "Open in Colab" badge and a set-up cell that
installs the course when it runs on Colab (and does nothing elsewhere). Both come from one configured URL,
``[project.urls] Repository`` in the course's ``pyproject.toml``. ``cutecourse build --check`` fails when a notebook
on disk differs from what the build would write (a stale exercise, a stale or missing badge).
``--execute`` first runs each solution top to bottom, so the expected outputs are the solution's own.
"""

from __future__ import annotations

import json
import re
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cutecourse.grading import notebook as nbio

if sys.version_info >= (3, 11):
    import tomllib
else:  # a dependency on 3.10 only
    import tomli as tomllib

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
        nbio.set_source(cell, "".join(line for line in lines if line.strip() not in (nbio.BEGIN, nbio.END)))
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
    # Only the outputs are kept: the explorers' widget state (tens of KB, redrawn when the cell runs) and the
    # timestamps of each run would only grow the notebook and its diffs.
    # A cell's prints arrive as one stream output or several, as the kernel happened to flush them: one output per
    # run of the same stream keeps the stored outputs the same from run to run.
    nb.metadata.pop("widgets", None)
    for cell in nb.cells:
        cell.metadata.pop("execution", None)
        merged: list = []
        for out in cell.get("outputs", []):
            if merged and out.output_type == merged[-1].output_type == "stream" and out.name == merged[-1].name:
                merged[-1].text += out.text
            else:
                merged.append(out)
        if "outputs" in cell:
            cell.outputs = merged
    nbformat.write(nb, path)


COLAB_BADGE = "https://colab.research.google.com/assets/colab-badge.svg"
BRANCH = "main"  # the branch Colab opens the notebooks from
_GITHUB = re.compile(r"https://github\.com/([A-Za-z0-9_.-]+)/([A-Za-z0-9_.-]+?)(?:\.git)?/?")


@dataclass(frozen=True)
class Repository:
    """Where the course is published: its GitHub URL, and the checkout's root (paths in links are relative to it)."""

    url: str
    root: Path

    @classmethod
    def of(cls, course: Path) -> "Repository":
        """``[project.urls] Repository`` of the nearest ``pyproject.toml`` at or above `course`."""
        course = course.resolve()
        for folder in (course, *course.parents):
            pyproject = folder / "pyproject.toml"
            if not pyproject.is_file():
                continue
            url = tomllib.loads(pyproject.read_text(encoding="utf-8")).get("project", {}).get("urls", {}).get(
                "Repository")
            if url is None:
                continue
            found = _GITHUB.fullmatch(url)
            if not found:
                raise ValueError(f"{pyproject}: [project.urls] Repository = {url!r} is not a GitHub repository URL; "
                                 "Colab opens notebooks from GitHub: write https://github.com/OWNER/NAME")
            return cls(f"https://github.com/{found.group(1)}/{found.group(2)}", folder)
        raise ValueError(f"no pyproject.toml at or above {course} names the course's repository; add "
                         '[project.urls] Repository = "https://github.com/OWNER/NAME" (the Colab badges link there)')

    def colab_url(self, notebook: Path) -> str:
        path = notebook.resolve().relative_to(self.root).as_posix()
        return f"https://colab.research.google.com/github/{self.url.removeprefix('https://github.com/')}/blob/" \
               f"{BRANCH}/{path}"

    @property
    def install(self) -> str:
        return f"cutecourse @ git+{self.url}"


def colab_setup_source(repo: Repository) -> str:
    """The set-up cell: on Colab, a plain (not editable) pip install into the running interpreter, whose new ``.pth``
    files (the DSL's) it then reads, so nothing needs a restart and no clone folder can shadow the package; Colab's
    torch, ipywidgets and Jupyter are left as they are (the course does not require them). Plain Python, no magics,
    so the grader can run it too (it does nothing)."""
    return textwrap.dedent(f"""\
        # On Colab: install the course into this runtime (no restart needed). Elsewhere this cell does nothing.
        import importlib, subprocess, sys
        if "google.colab" in sys.modules:
            course = {json.dumps(repo.install)}
            subprocess.run([sys.executable, "-m", "pip", "install", "-q", course], check=True)
            importlib.invalidate_caches()
            from cutecourse.env import doctor, load_new_installs
            load_new_installs()  # the DSL's .pth, which Python reads only at start-up: no restart either
            doctor()
        """).rstrip("\n")


def with_colab_cells(nb: dict[str, Any], repo: Repository, path: Path) -> dict[str, Any]:
    """`nb` (the notebook stored at `path`) with the badge and the set-up cell on top, replacing any it had."""
    out = nbio.clone(nb)
    old = {nbio.meta(c)["colab"]: c for c in out["cells"] if "colab" in nbio.meta(c)}
    badge = {"cell_type": "markdown", "id": "colab-badge", "metadata": {"cutecourse": {"colab": "badge"}},
             "source": []}
    nbio.set_source(badge, f"[![Open In Colab]({COLAB_BADGE})]({repo.colab_url(path)})")
    # Off Colab the cell prints nothing, so a run of the notebook changes only its execution count: kept.
    setup = {"cell_type": "code", "id": "colab-setup", "metadata": {"cutecourse": {"colab": "setup"}},
             "execution_count": old.get("setup", {}).get("execution_count"), "outputs": [], "source": []}
    nbio.set_source(setup, colab_setup_source(repo))
    out["cells"] = [badge, setup] + [c for c in out["cells"] if "colab" not in nbio.meta(c)]
    return out


def _sync(target: Path, nb: dict[str, Any], root: Path, check: bool, changed: list[str]) -> None:
    text = nbio.dumps(nb)
    if not target.exists() or target.read_text(encoding="utf-8") != text:
        changed.append(str(target.relative_to(root)))
        if not check:
            target.write_text(text, encoding="utf-8")


def build(root: Path, check: bool = False, run: bool = False) -> list[str]:
    """Build (or with `check`, compare) every exercise under `root`, and the Colab cells of every lesson, solution
    and exercise notebook; returns the stale or written file names."""
    solutions, exercises = root / "solutions", root / "exercises"
    repo = Repository.of(root)
    changed: list[str] = []
    for path in sorted((root / "notebooks").glob("[0-9][0-9]_*.ipynb")):
        _sync(path, with_colab_cells(nbio.load(path), repo, path), root, check, changed)
    for path in sorted(solutions.glob("[0-9][0-9]_*.ipynb")):
        if run and not check:
            execute(path)
        solution = with_colab_cells(nbio.load(path), repo, path)
        _sync(path, solution, root, check, changed)
        target = exercises / path.name
        _sync(target, with_colab_cells(exercise_from_solution(solution), repo, target), root, check, changed)
    for orphan in sorted(exercises.glob("[0-9][0-9]_*.ipynb")):
        if not (solutions / orphan.name).exists():
            changed.append(f"{orphan.relative_to(root)} (no solution)")
    return changed
