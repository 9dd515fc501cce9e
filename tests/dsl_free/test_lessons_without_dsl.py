"""Lessons 1-2 run where the CuTe DSL cannot be installed (macOS, Windows): their notebooks, solutions and filled-in
exercises pass nbval in a fresh kernel whose Python cannot import `cutlass` (hide_dsl/sitecustomize.py), with every
`%%dsl` cell printing its one line instead of its DSL output and every other cell printing what it prints with the
DSL. A cell that needs the DSL but is not marked, or an eager cell that uses what a DSL cell defined, fails here."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from cutecourse.grading import build
from cutecourse.grading import notebook as nbio

ROOT = Path(__file__).resolve().parents[2]
HIDE_DSL = Path(__file__).parent / "hide_dsl"
LESSONS = ("01_gpu_hierarchy_tensor_cores", "02_layouts")

pytestmark = pytest.mark.slow


def without_dsl() -> dict[str, str]:
    """The environment of a machine without the DSL: the hiding sitecustomize first, then this checkout."""
    path = [str(HIDE_DSL), str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]
    return dict(os.environ, PYTHONPATH=os.pathsep.join(path))


def run_python(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], env=without_dsl(), capture_output=True, text=True,
                          timeout=300)


def dsl_line() -> str:
    """What a %%dsl cell prints on a machine without the DSL, from the magic itself."""
    run = run_python("from cutecourse.env import dsl_cell; dsl_cell('', 'raise SystemExit(3)')")
    assert run.returncode == 0 and run.stdout.count("\n") == 1, run.stdout + run.stderr
    return run.stdout


def is_dsl_cell(cell: dict) -> bool:
    return cell.get("cell_type") == "code" and nbio.source(cell).startswith("%%dsl")


def as_without_dsl(nb: dict, line: str) -> dict:
    """`nb` with the outputs a machine without the DSL must show: the one line for each %%dsl cell."""
    nb = nbio.clone(nb)
    for cell in nb["cells"]:
        if is_dsl_cell(cell):
            cell["outputs"] = [{"name": "stdout", "output_type": "stream", "text": [line]}]
    return nb


def filled_exercise(lesson: str) -> dict:
    """The exercise notebook with the solution's answers filled in, as the grader runs a submission."""
    answers = {e: nbio.source(c) for e, c in nbio.answers(build.as_submitted(
        nbio.load(ROOT / "solutions" / f"{lesson}.ipynb"))).items()}
    return build.filled(nbio.load(ROOT / "exercises" / f"{lesson}.ipynb"), answers)


def test_the_environment_hides_the_dsl_from_python():
    run = run_python("import importlib.util, sys\n"
                     "try:\n    import cutlass\nexcept ModuleNotFoundError:\n    sys.exit(7)\n")
    assert run.returncode == 7, run.stderr
    assert run_python("import cutecourse.layout, cutecourse.hw, cutecourse.viz").returncode == 0
    assert dsl_line() == f"[DSL cell not run: needs the CuTe DSL (pip install nvidia-cutlass-dsl=={_pin()}); " \
                         "the eager cells show the same]\n"


def _pin() -> str:
    from cutecourse import env

    return env.DSL_PIN


def test_lesson_2_marks_its_dsl_cells_and_repeats_them_eagerly():
    cells = nbio.load(ROOT / "notebooks" / "02_layouts.ipynb")["cells"]
    dsl = [i for i, c in enumerate(cells) if is_dsl_cell(c)]
    assert len(dsl) >= 10
    uses_dsl = re.compile(r"\bcute\.|\bimport cutlass\b|\bfrom cutlass\b")
    assert all(uses_dsl.search(nbio.source(cells[i])) for i in dsl)
    unmarked = [i for i, c in enumerate(cells) if c.get("cell_type") == "code" and not is_dsl_cell(c)
                and uses_dsl.search(nbio.source(c))]
    assert unmarked == [], f"cells {unmarked} use the DSL without %%dsl"


def test_lessons_1_2_pass_nbval_without_the_dsl(tmp_path):
    line = dsl_line()
    files = []
    for lesson in LESSONS:
        for kind, nb in (("notebook", nbio.load(ROOT / "notebooks" / f"{lesson}.ipynb")),
                         ("solution", nbio.load(ROOT / "solutions" / f"{lesson}.ipynb")),
                         ("exercise", filled_exercise(lesson))):
            path = tmp_path / f"{lesson}_{kind}.ipynb"
            nbio.dump(as_without_dsl(nb, line), path)
            files.append(path.name)
    run = subprocess.run([sys.executable, "-m", "pytest", "--nbval", "-p", "cutecourse.grading.plugin", "-q",
                          "-p", "no:cacheprovider", *files], cwd=tmp_path, env=without_dsl(), capture_output=True,
                         text=True, timeout=1200)
    assert run.returncode == 0, run.stdout[-6000:] + run.stderr[-2000:]
    assert " passed" in run.stdout and "failed" not in run.stdout, run.stdout[-2000:]
