"""Set up the course's .venv and run it, on Linux, macOS and Windows: the one set-up the Makefile also uses.

    python tools/course.py setup      # create .venv, install torch for this machine, then the course (once)
    python tools/course.py setup --extras grade   # only what grading needs (a CI workflow, a Gradescope image)
    python tools/course.py lab        # set up (the `lab` extra), trust the notebooks, then open the course in
                                      # JupyterLab (extra arguments go to it)
    python tools/course.py test       # set up (`dev` too), then `cutecourse build --check`, the linter (ruff) and
                                      # the CPU suite (pytest --nbval, 2 workers)

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
#: A learner's extras (`make lab`): JupyterLab and ipywidgets. The tests' (`make test`) add `dev`: pytest, nbval,
#: playwright, modal, hypothesis, the linter.
LAB_EXTRAS = "lab"
TEST_EXTRAS = "dev,lab"
#: What a learner edits and opens: the folders JupyterLab's file browser must reach, whose notebooks are trusted.
COURSE_FOLDERS = ("notebooks", "exercises", "solutions")
# JupyterLab for the course: its root is the course's root (lessons, exercises and solutions all reachable; the
# command runs there), the file browser opens on the lessons, and no news prompt covers the first outputs.
LAB_OPTIONS = ["--ServerApp.root_dir=.", "--ServerApp.default_url=/lab/tree/notebooks", "--LabApp.news_url=None"]
#: Where the course runs when no torch wheel exists for this machine.
ELSEWHERE = ("on Colab (the \"Open in Colab\" badge atop each notebook) or in the Modal lab (modal run "
             "cloud/modal_lab.py), as the README's \"Where to run it\" says")


def torch_install(system: str, machine: str, has_gpu: bool, local_cpu_wheel: bool = False,
                  version: str = TORCH_VERSION) -> list[str]:
    """The `pip install` arguments that install torch here, from where a wheel for this platform exists.

    - Linux x86_64 with an NVIDIA GPU: PyPI's build, which is the CUDA build.
    - Linux x86_64 without one: the CPU build (a few hundred MB, not several GB): from PyTorch's CPU index, or
      from a local wheel pip already knows about (`local_cpu_wheel`).
    - Linux aarch64, Windows x86_64 and macOS on Apple silicon: PyPI's build, the only one there (CPU; on macOS
      CPU and MPS). On Windows that is a CPU build even with a GPU: kernels compile, and the doctor names torch's
      CUDA build for launching them.
    - Intel macOS and Windows on ARM: PyPI has no torch `version` for them (nor any torch the course takes, >= 2.4):
      SystemExit with the alternatives.
    """
    if (system, machine) == ("Darwin", "x86_64"):
        raise SystemExit(f"tools/course.py: PyTorch publishes no torch {version} for Intel macOS (its last Intel "
                         f"macOS wheels are torch 2.2, and the course needs 2.4+), so it cannot be set up on this "
                         f"Mac: run it in a Linux virtual machine, or {ELSEWHERE}")
    if (system, machine) == ("Windows", "ARM64"):
        raise SystemExit(f"tools/course.py: PyPI has no torch {version} for Windows on ARM: run this script with the "
                         "x64 (AMD64) Python from python.org, which runs under Windows' x64 emulation, or in WSL "
                         f"(Linux aarch64, where torch and the CuTe DSL both exist), or run the course {ELSEWHERE}")
    if (system, machine) in (("Darwin", "arm64"), ("Windows", "AMD64"), ("Linux", "aarch64")):
        return [f"torch=={version}"]
    if (system, machine) != ("Linux", "x86_64"):
        raise SystemExit(f"tools/course.py: no torch rule for system {system!r} on {machine!r}; install "
                         f"torch=={version} into {VENV} yourself (see https://pytorch.org/get-started/locally/), "
                         "then run this again")
    if has_gpu:
        return [f"torch=={version}"]
    cpu = f"torch=={version}+cpu"
    return [cpu] if local_cpu_wheel else ["--extra-index-url", TORCH_CPU_INDEX, cpu]


def has_local_wheel(requirement: str) -> bool:
    """Whether pip finds a wheel for `requirement` without an index (its --find-links: a machine that keeps wheels
    on disk). A look only: pip installs nothing and, where it finds none, prints nothing."""
    look = [sys.executable, "-m", "pip", "install", "--dry-run", "--no-deps", "--no-index", "-q", requirement]
    try:
        return subprocess.run(look, capture_output=True, timeout=120).returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False


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


def _stamp() -> str:
    """What the installed .venv was made from: a change to pyproject.toml or the torch pin redoes the set-up."""
    return hashlib.sha256((ROOT / "pyproject.toml").read_bytes() + TORCH_VERSION.encode()).hexdigest()


def installed_extras(venv: Path | None = None) -> set[str]:
    """The extras `venv` (.venv) holds, where it was set up from this pyproject and torch pin; else none."""
    try:
        stamp = json.loads(((venv or VENV) / ".installed").read_text())
    except (OSError, ValueError):
        return set()
    if not isinstance(stamp, dict) or stamp.get("made_from") != _stamp():
        return set()
    return set(stamp.get("extras", []))


def _extras(text: str) -> set[str]:
    return {e.strip() for e in text.split(",") if e.strip()}


def _run(command: list[str], dry_run: bool) -> int:
    print("+ " + " ".join(shlex.quote(str(c)) for c in command), flush=True)
    return 0 if dry_run else subprocess.call([str(c) for c in command], cwd=ROOT)


def setup(dry_run: bool = False, extras: str = LAB_EXTRAS) -> Path:
    """Create .venv and install torch and the course with `extras` into it, unless .venv already holds them for this
    pyproject (a .venv set up for the tests serves the lab too)."""
    if sys.version_info < (3, 10):
        raise SystemExit(f"cutecourse needs Python 3.10+; this is {platform.python_version()} ({sys.executable}). "
                         "Run it with a newer one, e.g. `python3.12 tools/course.py setup` (make: "
                         "`make PYTHON_BOOT=python3.12 lab`; Windows: `py -3.12 tools\\course.py setup`), or use "
                         "conda: conda env create -f environment.yml && conda activate cutecourse")
    python, stamp = venv_python(), VENV / ".installed"
    have = set() if dry_run else installed_extras()
    if not dry_run and _extras(extras) <= have and stamp.exists():
        return python
    extras = ",".join(sorted(_extras(extras) | have))
    if not python.exists() and _run([sys.executable, "-m", "venv", VENV], dry_run):
        raise SystemExit(f"could not create {VENV}; on Debian/Ubuntu: sudo apt install python3-venv")
    pip = [python, "-m", "pip", "install"]
    have_torch = not dry_run and subprocess.call([python, "-c", "import torch"], stderr=subprocess.DEVNULL) == 0
    if not have_torch:
        gpu = has_nvidia_gpu()
        local = platform.system() == "Linux" and not gpu and has_local_wheel(f"torch=={TORCH_VERSION}+cpu")
        if _run(pip + torch_install(platform.system(), platform.machine(), gpu, local), dry_run):
            raise SystemExit(f"could not install torch into {VENV}; the command above shows why. Install it "
                             f"yourself ({python} -m pip install torch), then run this again")
    if _run(pip + ["-q", "-e", f".[{extras}]"], dry_run):
        raise SystemExit(f"installing the course failed (see above); fix that, then run: {sys.executable} "
                         f"tools/course.py setup")
    if not dry_run:
        stamp.write_text(json.dumps({"made_from": _stamp(), "extras": sorted(_extras(extras))}) + "\n")
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


def course_notebooks(root: Path = ROOT) -> list[Path]:
    """The notebooks a learner opens: every lesson, exercise and solution."""
    return sorted(path for folder in COURSE_FOLDERS for path in (root / folder).glob("*.ipynb"))


#: `jupyter trust` notebook by notebook (which stops at the first it cannot read): a learner's broken notebook is
#: named and left untrusted, and the others are trusted.
_TRUST = """\
import os
import sys
import nbformat
from nbformat.sign import NotebookNotary
notary = NotebookNotary()
os.makedirs(notary.data_dir, mode=0o700, exist_ok=True)
for path in sys.argv[1:]:
    try:
        notebook = nbformat.read(path, nbformat.NO_CONVERT)
        nbformat.validate(notebook)
    except Exception as exc:
        print(f"not trusted: {path} cannot be read as a notebook ({exc})")
        continue
    notary.sign(notebook)
