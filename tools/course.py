"""Set up the course's .venv and run it, on Linux, macOS and Windows: the one set-up the Makefile also uses.

    python tools/course.py setup      # create .venv, install torch for this machine, then the course (once)
    python tools/course.py setup --extras grade   # only what grading needs (a CI workflow, a Gradescope image)
    python tools/course.py lab        # set up, then open the lessons in JupyterLab (extra arguments go to it)
    python tools/course.py test       # set up, then `cutecourse build --check`, the linter (ruff) and the CPU suite
                                      # (pytest --nbval, 2 workers)

On Windows, where there is no `make`: ``py tools\\course.py lab``. ``setup --dry-run`` prints the commands without
running them. Only the standard library is used: this runs before anything is installed.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
VENV = ROOT / ".venv"
TORCH_VERSION = os.environ.get("TORCH_VERSION", "2.13.0")
TORCH_CPU_INDEX = os.environ.get("TORCH_CPU_INDEX", "https://download.pytorch.org/whl/cpu")
EXTRAS = "dev,lab"
# JupyterLab for a lesson: the lessons' folder as root, and no news prompt covering the first outputs.
LAB_OPTIONS = ["--ServerApp.root_dir=notebooks", "--LabApp.news_url=None"]


def torch_installs(system: str, has_gpu: bool, version: str = TORCH_VERSION) -> list[list[str]]:
    """The `pip install` arguments that install torch here, to try in order until one succeeds.

    - Linux with an NVIDIA GPU: PyPI's default build, which is the CUDA build.
    - Linux without one: the CPU build (a few hundred MB, not several GB), first from any local wheel pip knows
      about, else from PyTorch's CPU index.
    - Windows: the CPU build too, GPU or not: the CuTe DSL is Linux-only, so no kernel runs there anyway (and
      PyPI's Windows wheel would be CPU-only as well).
    - macOS: PyPI's build, which is the CPU/MPS one; there is no ``+cpu`` wheel for macOS.
    """
    if system == "Darwin":
        return [[f"torch=={version}"]]
    if system == "Linux" and has_gpu:
        return [[f"torch=={version}"]]
    if system not in ("Linux", "Windows"):
        raise SystemExit(f"tools/course.py: no torch rule for system {system!r}; install torch=={version} into "
                         f"{VENV} yourself (see https://pytorch.org/get-started/locally/), then run this again")
    cpu = f"torch=={version}+cpu"
    return [[cpu], ["--extra-index-url", TORCH_CPU_INDEX, cpu]]


def has_nvidia_gpu() -> bool:
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return False
    try:
        return subprocess.run([exe, "-L"], capture_output=True, timeout=30).returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False


def venv_python(venv: Path = VENV, system: str | None = None) -> Path:
    windows = (system or platform.system()) == "Windows"
    return venv / ("Scripts/python.exe" if windows else "bin/python")


def venv_script(name: str, venv: Path = VENV, system: str | None = None) -> Path:
    windows = (system or platform.system()) == "Windows"
    return venv / ("Scripts" if windows else "bin") / (f"{name}.exe" if windows else name)


def _stamp(extras: str) -> str:
    """What the installed .venv was made from: a change to pyproject.toml, the torch pin or the extras redoes the
    set-up."""
    return hashlib.sha256((ROOT / "pyproject.toml").read_bytes() + TORCH_VERSION.encode()
                          + extras.encode()).hexdigest()


def _run(command: list[str], dry_run: bool) -> int:
    print("+ " + " ".join(shlex.quote(str(c)) for c in command), flush=True)
    return 0 if dry_run else subprocess.call([str(c) for c in command], cwd=ROOT)


def setup(dry_run: bool = False, extras: str = EXTRAS) -> Path:
    """Create .venv and install torch and the course with `extras` into it, unless that was already done for this
    pyproject."""
    if sys.version_info < (3, 10):
        raise SystemExit(f"cutecourse needs Python 3.10+; this is {platform.python_version()} ({sys.executable}). "
                         "Run it with a newer one, e.g. `python3.12 tools/course.py setup` (make: "
                         "`make PYTHON_BOOT=python3.12 lab`; Windows: `py -3.12 tools\\course.py setup`), or use "
                         "conda: conda env create -f environment.yml && conda activate cutecourse")
    python, stamp = venv_python(), VENV / ".installed"
    if not dry_run and stamp.exists() and stamp.read_text() == _stamp(extras):
        return python
    if not python.exists() and _run([sys.executable, "-m", "venv", VENV], dry_run):
        raise SystemExit(f"could not create {VENV}; on Debian/Ubuntu: sudo apt install python3-venv")
    pip = [python, "-m", "pip", "install"]
    have_torch = not dry_run and subprocess.call([python, "-c", "import torch"], stderr=subprocess.DEVNULL) == 0
    if not have_torch:
        tries = torch_installs(platform.system(), has_nvidia_gpu())
        for i, args in enumerate(tries):
            if _run(pip + args, dry_run) == 0:
                break
            if i == len(tries) - 1:
                raise SystemExit(f"could not install torch into {VENV}; the commands above show why. Install it "
                                 f"yourself ({python} -m pip install torch), then run this again")
    if _run(pip + ["-q", "-e", f".[{extras}]"], dry_run):
        raise SystemExit(f"installing the course failed (see above); fix that, then run: {sys.executable} "
                         f"tools/course.py setup")
    if not dry_run:
        stamp.write_text(_stamp(extras))
    return python


#: JupyterLab's defaults for this environment (its overrides.json): no news prompt, no update check. news_url=None
#: alone still leaves the "fetch news?" notification covering the first outputs.
LAB_OVERRIDES = {"@jupyterlab/apputils-extension:notification": {"fetchNews": "false", "checkForUpdates": False}}


def quiet_lab(venv: Path = VENV) -> Path:
    """Write the environment's JupyterLab overrides (LAB_OVERRIDES); returns the file."""
    path = venv / "share" / "jupyter" / "lab" / "settings" / "overrides.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(LAB_OVERRIDES, indent=1) + "\n")
    return path


def lab(extra: list[str]) -> int:
    setup()
    quiet_lab()
    root = ["--allow-root"] if hasattr(os, "geteuid") and os.geteuid() == 0 else []
    return _run([venv_script("jupyter"), "lab", *LAB_OPTIONS, *root, *extra], dry_run=False)


#: The suite on two workers (pytest-xdist), a test file to a worker: a notebook's cells run in order in one kernel,
#: and a file's shared grades (module fixtures) are graded once. Half the suite runs on one core otherwise.
PARALLEL = ["-n", "2", "--dist", "loadfile"]


#: The linter's run (its rules are pyproject.toml's [tool.ruff]); the notebooks are nbval's, not its.
LINT = ["-m", "ruff", "check", "--no-cache", "."]


def test(extra: list[str], python: str | None) -> int:
    python = python or str(setup())
    return (_run([python, "-m", "cutecourse.cli", "build", "--check"], dry_run=False)
            or _run([python, *LINT], dry_run=False)
            or _run([python, "-m", "pytest", "--nbval", *PARALLEL, *extra], dry_run=False))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    s = commands.add_parser("setup", help="create .venv and install torch and the course (once)")
    s.add_argument("--dry-run", action="store_true", help="print the commands; run none")
    s.add_argument("--extras", default=EXTRAS, help=f"the course's extras to install (default {EXTRAS}; grading "
                                                    "needs only: grade)")
    commands.add_parser("lab", help="set up, then JupyterLab on notebooks/ (other arguments go to jupyter lab)")
    t = commands.add_parser("test", help="set up, then build --check, ruff and pytest --nbval (other arguments: "
                                         "pytest)")
    t.add_argument("--python", help="run the tests with this interpreter instead; skips the set-up")
    args, extra = parser.parse_known_args(argv)
    if args.command == "setup":
        if extra:
            parser.error(f"setup takes no arguments other than --dry-run and --extras; got {' '.join(extra)}")
        setup(args.dry_run, args.extras)
        return 0
    if args.command == "lab":
        return lab(extra)
    return test(extra, args.python)


if __name__ == "__main__":
    sys.exit(main())
