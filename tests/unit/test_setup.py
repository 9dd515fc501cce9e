"""tools/course.py, the set-up that `make` and Windows both use: which torch it installs on each platform, that the
Makefile goes through it, and that CI installs nothing the README's two commands would not."""

import importlib.util
import os
import platform
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("course_setup", ROOT / "tools" / "course.py")
course = importlib.util.module_from_spec(spec)
spec.loader.exec_module(course)
V = course.TORCH_VERSION
CPU_INDEX = ["--extra-index-url", course.TORCH_CPU_INDEX, f"torch=={V}+cpu"]


@pytest.mark.parametrize("system, gpu, expected", [
    ("Linux", True, [[f"torch=={V}"]]),                          # PyPI's Linux wheel is the CUDA build
    ("Linux", False, [[f"torch=={V}+cpu"], CPU_INDEX]),          # a local CPU wheel first, else PyTorch's CPU index
    ("Windows", False, [[f"torch=={V}+cpu"], CPU_INDEX]),
    ("Windows", True, [[f"torch=={V}+cpu"], CPU_INDEX]),         # no DSL on Windows: a GPU runs no kernel there
    ("Darwin", False, [[f"torch=={V}"]]),                        # no +cpu wheel exists for macOS
])
def test_torch_rule_picks_a_wheel_that_exists_for_each_platform(system, gpu, expected):
    assert course.torch_installs(system, gpu) == expected


def test_torch_rule_refuses_an_unknown_system_with_the_fix():
    with pytest.raises(SystemExit, match=r"no torch rule for system 'FreeBSD'.*install torch=="):
        course.torch_installs("FreeBSD", False)


def test_the_venv_layout_follows_the_platform():
    assert course.venv_python(Path("v"), "Windows") == Path("v/Scripts/python.exe")
    assert course.venv_script("jupyter", Path("v"), "Windows") == Path("v/Scripts/jupyter.exe")
    assert course.venv_python(Path("v"), "Darwin") == Path("v/bin/python")


def test_dry_run_prints_this_machines_torch_and_the_course_install():
    out = subprocess.run([sys.executable, str(ROOT / "tools" / "course.py"), "setup", "--dry-run"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    first = course.torch_installs(platform.system(), course.has_nvidia_gpu())[0]
    assert f"-m pip install {' '.join(first)}\n" in out.stdout
    assert "-m pip install -q -e '.[dev,lab]'" in out.stdout


def test_a_grading_machine_installs_only_the_grade_extra():
    out = subprocess.run([sys.executable, str(ROOT / "tools" / "course.py"), "setup", "--dry-run", "--extras",
                          "grade"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert "-m pip install -q -e '.[grade]'" in out.stdout and "dev" not in out.stdout
    assert course._stamp("grade") != course._stamp("dev,lab")  # a .venv made for one is redone for the other


def test_old_python_is_told_which_command_to_run(monkeypatch):
    monkeypatch.setattr(sys, "version_info", (3, 9, 18))
    with pytest.raises(SystemExit, match=r"needs Python 3\.10\+.*py -3\.12 tools\\course\.py setup"):
        course.setup(dry_run=True)


def make_n(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """`make -n` as a learner types it: nothing inherited from a `make` this test may run under (MAKEFLAGS carries
    the outer command line's variables, MAKELEVEL adds "Entering directory" lines)."""
    clean = {k: v for k, v in (env or os.environ).items() if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL",
                                                                       "PYTEST_ARGS", "LAB_ARGS", "PYTHON")}
    return subprocess.run(["make", "-n", "--no-print-directory", "-C", str(ROOT), *args], capture_output=True,
                          text=True, timeout=60, env=clean)


@pytest.mark.parametrize("goal, expected", [
    ("setup", "tools/course.py setup"),
    ("lab", "tools/course.py lab --no-browser"),
    ("test", "tools/course.py test"),
])
def test_the_makefile_sets_up_through_the_script(goal, expected):
    out = make_n(goal, "LAB_ARGS=--no-browser")
    assert out.returncode == 0, out.stderr
    assert expected in out.stdout


def test_another_interpreter_skips_the_set_up():
    """The Modal image and a GPU host set PYTHON: `make test-gpu` then runs pytest with it and builds no .venv."""
    out = make_n("test-gpu", "PYTHON=python3")
    assert out.stdout.strip() == "python3 -m pytest -m gpu", out.stdout


def test_jupyterlab_opens_on_the_lessons_without_its_news_prompt(monkeypatch):
    ran = []
    monkeypatch.setattr(course, "setup", lambda: None)
    monkeypatch.setattr(course, "quiet_lab", lambda: None)
    monkeypatch.setattr(course, "_run", lambda cmd, dry_run: ran.append(cmd) or 0)
    assert course.lab(["--no-browser"]) == 0
    (cmd,) = ran
    assert cmd[1] == "lab" and cmd[-1] == "--no-browser", cmd
    assert "--LabApp.news_url=None" in cmd and "--ServerApp.root_dir=notebooks" in cmd, cmd


def test_make_lab_turns_jupyterlabs_news_prompt_off_in_the_environment(tmp_path):
    import json

    path = course.quiet_lab(tmp_path / "venv")
    assert path == tmp_path / "venv" / "share" / "jupyter" / "lab" / "settings" / "overrides.json"
    settings = json.loads(path.read_text())["@jupyterlab/apputils-extension:notification"]
    assert settings == {"fetchNews": "false", "checkForUpdates": False}


#: What CI may install beside the README's two commands: a browser, which no wheel ships (tests/browser needs it).
CI_ONLY = {"chromium"}
INSTALLS = re.compile(r"(?:apt-get|apt|pip|pip3|conda|brew|dnf|yum|apk)\b[^\n]*?\binstall\b([^\n&;|]*)")


def installed_by(text: str) -> set[str]:
    """The packages the install commands in a shell script or a Makefile name (options and variables left out)."""
    return {word for match in INSTALLS.finditer(text) for word in match.group(1).split()
            if not word.startswith(("-", "$"))}


def test_ci_installs_nothing_the_readmes_two_commands_would_not():
    """A green CI must not hide a missing install step: .ci/run installs only a browser, and `make test` (what CI
    and the README run) installs only through tools/course.py, from pyproject.toml."""
    assert installed_by((ROOT / ".ci" / "run").read_text()) <= CI_ONLY
    recipe = make_n("test").stdout
    assert installed_by(recipe) == set(), recipe
    assert "tools/course.py test" in recipe


def test_the_install_finder_sees_an_apt_or_pip_install():
    script = "apt-get update && apt-get install -y --no-install-recommends chromium bubblewrap\npip install -q ruff\n"
    assert installed_by(script) == {"chromium", "bubblewrap", "ruff"}
