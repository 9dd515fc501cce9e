"""The course in JupyterLab on a Modal H100, with your work kept on a Modal Volume.

    pip install modal && modal setup         # once: a Modal account and its token on this machine
    modal run cloud/modal_lab.py             # from the checkout's root: opens JupyterLab, prints its URL once
    modal run cloud/modal_lab.py::doctor     # only the doctor and a smoke kernel, on the same GPU and image

The image is built from this checkout as it is now (so a change you make locally is in the next session); its
dependencies come from pyproject.toml in their own layer, rebuilt only when they change. The lessons, exercises and
solutions you open (JupyterLab's root is the course's, as with `make lab`; the notebooks are trusted, so their
stored pictures show) live on the Volume ``cutecourse-work``: edits survive the session's end and its timeout, and a
newer course adds its new notebooks there without touching yours. Each session gets a new JupyterLab token, printed
once with the URL. In JupyterLab's terminal, ``make -C /course test-gpu`` runs the GPU suite with the image's Python
(no .venv is built).
"""

from __future__ import annotations

import importlib.util
import os
import secrets
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Sequence

import modal

COURSE = "/course"  # the checkout, in the image
# Modal imports this file again inside the container, where the checkout is the one baked in at COURSE.
ROOT = Path(__file__).resolve().parents[1] if modal.is_local() else Path(COURSE)
WORK = "/work"  # the Volume, in the container
VOLUME = "cutecourse-work"
GPU = "H100"
TIMEOUT = 4 * 3600  # seconds: Modal's session limit for this lab; the work on the Volume outlives it
PORT = 8888
# Never baked into the image: local environments, caches and build output.
IGNORE = [".venv", ".git", "**/__pycache__", "**/.ipynb_checkpoints", ".pytest_cache", ".hypothesis", "build",
          "*.egg-info", "artifacts", ".gpu", ".gpu1", ".gpu2", ".whl"]


def _setup_script():
    """tools/course.py: the same torch pin, extras and JupyterLab options as `make lab`."""
    spec = importlib.util.spec_from_file_location("course_setup", ROOT / "tools" / "course.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


setup_script = _setup_script()
FOLDERS = setup_script.COURSE_FOLDERS  # what a learner edits: kept on the Volume, its notebooks trusted


def requirements(extras: str = setup_script.TEST_EXTRAS) -> list[str]:
    """pyproject.toml's dependencies and its `extras` (comma-separated; by default the tests' extras, since the lab's
    terminal runs ``make -C /course test-gpu``), with torch pinned as there (PyPI's Linux wheel is the CUDA build)."""
    if sys.version_info >= (3, 11):
        import tomllib
    else:
        import tomli as tomllib  # cutecourse's own dependency on 3.10
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    optional = project["optional-dependencies"]
    deps = [d for d in project["dependencies"] if not d.replace(" ", "").startswith("torch>")]
    return [f"torch=={setup_script.TORCH_VERSION}", *deps, *(d for e in extras.split(",") for d in optional[e])]


def course_image(apt_package: str, extras: str = setup_script.TEST_EXTRAS,
                 ignore: Sequence[str] = IGNORE) -> modal.Image:
    """This checkout, less `ignore`, installed at COURSE on Python 3.12 with `apt_package` and `requirements(extras)`;
    the requirements are a layer of their own, rebuilt only when they change (cloud/modal_grade.py builds on it too)."""
    return (
        modal.Image.debian_slim(python_version="3.12")
        .apt_install(apt_package)
        .pip_install(*requirements(extras))
        .add_local_dir(ROOT, COURSE, copy=True, ignore=ignore)
        .run_commands(f"pip install --no-deps -e {COURSE}")
    )


# The Makefile runs an interpreter named by PYTHON as it is: `make test-gpu` builds no .venv here.
image = course_image("make").env({"PYTHON": "python"})
app = modal.App("cutecourse-lab")
volume = modal.Volume.from_name(VOLUME, create_if_missing=True)


def keep_work_on_volume(course_dir: Path, work: Path) -> list[str]:
    """Put the learner's folders on the Volume: copy in the course's notebooks the Volume lacks (never overwriting
    one), then make each folder of the course a link to its copy there. Returns the files copied."""
    copied = []
    for folder in FOLDERS:
        src, dst = course_dir / folder, work / folder
        if src.is_symlink():  # done already in this container
            continue
        for path in sorted(p for p in src.rglob("*") if p.is_file()):
            target = dst / path.relative_to(src)
            if not target.exists():
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(path, target)
                copied.append(str(target.relative_to(work)))
        dst.mkdir(parents=True, exist_ok=True)
        shutil.rmtree(src)
        src.symlink_to(dst, target_is_directory=True)
    return copied


def serve(token: str, port: int) -> int:
    """Run JupyterLab on `port` with `token` until it stops. The token goes in through the environment, not the
    command line (where `ps` shows it), and JupyterLab's log then writes it as "...": the URL printed at the start
    is the only place it appears."""
    command = [sys.executable, "-m", "jupyter", "lab", *setup_script.LAB_OPTIONS, "--no-browser", "--allow-root",
               "--ip=0.0.0.0", f"--port={port}"]
    return subprocess.call(command, cwd=COURSE, env={**os.environ, "JUPYTER_TOKEN": token})


def trust_notebooks(course_dir: Path) -> int:
    """Trust the notebooks the learner opens (their copies on the Volume), as `make lab` does, so their stored
    pictures show at once."""
    return setup_script.trust(sys.executable, course_dir)


def _report() -> None:
    from cutecourse import env

    print(env.report(), flush=True)


@app.function(image=image, gpu=GPU, timeout=TIMEOUT, volumes={WORK: volume})
def lab() -> int:
    """JupyterLab on the lessons, with the learner's folders on the Volume."""
    _report()
    copied = keep_work_on_volume(Path(COURSE), Path(WORK))
    print(f"Volume {VOLUME!r}: {len(copied)} new notebook(s) copied in; your edits there are kept", flush=True)
    trust_notebooks(Path(COURSE))
    token = secrets.token_urlsafe(24)
    try:
        with modal.forward(PORT) as tunnel:
            print(f"JupyterLab: {tunnel.url}/lab?token={token}", flush=True)
            print(f"In its terminal: make -C {COURSE} test-gpu", flush=True)
            return serve(token, PORT)
    finally:
        if not modal.is_local():
            volume.commit()


@app.function(image=image, gpu=GPU, timeout=600)
def doctor() -> int:
    """What the GPU and image can do, and a smoke kernel launched on it."""
    from cutecourse.cli import main

    return main(["doctor", "--smoke"])


@app.local_entrypoint()
def main() -> None:
    lab.remote()
