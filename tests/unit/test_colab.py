"""The Colab set-up cell, run as written in a simulated fresh Colab runtime.

The runtime is a fresh venv holding what Colab preinstalls and the course must not move: torch, numpy, matplotlib
and tqdm (linked file by file from this interpreter, so nothing large is downloaded, and a pip that tried to replace
them would only remove links), and Colab's pins, installed from PyPI: ipywidgets 7.7.1, ipykernel 6.17.1, IPython
7.34, notebook 6.5.7 and cuda-bindings 12.9.7 (googlecolab/backend-info's pip-freeze.gpu.txt). A Jupyter kernel of
that venv, with ``google.colab`` imported as in Colab, runs the set-up cell exactly as the notebooks carry it (the
repository URL pointed at this checkout), then, in the same kernel with no restart, lesson 1 and lesson 3 (the
kernel lesson's compile-only cells: the DSL imports, kernels compile for sm_90a, their PTX is the stored one) top to
bottom and an explorer; last, Colab's GPU image is simulated (an ``nvidia-smi`` answering an A100 with its driver,
570.124.06) and a ``%%gpu`` cell and the doctor run again. The tests check that the cell ran the doctor, that
``%load_ext cutecourse`` works, that both lessons' outputs are the stored ones, that the explorers work with
ipywidgets 7.7.1, that the GPU cell skips with the driver the DSL's build needs, and that pip changed none of the
preinstalled packages.

The runtime's Python is this interpreter's, not Colab's 3.13: torch is linked from here, and PyPI's only Linux
torch for another Python is the CUDA build of several GB.
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from cutecourse import env
from cutecourse.grading import build
from cutecourse.grading import notebook as nbio

ROOT = Path(__file__).resolve().parents[2]
LESSON = ROOT / "notebooks" / "01_gpu_hierarchy_tensor_cores.ipynb"
KERNEL_LESSON = ROOT / "notebooks" / "03_tensors_partitioning.ipynb"
# Colab's own pins (its GPU runtime as of 2026-08), installed from PyPI; and what it preinstalls that we link from here.
COLAB_PINS = ["ipywidgets==7.7.1", "ipykernel==6.17.1", "ipython==7.34.0", "notebook==6.5.7", "cuda-bindings==12.9.7"]
# Colab's GPU image: its driver comes from cuda-compat-12-8 570.124.06 (googlecolab/backend-info, apt-list-gpu.txt).
COLAB_SMI = "NVIDIA A100-SXM4-40GB, 8.0, 570.124.06"
#: A cell that makes the kernel's machine Colab's GPU image, as nvidia-smi reports it (the doctor reads nothing else).
GPU_IMAGE = f"""\
import os, pathlib, tempfile
smi = pathlib.Path(tempfile.mkdtemp()) / "nvidia-smi"
smi.write_text("#!/bin/sh\\necho '{COLAB_SMI}'\\n")
smi.chmod(0o755)
os.environ["PATH"] = str(smi.parent) + os.pathsep + os.environ["PATH"]
"""
ALREADY_LOADED = "The cutecourse extension is already loaded. To reload it, use:\n  %reload_ext cutecourse\n"
LINKED = ["torch", "numpy", "matplotlib", "tqdm"]
CI = os.environ.get("CI") == "true"

nbclient = pytest.importorskip("nbclient")
jupyter_client = pytest.importorskip("jupyter_client")
nbformat = pytest.importorskip("nbformat")
from packaging.requirements import Requirement  # noqa: E402 - pytest's own dependency


def closure(names: list[str]) -> list[importlib.metadata.Distribution]:
    """The distributions `names` need here, themselves included."""
    seen: dict[str, importlib.metadata.Distribution] = {}
    todo = list(names)
    while todo:
        name = todo.pop().lower().replace("_", "-")
        if name in seen:
            continue
        dist = seen[name] = importlib.metadata.distribution(name)
        for text in dist.requires or []:
            req = Requirement(text)
            if req.marker is None or req.marker.evaluate({"extra": ""}):
                todo.append(req.name)
    return list(seen.values())


def link_into(site: Path, dists: list[importlib.metadata.Distribution]) -> None:
    """Each distribution's files as symlinks under `site` (never the directories: pip may only remove links)."""
    for dist in dists:
        for file in dist.files or []:
            if file.parts[0] == "..":  # console scripts and data outside site-packages: not needed here
                continue
            target = site / file
            target.parent.mkdir(parents=True, exist_ok=True)
            if not target.exists():
                target.symlink_to(Path(dist.locate_file(file)).resolve())


def installed(python: Path) -> dict[str, str]:
    code = ("import importlib.metadata as m, json; "
            "print(json.dumps({d.metadata['Name'].lower().replace('_', '-'): d.version for d in m.distributions()}))")
    return json.loads(subprocess.run([str(python), "-c", code], capture_output=True, text=True, check=True).stdout)


