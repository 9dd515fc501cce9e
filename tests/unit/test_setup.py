"""tools/course.py, the set-up that `make` and Windows both use: which torch it installs on each platform, that the
Makefile goes through it, and that CI installs nothing the README's two commands would not."""

import importlib.util
import json
import os
import platform
import re
import shutil
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


@pytest.mark.parametrize("system, machine, gpu, local, expected", [
    ("Linux", "x86_64", True, False, [f"torch=={V}"]),             # PyPI's Linux wheel is the CUDA build
    ("Linux", "x86_64", False, False, CPU_INDEX),                   # the CPU build, from PyTorch's CPU index
    ("Linux", "x86_64", False, True, [f"torch=={V}+cpu"]),          # ... or the wheel pip finds on this disk
    ("Linux", "aarch64", False, False, [f"torch=={V}"]),            # PyPI's aarch64 wheel (CPU)
    ("Windows", "AMD64", False, False, [f"torch=={V}"]),            # PyPI's Windows wheel is the CPU build
    ("Windows", "AMD64", True, False, [f"torch=={V}"]),
    ("Darwin", "arm64", False, False, [f"torch=={V}"]),             # no +cpu wheel exists for macOS
])
def test_torch_comes_from_where_a_wheel_for_the_platform_exists(system, machine, gpu, local, expected):
    assert course.torch_install(system, machine, gpu, local) == expected


@pytest.mark.parametrize("system, machine, says", [
    ("Darwin", "x86_64", r"no torch 2\.\d+\.\d+ for Intel macOS.*last Intel macOS wheels are torch 2\.2.*Colab.*"
                         r"modal run cloud/modal_lab\.py"),
    ("Windows", "ARM64", r"no torch 2\.\d+\.\d+ for Windows on ARM.*x64 \(AMD64\) Python.*WSL.*Colab"),
    ("FreeBSD", "amd64", r"no torch rule for system 'FreeBSD' on 'amd64'.*install torch=="),
])
def test_a_platform_without_a_torch_wheel_is_told_where_the_course_runs(system, machine, says):
    with pytest.raises(SystemExit, match=says):
        course.torch_install(system, machine, False)


def test_the_local_wheel_look_finds_only_what_pip_has_on_disk():
    assert course.has_local_wheel("pip") is False or course.has_local_wheel("pip") is True  # answers, never raises
    assert course.has_local_wheel("no-such-package-cutecourse==0.0.1") is False


def test_the_venv_layout_follows_the_platform():
    assert course.venv_python(Path("v"), "Windows") == Path("v/Scripts/python.exe")
    assert course.venv_script("jupyter", Path("v"), "Windows") == Path("v/Scripts/jupyter.exe")
    assert course.venv_python(Path("v"), "Darwin") == Path("v/bin/python")


def test_dry_run_prints_this_machines_torch_and_a_learners_install():
    out = subprocess.run([sys.executable, str(ROOT / "tools" / "course.py"), "setup", "--dry-run"],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    local = course.has_local_wheel(f"torch=={V}+cpu")
    args = course.torch_install(platform.system(), platform.machine(), course.has_nvidia_gpu(), local)
    assert f"-m pip install {' '.join(args)}\n" in out.stdout
    assert out.stdout.count("pip install") == 2, out.stdout  # torch once, from where its wheel is: no second try
    assert "-m pip install -q -e '.[lab]'" in out.stdout and "dev" not in out.stdout


def test_a_grading_machine_installs_only_the_grade_extra():
    out = subprocess.run([sys.executable, str(ROOT / "tools" / "course.py"), "setup", "--dry-run", "--extras",
                          "grade"], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "-m pip install -q -e '.[grade]'" in out.stdout and "dev" not in out.stdout


def test_the_venv_remembers_its_extras_and_a_test_venv_serves_the_lab(tmp_path, monkeypatch):
    monkeypatch.setattr(course, "VENV", tmp_path)
    assert course.installed_extras(tmp_path) == set()
    (tmp_path / ".installed").write_text(json.dumps({"made_from": course._stamp(), "extras": ["dev", "lab"]}))
    assert course.installed_extras(tmp_path) == {"dev", "lab"}
    python = course.venv_python(tmp_path)
    monkeypatch.setattr(course, "venv_python", lambda: python)
    monkeypatch.setattr(course, "_run", lambda *a: pytest.fail(f"set-up ran {a}"))
    assert course.setup(extras="lab") == python  # nothing to do: the lab's extra is there
    (tmp_path / ".installed").write_text(json.dumps({"made_from": "an older pyproject", "extras": ["dev", "lab"]}))
    assert course.installed_extras(tmp_path) == set()  # made from another pyproject: set up again


def test_a_second_extra_is_installed_beside_the_first(tmp_path, monkeypatch):
    ran = []
    monkeypatch.setattr(course, "VENV", tmp_path)
    (tmp_path / ".installed").write_text(json.dumps({"made_from": course._stamp(), "extras": ["lab"]}))
    python = course.venv_python(tmp_path)
    python.parent.mkdir(parents=True)
    python.symlink_to(sys.executable)
    monkeypatch.setattr(course, "venv_python", lambda: python)
    monkeypatch.setattr(course, "_run", lambda command, dry_run: ran.append(command) or 0)
    course.setup(extras="dev")
    assert ran[-1][-1] == ".[dev,lab]", ran  # the union: lab stays
    assert course.installed_extras(tmp_path) == {"dev", "lab"}


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
    ("test-gpu", "tools/course.py setup --extras dev,lab"),  # pytest is the tests' extra, not the lab's
])
def test_the_makefile_sets_up_through_the_script(goal, expected):
    out = make_n(goal, "LAB_ARGS=--no-browser")
    assert out.returncode == 0, out.stderr
    assert expected in out.stdout


