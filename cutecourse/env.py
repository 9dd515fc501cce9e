"""What this machine can do for the course: Python, torch, the CuTe DSL, the GPU, its driver and arch, and Colab.

`cutecourse doctor` prints :func:`report`; notebook set-up cells call :func:`doctor`. Nothing here imports torch or
the DSL at module import time, and every probe survives their absence: a laptop without either still gets a report.
"""

from __future__ import annotations

import importlib.metadata
import os
import platform
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

DSL_PIN = "4.8.1"
#: The arch kernels are compiled for when there is no GPU (compile-only mode). sm_90a has every instruction the
#: course uses; sm_80 kernels are compiled explicitly where a lesson needs them.
COMPILE_ONLY_ARCH = "sm_90a"
#: Oldest driver for each CUDA major version the DSL's libraries and cuda-bindings are built against: the driver of
#: that CUDA Toolkit's first release (NVIDIA's CUDA release notes, table 3; the DSL's quick start names 575.51.03
#: for its CUDA 12.9 build).
MIN_DRIVER = {12: ("575.51.03", "CUDA 12.9"), 13: ("580.65.06", "CUDA 13.0")}
#: Where NVIDIA ships the CuTe DSL's wheels (``sys.platform``, ``platform.machine()``): Linux x86_64 and aarch64, and
#: Windows x86_64 (4.8.1's quick start; pip resolves no wheel for macOS or Windows on ARM). pyproject.toml's marker
#: on the DSL names the same platforms (tests/unit/test_dsl_platforms.py holds them, and the wheels, together).
DSL_PLATFORMS = (("linux", "x86_64"), ("linux", "aarch64"), ("win32", "AMD64"))
#: What runs the kernels where this machine cannot: the Modal lab (README, "Where to run it").
MODAL_LAB = "the Modal lab on an H100 (modal run cloud/modal_lab.py)"
#: The CuTe DSL compiles and launches kernels for sm_80 and newer only (its FAQ; on a T4, sm_75, `cute.compile`
#: fails with "-arch=compute_ is an unsupported option"). Older GPUs get the compile-only mode of a CPU machine.
MIN_KERNEL_CAPABILITY = (8, 0)
#: What a Colab learner can change: the runtime, never the driver.
COLAB_GPU_RUNTIME = "Runtime > Change runtime type > an A100, L4 or H100 GPU"


@dataclass
class Machine:
    """A snapshot of this machine, as far as the course cares."""

    python: str
    os: str
    torch: str | None = None
    torch_cuda: str | None = None
    dsl: str | None = None
    dsl_cuda_major: int | None = None
    cuda_bindings: str | None = None
    tvm_ffi: str | None = None  # apache-tvm-ffi: what the GEMM steps' launcher calls their kernels through
    gpu: str | None = None
    capability: tuple[int, int] | None = None
    driver: str | None = None
    colab: bool = False
    warnings: list[str] = field(default_factory=list)

    @property
    def sm(self) -> str | None:
        return None if self.capability is None else f"sm_{self.capability[0]}{self.capability[1]}"

    @property
    def can_run_cpu_lessons(self) -> bool:
        return sys.version_info >= (3, 10)

    @property
    def can_run_kernels(self) -> bool:
        return self.kernels_blocked() is None

    def kernels_blocked(self, cc: int = 80) -> str | None:
        """Why this machine cannot launch the course's kernels for sm_`cc`, with what works instead; None where it
        can. The one verdict behind the doctor's "can do" line, the ``%%gpu`` magic and the ``gpu(cc)`` marker: the
        DSL, the GPU's arch, the driver the DSL's build needs, and a torch that makes CUDA tensors."""
        if self.dsl is None:
            return f"needs the CuTe DSL and an sm_{cc} GPU"
        if self.capability is None:
            return f"needs sm_{cc}; this machine has no GPU"
        have = self.capability[0] * 10 + self.capability[1]
        if have < cc:
            return f"needs sm_{cc}; this GPU is sm_{have}"
        short = driver_shortfall(self)
        if short is not None:
            need, cuda, what = short
            instead = (f"Colab's driver cannot be changed: the compile-only parts run here, and {MODAL_LAB} runs the "
                       "kernels" if self.colab else
                       "upgrade the driver (cutecourse doctor prints the command); until then the compile-only parts "
                       "run")
            return (f"needs NVIDIA driver >= {need} ({cuda}) for {' and '.join(what)}; this driver is "
                    f"{self.driver}: {instead}")
        if self.torch is None or self.torch_cuda is None:
            which = "no torch is installed" if self.torch is None else f"torch {self.torch} is a CPU build"
            return (f"needs torch's CUDA build (the kernels run on its CUDA tensors), and {which}: install one from "
                    "https://pytorch.org/get-started/locally/")
        return None

    def capabilities(self) -> str:
        """One line: which lessons this machine can do."""
        if self.dsl is None:
            return "lessons 1-2 and the eager layout algebra (no CuTe DSL here: kernels neither compile nor run)"
        if self.capability is None:
            return f"layouts + compile-only (no GPU; kernels compile for sm_80 and {COMPILE_ONLY_ARCH})"
        major, _ = self.capability
        if self.capability < MIN_KERNEL_CAPABILITY:
            return (f"lessons 1-2 and the compile-only parts of 3-8 (the CuTe DSL runs kernels on sm_80+ only and "
                    f"this GPU is {self.sm}; kernels compile for {COMPILE_ONLY_ARCH}, and their GPU cells say why "
                    "they do not run)")
        blocked = self.kernels_blocked()
        if blocked is not None:
            return (f"lessons 1-2 and the compile-only parts of 3-8 (kernels compile for {COMPILE_ONLY_ARCH}; they "
                    f"do not run here: {blocked})")
        if major == 8:
            return f"lessons 1-8 except TMA/wgmma ({self.sm})"
        if major == 9:
            return f"all lessons ({self.sm})"
        return (f"lessons 1-8 except the Hopper-only wgmma steps, which need sm_90 exactly ({self.sm} has no wgmma; "
                "they still compile)")