def pip(python: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(python), "-m", "pip", "install", "-q", *args], capture_output=True, text=True,
                          timeout=600)


def course_source(dest: Path) -> Path:
    """What `git+<repository>` would check out: the package and its build files (this working tree's)."""
    shutil.copytree(ROOT / "cutecourse", dest / "cutecourse", ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, dest / name)
    return dest


def kernel_manager(python: Path, where: Path) -> "jupyter_client.KernelManager":
    from jupyter_client.kernelspec import KernelSpecManager

    spec = where / "kernels" / "colab"
    spec.mkdir(parents=True)
    env = {"COLAB_RELEASE_TAG": "simulated", "PATH": f"{python.parent}{os.pathsep}{os.environ['PATH']}"}
    (spec / "kernel.json").write_text(json.dumps({
        "argv": [str(python), "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "Colab (simulated)", "language": "python", "env": env}))
    return jupyter_client.KernelManager(kernel_name="colab",
                                        kernel_spec_manager=KernelSpecManager(kernel_dirs=[str(spec.parent)]))


def code(source: str) -> dict:
    return {"cell_type": "code", "execution_count": None, "metadata": {}, "outputs": [], "source": source}


@pytest.fixture(scope="module")
def colab(tmp_path_factory):
    """Build the runtime, run the cells, and hand back what came out."""
    where = tmp_path_factory.mktemp("colab")
    venv = where / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    python = venv / "bin" / "python"
    site = Path(subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               capture_output=True, text=True, check=True).stdout.strip())
    link_into(site, closure(LINKED))
    pinned = pip(python, *COLAB_PINS)
    if pinned.returncode:
        reason = f"could not install Colab's pins {COLAB_PINS} from PyPI: {pinned.stderr[-1500:]}"
        if CI:
            pytest.fail(reason)
        pytest.skip(reason)  # a machine without PyPI; CI has it and must run this
    before = installed(python)

    repo = build.Repository.of(ROOT)
    lesson = nbio.load(LESSON)
    setup = [c for c in lesson["cells"] if nbio.meta(c).get("colab") == "setup"]
    assert len(setup) == 1, "the lesson has no Colab set-up cell: run `cutecourse build`"
    cell = nbio.source(setup[0])
    assert repo.install in cell
    cell = cell.replace(repo.install, f"cutecourse @ {course_source(where / 'src').as_uri()}")
    lessons = {"lesson 1": lesson_code(lesson), "lesson 3": lesson_code(nbio.load(KERNEL_LESSON))}
    named = {"colab": code("import sys, types\nsys.modules['google.colab'] = types.ModuleType('google.colab')"),
             "setup": code(cell),
             **{f"{name} {i}": code(nbio.source(c)) for name, cells in lessons.items() for i, c in enumerate(cells)},
             "gpu cell": code("%%gpu 80\nprint('ran on a GPU')"),
             "explorers": code("import ipywidgets\nfrom cutecourse.viz import widgets\n"
                               "ex = widgets.layout_explorer('(4,8)', '(8,1)')\n"
                               "ex.controls['shape'].value = '(2,3)'\n"
                               "print(ipywidgets.__version__, ex.picture.value.count('class=\"cell\"'), "
                               "repr(ex.message.value))\n"
                               "from cutecourse.viz.fragment_explorer import fragment_explorer\n"
                               "fx = fragment_explorer('ldmatrix.x4')\n"
                               "fx.controls['lane'].value = 9\n"
                               "print(fx.readout.value.split('<br>')[0], repr(fx.message.value))\n"
                               "ex"),
             "gpu image": code(GPU_IMAGE),
             "gpu cell, old driver": code("%%gpu 80\nprint('ran on a GPU')"),
             "doctor, old driver": code("from cutecourse.env import doctor\n_ = doctor()")}
    nb = nbformat.from_dict({"cells": list(named.values()), "nbformat": 4, "nbformat_minor": 4, "metadata": {
        "kernelspec": {"name": "colab", "display_name": "Colab", "language": "python"}}})
    client = nbclient.NotebookClient(nb, timeout=600, km=kernel_manager(python, where), allow_errors=True,
                                     resources={"metadata": {"path": str(where)}})
    client.execute()
    return {"cells": dict(zip(named, nb["cells"])), "lessons": lessons, "before": before,
            "after": installed(python)}


def lesson_code(lesson: dict) -> list[dict]:
    """A lesson's code cells after the Colab cells (those the set-up cell stands for)."""
    return [c for c in lesson["cells"] if c["cell_type"] == "code" and "colab" not in nbio.meta(c)]


def text_of(cell: dict) -> str:
    out = []
    for o in cell["outputs"]:
        if o["output_type"] == "stream":
            out.append("".join(o["text"]))
        elif o["output_type"] == "error":
            out.append(f"{o['ename']}: {o['evalue']}")
        elif "text/plain" in o.get("data", {}):
            out.append("".join(o["data"]["text/plain"]))
    return "".join(out)


def test_the_setup_cell_installs_the_course_and_prints_the_doctor(colab):
    out = text_of(colab["cells"]["setup"])
    assert "Error" not in out, out
    lines = out.splitlines()
    assert lines[0].startswith("python ") and lines[0].endswith("on Linux x86_64 (Colab)"), out
    assert any(line.startswith("can do      ") for line in lines), out
    assert any("on Colab, kernels need an sm_80+ GPU" in line and env.COLAB_GPU_RUNTIME in line for line in lines), out


def test_load_ext_cutecourse_works_without_a_restart(colab):
    first = colab["cells"]["lesson 1 0"]
    assert "%load_ext cutecourse" in "".join(first["source"]) and text_of(first) == ""
    assert text_of(colab["cells"]["gpu cell"]).startswith("[GPU cell not run: needs sm_80; this machine has no GPU]")


def ran_as_stored(colab: dict, name: str, start: int = 0) -> None:
    for i, stored in enumerate(colab["lessons"][name]):
        if i < start or "nbval-ignore-output" in nbio.tags(stored):
            continue
        cell = colab["cells"][f"{name} {i}"]
        assert text_of(cell) == text_of(stored), "".join(cell["source"])[:200]


def test_lesson_1_runs_and_prints_what_is_stored(colab):
    ran_as_stored(colab, "lesson 1")


def test_the_kernel_lesson_runs_in_the_same_kernel_with_no_restart(colab):
    """Lesson 3 after the set-up cell and lesson 1: the DSL imports (its .pth was read by the set-up cell), its
    kernels compile for sm_90a and print the stored PTX, and its GPU cells say why they skip."""
    load_ext = colab["cells"]["lesson 3 0"]
    assert "%load_ext cutecourse" in "".join(load_ext["source"]) and text_of(load_ext) == ALREADY_LOADED
    ran_as_stored(colab, "lesson 3", start=1)
    assert any(".target sm_90a" in text_of(c) for name, c in colab["cells"].items() if name.startswith("lesson 3"))


def test_a_gpu_runtime_whose_driver_is_too_old_for_the_dsl_skips_gpu_cells_with_the_reason(colab):
    """Colab's GPU image (driver 570.124.06) beside the DSL's CUDA 12.9 build (driver >= 575.51.03): the GPU cell
    and the doctor give the one verdict, and what works instead."""
    line = text_of(colab["cells"]["gpu cell, old driver"])
    assert line.startswith("[GPU cell not run: needs NVIDIA driver >= 575.51.03 (CUDA 12.9) for the CuTe DSL's CUDA "
                           "12 libraries and cuda-bindings 12.9.7; this driver is 570.124.06: Colab's driver cannot "
                           "be changed: the compile-only parts run here"), line
    assert "modal run cloud/modal_lab.py" in line
    verdict = line.removeprefix("[GPU cell not run: ").rstrip("]\n")
    doctor = text_of(colab["cells"]["doctor, old driver"])
    assert "driver      570.124.06" in doctor and verdict in doctor, doctor


def test_the_explorers_work_with_colabs_ipywidgets(colab):
    cell = colab["cells"]["explorers"]
    assert text_of(cell).startswith("7.7.1 6 ''"), text_of(cell)
    assert "lane 9: it gives the address of M1's row 1; it receives 4 registers" in text_of(cell), text_of(cell)
    assert any("application/vnd.jupyter.widget-view+json" in o.get("data", {}) for o in cell["outputs"])


def test_pip_changed_none_of_the_preinstalled_packages(colab):
    before, after = colab["before"], colab["after"]
    for name in [*LINKED, *(Requirement(p).name for p in COLAB_PINS), "widgetsnbextension", "jupyter-client"]:
        assert name in before, f"{name} was not preinstalled: the simulation is wrong"
    changed = {name: (v, after.get(name)) for name, v in before.items() if after.get(name) != v}
    assert changed == {}
    assert "cutecourse" in after and after["nvidia-cutlass-dsl"] == env.DSL_PIN


def test_the_readme_shows_the_cell_the_notebooks_carry_and_names_the_one_repository():
    """The README's Colab cell is the notebooks' set-up cell, and every GitHub repository URL it names is the one
    configured in pyproject.toml (build's badges come from the same)."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    repo = build.Repository.of(ROOT)
    assert f"```python\n{build.colab_setup_source(repo)}\n```" in readme
    assert set(re.findall(r"https://github\.com/[\w.-]+/[\w.-]+", readme)) == {repo.url}