def test_another_interpreter_skips_the_set_up():
    """The Modal image and a GPU host set PYTHON: `make test-gpu` then runs pytest with it and builds no .venv."""
    out = make_n("test-gpu", "PYTHON=python3", "GPU_WORKERS=12")
    assert out.stdout.strip() == "python3 -m pytest -m gpu -n 12 --dist load", out.stdout


def test_jupyterlab_opens_at_the_course_root_on_the_lessons_without_its_news_prompt(monkeypatch):
    ran, trusted = [], []
    monkeypatch.setattr(course, "setup", lambda: "venv-python")
    monkeypatch.setattr(course, "quiet_lab", lambda: None)
    monkeypatch.setattr(course, "trust", lambda python: trusted.append(python) or 0)
    monkeypatch.setattr(course, "_run", lambda cmd, dry_run: ran.append(cmd) or 0)
    assert course.lab(["--no-browser"]) == 0
    (cmd,) = ran
    assert cmd[1] == "lab" and cmd[-1] == "--no-browser", cmd
    assert "--LabApp.news_url=None" in cmd and "--ServerApp.root_dir=." in cmd, cmd
    assert "--ServerApp.default_url=/lab/tree/notebooks" in cmd, cmd
    assert trusted == ["venv-python"]  # the notebooks are trusted before JupyterLab opens them


def test_make_lab_refuses_to_open_untrusted_notebooks(monkeypatch):
    monkeypatch.setattr(course, "setup", lambda: "venv-python")
    monkeypatch.setattr(course, "quiet_lab", lambda: None)
    monkeypatch.setattr(course, "trust", lambda python: 1)
    monkeypatch.setattr(course, "_run", lambda cmd, dry_run: pytest.fail("JupyterLab started"))
    with pytest.raises(SystemExit, match="stored pictures would show as text"):
        course.lab([])


def test_trust_signs_every_course_notebook_and_names_one_it_cannot_read(tmp_path, monkeypatch, capfd):
    nbformat = pytest.importorskip("nbformat")
    from nbformat.sign import NotebookNotary

    monkeypatch.setenv("JUPYTER_DATA_DIR", str(tmp_path / "data"))
    for folder in course.COURSE_FOLDERS:
        shutil.copytree(ROOT / folder, tmp_path / "course" / folder)
    broken = tmp_path / "course" / "notebooks" / "00_broken.ipynb"
    broken.write_text("{}")  # a notebook no more: the others are trusted all the same
    notebooks = course.course_notebooks(tmp_path / "course")
    # Every notebook in the course's folders (lessons, their part notebooks, solutions, exercises), and the broken one.
    on_disk = sorted(p for folder in course.COURSE_FOLDERS for p in (tmp_path / "course" / folder).glob("*.ipynb"))
    assert sorted(notebooks) == on_disk and len(on_disk) >= 3 * 8 + 1
    assert course.trust(sys.executable, tmp_path / "course") == 0  # into a data folder not made yet
    out = capfd.readouterr().out
    assert out.startswith(f"not trusted: {broken} cannot be read as a notebook (") and out.count("\n") == 1, out
    notary = NotebookNotary(data_dir=str(tmp_path / "data"))
    assert all(notary.check_signature(nbformat.read(n, nbformat.NO_CONVERT)) for n in notebooks if n != broken)
    (tmp_path / "elsewhere").mkdir()
    elsewhere = NotebookNotary(data_dir=str(tmp_path / "elsewhere"))  # another user's: nothing trusted there
    assert not any(elsewhere.check_signature(nbformat.read(n, nbformat.NO_CONVERT)) for n in notebooks if n != broken)


def test_make_lab_turns_jupyterlabs_news_prompt_off_in_the_environment(tmp_path):
    import json

    path = course.quiet_lab(tmp_path / "venv")
    assert path == tmp_path / "venv" / "share" / "jupyter" / "lab" / "settings" / "overrides.json"
    settings = json.loads(path.read_text())["@jupyterlab/apputils-extension:notification"]
    assert settings == {"fetchNews": "false", "checkForUpdates": False}


#: What CI may install beside the README's two commands, for tests only, as no wheel ships either: a browser
#: (tests/browser needs it) and mmdebstrap, which builds tests/unit/test_colab.py's Python 3.13 Colab runtime.
CI_ONLY = {"chromium", "mmdebstrap"}
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