def _version(dist: str) -> str | None:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


def _dsl_cuda_major() -> int | None:
    for major in (13, 12):
        if _version(f"nvidia-cutlass-dsl-libs-cu{major}"):
            return major
    return None


def _nvidia_smi() -> tuple[str, tuple[int, int], str] | None:
    """(name, capability, driver) of GPU 0 from nvidia-smi, which needs neither torch nor the DSL."""
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return None
    try:
        out = subprocess.run([exe, "--query-gpu=name,compute_cap,driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=20, check=True).stdout
    except (subprocess.SubprocessError, OSError):
        return None
    first = out.strip().splitlines()[0] if out.strip() else ""
    parts = [p.strip() for p in first.split(",")]
    if len(parts) != 3:
        return None
    try:
        major, minor = (int(x) for x in parts[1].split("."))
    except ValueError:
        return None
    return parts[0], (major, minor), parts[2]


def _torch_cuda_build() -> str | None:
    """The CUDA version torch was built for, read from torch/version.py: importing torch takes seconds."""
    import importlib.util
    import re

    try:
        spec = importlib.util.find_spec("torch")
    except (ImportError, ValueError):  # a broken or hidden install is as good as none here
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    try:
        text = (Path(list(spec.submodule_search_locations)[0]) / "version.py").read_text()
    except OSError:
        return None
    found = re.search(r"^cuda\s*(?::\s*[^=]+)?=\s*['\"]([^'\"]+)['\"]", text, re.MULTILINE)
    return found.group(1) if found else None


def _no_nvidia_device() -> bool:
    return not Path("/dev/nvidiactl").exists() and not Path("/proc/driver/nvidia").exists()


def _torch_gpu() -> tuple[str, tuple[int, int]] | None:
    if _no_nvidia_device() and sys.platform == "linux":
        return None  # no driver here: skip the seconds-long torch import
    try:
        import torch
    except ImportError:
        return None
    if not torch.cuda.is_available():
        return None
    return torch.cuda.get_device_name(0), tuple(torch.cuda.get_device_capability(0))


def on_colab() -> bool:
    """In a Colab runtime: its kernel has imported google.colab, and its processes (`!cutecourse doctor`) inherit
    COLAB_RELEASE_TAG."""
    return "google.colab" in sys.modules or "COLAB_RELEASE_TAG" in os.environ


def probe() -> Machine:
    """Look at the machine; never raises."""
    m = Machine(python=platform.python_version(), os=f"{platform.system()} {platform.machine()}", colab=on_colab())
    m.torch = _version("torch")
    m.torch_cuda = _torch_cuda_build()
    m.dsl = _version("nvidia-cutlass-dsl")
    m.dsl_cuda_major = _dsl_cuda_major()
    m.cuda_bindings = _version("cuda-bindings")
    m.tvm_ffi = _version("apache-tvm-ffi")
    smi = _nvidia_smi()
    if smi is not None:
        m.gpu, m.capability, m.driver = smi
    else:
        gpu = _torch_gpu()
        if gpu is not None:
            m.gpu, m.capability = gpu
    _check(m)
    return m


def _check(m: Machine) -> None:
    """Add the warnings a learner must act on, each with the command that fixes it."""
    if sys.version_info < (3, 10):
        m.warnings.append(f"Python {m.python} is too old; the course needs 3.10+: "
                          "conda env create -f environment.yml && conda activate cutecourse")
    if m.dsl is None and dsl_shipped():
        m.warnings.append(f"the CuTe DSL is not installed: pip install nvidia-cutlass-dsl=={DSL_PIN}")
    elif m.dsl is not None and m.dsl != DSL_PIN:
        m.warnings.append(f"nvidia-cutlass-dsl {m.dsl} is installed; the course is tested with {DSL_PIN}: "
                          f"pip install nvidia-cutlass-dsl=={DSL_PIN}")
    if m.dsl is not None and m.tvm_ffi is None:
        m.warnings.append("apache-tvm-ffi is not installed, and the GEMM steps call their kernels through it: "
                          "pip install 'apache-tvm-ffi>=0.1.15,<0.2'")
    if m.colab and m.dsl is not None and not (m.capability and m.capability >= MIN_KERNEL_CAPABILITY):
        have = f"this runtime's {m.gpu} is {m.sm}" if m.gpu else "this runtime has no GPU"
        # Colab's GPU runtimes share one image, and so one driver: where this one is too old, so are the others.
        where = (f"{COLAB_GPU_RUNTIME}, if its driver is new enough for the DSL (the doctor there says), else "
                 f"{MODAL_LAB}" if driver_shortfall(m) is None else MODAL_LAB)
        m.warnings.append(f"on Colab, kernels need an sm_80+ GPU and {have}: {where} "
                          "(lessons 1-2 and the compile-only parts run here as they are)")
    short = driver_shortfall(m)
    if short is None:
        return
    need, cuda, what = short
    # Colab's driver comes with the runtime: there the only fix is the DSL's CUDA 12.9 build, where the driver runs it.
    need_upgrade = (f"upgrade the NVIDIA driver (Ubuntu: sudo apt install "
                    f"nvidia-driver-{MIN_DRIVER[13][0].split('.')[0]})" if not m.colab else None)
    stay_on_12 = ("or stay on CUDA 12.9: pip uninstall -y nvidia-cutlass-dsl-libs-cu13 && "
                  f"pip install 'cuda-bindings>=12.9,<13' nvidia-cutlass-dsl-libs-cu12=={DSL_PIN}")
    # A driver that cannot run CUDA 12.9 can only be upgraded; one that runs 12.9 can also stay there.
    if driver_version(m.driver) < driver_version(MIN_DRIVER[12][0]):
        fix = need_upgrade or ("Colab's driver cannot be changed, so this runtime cannot run the kernels; lessons "
                               f"1-2 and the compile-only parts still work, and {MODAL_LAB} runs them")
    else:
        fix = f"{need_upgrade}, {stay_on_12}" if need_upgrade else stay_on_12.removeprefix("or ")
    m.warnings.append(f"driver {m.driver} is too old for {' and '.join(what)} ({cuda} builds need >= {need}): {fix}")


def driver_version(text: str | None) -> tuple[int, ...] | None:
    """A driver version as numbers to compare ("570.124.06" -> (570, 124, 6)); None where it is not one."""
    try:
        return tuple(int(part) for part in text.split("."))
    except (AttributeError, ValueError):
        return None


def driver_shortfall(m: Machine) -> tuple[str, str, list[str]] | None:
    """Where the driver is older than the DSL's build in use needs (its CUDA libraries, and cuda-bindings): the
    minimum driver, its CUDA and what needs it; None where the driver is new enough, or unknown."""
    have = driver_version(m.driver)
    if have is None or m.dsl is None:
        return None
    bindings = driver_version(m.cuda_bindings)
    builds = ((m.dsl_cuda_major, f"the CuTe DSL's CUDA {m.dsl_cuda_major} libraries"),
              (bindings[0] if bindings else None, f"cuda-bindings {m.cuda_bindings}"))
    needs = [(major, what) for major, what in builds
             if major in MIN_DRIVER and have < driver_version(MIN_DRIVER[major][0])]
    if not needs:
        return None
    need, cuda = MIN_DRIVER[max(major for major, _ in needs)]
    return need, cuda, [what for _, what in needs]


def report(m: Machine | None = None) -> str:
    """The doctor's text: versions, GPU, and what this machine can do."""
    m = m or probe()
    torch_line = "not installed (pip install torch)" if m.torch is None else (
        f"{m.torch} ({'CUDA ' + m.torch_cuda if m.torch_cuda else 'CPU build'})")
    dsl_line = ("not installed" if m.dsl is None else
                f"{m.dsl} (CUDA {m.dsl_cuda_major or '?'} libs, cuda-bindings {m.cuda_bindings or '?'})")
    gpu_line = "none" if m.gpu is None else f"{m.gpu}, {m.sm} (compute capability {m.capability[0]}.{m.capability[1]})"
    lines = [
        f"python      {m.python} on {m.os}{' (Colab)' if m.colab else ''}",
        f"torch       {torch_line}",
        f"cute dsl    {dsl_line}",
        f"gpu         {gpu_line}",
        f"driver      {m.driver or 'none'}",
        f"can do      {m.capabilities()}",
    ]
    lines += [f"warning     {w}" for w in m.warnings]
    return "\n".join(lines)


def load_new_installs() -> list[str]:
    """Make what pip just installed into this running interpreter importable now, and return the folders that joined
    ``sys.path``. Python reads site-packages' ``.pth`` files only at start-up, and the CuTe DSL reaches ``sys.path``
    through one (``nvidia_cutlass_dsl_packages.pth``): without this a notebook needs a restart before
    ``import cutlass``. Each site-packages folder is read again as start-up reads it (``site.addsitedir``)."""
    import importlib
    import site

    before = list(sys.path)
    folders = [*site.getsitepackages(), site.getusersitepackages()] if hasattr(site, "getsitepackages") else []
    for folder in folders:
        if os.path.isdir(folder):
            site.addsitedir(folder)
    importlib.invalidate_caches()
    return [folder for folder in sys.path if folder not in before]


def doctor() -> Machine:
    """Print the report (for notebook set-up cells) and return the snapshot."""
    m = probe()
    print(report(m))
    return m


def gpu_missing(cc: int) -> str | None:
    """Why this machine cannot run sm_`cc` kernels ("needs sm_90; this GPU is sm_80"), or None if it can: the
    doctor's verdict (:meth:`Machine.kernels_blocked`)."""
    return probe().kernels_blocked(cc)


def gpu_cell(line: str, cell: str) -> None:
    """The ``%%gpu [cc]`` cell magic: run the cell on a GPU of compute capability `cc` (default 80), otherwise print
    one line saying why it was skipped. Load it with ``%load_ext cutecourse``."""
    from IPython import get_ipython

    cc = int(line.strip() or 80)
    missing = gpu_missing(cc)
    if missing:
        print(f"[GPU cell not run: {missing}]")
        return
    get_ipython().run_cell(cell)


def dsl_shipped(system: str = sys.platform, machine: str | None = None) -> bool:
    """Whether NVIDIA ships the CuTe DSL for this platform (`system` as ``sys.platform``, `machine` as
    ``platform.machine()``): DSL_PLATFORMS."""
    return (system, platform.machine() if machine is None else machine) in DSL_PLATFORMS


def dsl_cell(line: str, cell: str) -> None:
    """The ``%%dsl`` cell magic: run the cell where the CuTe DSL imports, otherwise print one line saying what it needs
    (NVIDIA ships it for Linux and Windows x86_64; lessons 1-2 keep every fact in eager cells too). Load it with
    ``%load_ext cutecourse``."""
    import importlib.util

    from IPython import get_ipython

    try:
        found = importlib.util.find_spec("cutlass") is not None
    except (ImportError, ValueError):  # a broken install, or one an environment hides, is as good as none
        found = False
    if not found:
        fix = (f"pip install nvidia-cutlass-dsl=={DSL_PIN}" if dsl_shipped() else
               "NVIDIA ships it for Linux and Windows x86_64 only: run this lesson there, in WSL, on Colab or in "
               "the Modal lab for these cells")
        print(f"[DSL cell not run: needs the CuTe DSL ({fix}); the eager cells show the same]")
        return
    get_ipython().run_cell(cell)


def use_compile_only_arch() -> str | None:
    """Where the DSL cannot launch kernels (no GPU, one older than sm_80 such as Colab's T4, or a driver too old for
    the DSL's build), point the DSL at COMPILE_ONLY_ARCH so `cute.compile` emits PTX and cubin; returns the arch.

    Leaves an arch the user already chose alone, and does nothing on a machine that runs the kernels.
    """
    if probe().can_run_kernels:
        return None
    os.environ.setdefault("CUTE_DSL_ARCH", COMPILE_ONLY_ARCH)
    return os.environ["CUTE_DSL_ARCH"]