"""


def trust(python: str | Path, root: Path = ROOT) -> int:
    """Sign the course's notebooks as trusted, as ``jupyter trust`` does, with the environment's `python`, so that
    their stored pictures (SVG, HTML) show when first opened: JupyterLab shows an untrusted notebook's pictures as
    text until its cells run again. The signatures are this user's (Jupyter's data folder); a notebook changed
    since must be trusted again, which every `lab` does."""
    return subprocess.call([str(python), "-c", _TRUST, *map(str, course_notebooks(root))], cwd=root)


def lab(extra: list[str]) -> int:
    python = setup()
    quiet_lab()
    if trust(python):
        raise SystemExit("trusting the notebooks failed (see above): their stored pictures would show as text")
    root = ["--allow-root"] if hasattr(os, "geteuid") and os.geteuid() == 0 else []
    return _run([venv_script("jupyter"), "lab", *LAB_OPTIONS, *root, *extra], dry_run=False)


#: The suite on two workers (pytest-xdist), a test file to a worker: a notebook's cells run in order in one kernel,
#: and a file's shared grades (module fixtures) are graded once. Half the suite runs on one core otherwise.
PARALLEL = ["-n", "2", "--dist", "loadfile"]


#: The linter's run (its rules are pyproject.toml's [tool.ruff]); the notebooks are nbval's, not its.
LINT = ["-m", "ruff", "check", "--no-cache", "."]


def test(extra: list[str], python: str | None) -> int:
    python = python or str(setup(extras=TEST_EXTRAS))
    return (_run([python, "-m", "cutecourse.cli", "build", "--check"], dry_run=False)
            or _run([python, *LINT], dry_run=False)
            or _run([python, "-m", "pytest", "--nbval", *PARALLEL, *extra], dry_run=False))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    s = commands.add_parser("setup", help="create .venv and install torch and the course (once)")
    s.add_argument("--dry-run", action="store_true", help="print the commands; run none")
    s.add_argument("--extras", default=LAB_EXTRAS, help=f"the course's extras to install (default {LAB_EXTRAS}; "
                                                        f"the tests: {TEST_EXTRAS}; grading needs only: grade)")
    commands.add_parser("lab", help="set up, trust the notebooks, then JupyterLab on the course (other arguments go "
                                    "to jupyter lab)")
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
