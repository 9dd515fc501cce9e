"""`cutecourse doctor`: what it says about a machine, and the fixes it prints."""

import subprocess
import sys

import pytest

from cutecourse import env
from cutecourse.cli import main


def machine(**kw):
    base = dict(python="3.12.0", os="Linux x86_64", torch="2.13.0", torch_cuda="13.0", dsl=env.DSL_PIN,
                dsl_cuda_major=13, cuda_bindings="13.0.1", tvm_ffi="0.1.15.post2")
    base.update(kw)
    m = env.Machine(**base)
    env._check(m)
    return m


@pytest.mark.parametrize("cc, expected", [
    (None, "layouts + compile-only (no GPU; kernels compile for sm_80 and sm_90a)"),
    ((8, 0), "lessons 1-8 except TMA/wgmma (sm_80)"),
    ((8, 9), "lessons 1-8 except TMA/wgmma (sm_89)"),
    ((9, 0), "all lessons (sm_90)"),
])
def test_capabilities_follow_the_compute_capability(cc, expected):
    assert machine(capability=cc, gpu=None if cc is None else "GPU").capabilities() == expected


def test_t4_is_told_it_runs_lessons_1_2_and_compiles_the_rest():
    m = machine(capability=(7, 5), gpu="Tesla T4")
    text = m.capabilities()
    assert text.startswith("lessons 1-2 and the compile-only parts") and "sm_80+ only" in text and "sm_75" in text
    assert not m.can_run_kernels and machine(capability=(8, 0), gpu="A100").can_run_kernels


def test_blackwell_is_told_wgmma_needs_sm90():
    assert "wgmma" in machine(capability=(10, 0), gpu="B200").capabilities()


def test_no_dsl_means_cpu_lessons_only():
    assert machine(dsl=None, dsl_cuda_major=None).capabilities().startswith("lessons 1-2")


def test_old_driver_for_cuda13_warns_with_the_exact_fix():
    m = machine(capability=(9, 0), gpu="H100", driver="575.51.03")
    text = "\n".join(m.warnings)
    assert ">= 580" in text and "sudo apt install nvidia-driver-580" in text
    assert "pip install 'cuda-bindings>=12.9,<13'" in text


def test_driver_too_old_even_for_cuda_12_9_must_be_upgraded():
    m = machine(capability=(8, 0), gpu="A100", driver="550.90.07", dsl_cuda_major=12, cuda_bindings="12.9.0")
    assert len(m.warnings) == 1
    assert ">= 575" in m.warnings[0] and "stay on CUDA 12.9" not in m.warnings[0]


def test_a_new_enough_driver_gets_no_warning():
    assert machine(capability=(9, 0), gpu="H200", driver="580.159.04").warnings == []


def test_the_dsl_without_tvm_ffi_is_told_how_to_install_it():
    assert any("pip install 'apache-tvm-ffi>=0.1.15,<0.2'" in w for w in machine(tvm_ffi=None).warnings)
    without_dsl = machine(dsl=None, dsl_cuda_major=None, tvm_ffi=None).warnings  # the DSL first: no kernels without
    assert without_dsl and not any("apache-tvm-ffi" in w for w in without_dsl)


def test_wrong_dsl_version_warns_with_the_pin():
    m = machine(dsl="4.2.0")
    assert any(f"pip install nvidia-cutlass-dsl=={env.DSL_PIN}" in w for w in m.warnings)


def test_doctor_on_this_machine_exits_zero_and_names_the_mode(capsys):
    assert main(["doctor"]) == 0
    out = capsys.readouterr().out
    m = env.probe()
    assert m.capabilities() in out
    if m.capability is None and m.dsl is not None:
        assert "no GPU" in out and "compile-only" in out


def test_doctor_console_script_runs():
    out = subprocess.run([sys.executable, "-m", "cutecourse.cli", "doctor"], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("python ")


def colab(**kw):
    return machine(colab=True, **kw)


def test_colab_old_driver_gets_the_cuda_12_build_never_apt():
    """Colab's driver comes with the runtime: the fix there is the DSL's CUDA 12.9 build (cuda-bindings 12)."""
    m = colab(capability=(8, 0), gpu="NVIDIA A100-SXM4-40GB", driver="575.57.08")
    text = "\n".join(m.warnings)
    assert "sudo" not in text and "apt" not in text
    assert f"pip install 'cuda-bindings>=12.9,<13' nvidia-cutlass-dsl-libs-cu12=={env.DSL_PIN}" in text
    assert "stay on CUDA 12.9: pip uninstall" in text


def test_colab_driver_too_old_for_cuda_12_9_says_this_runtime_cannot_run_kernels():
    m = colab(capability=(8, 0), gpu="A100", driver="550.54.15", dsl_cuda_major=12, cuda_bindings="12.9.0")
    assert len(m.warnings) == 1 and "sudo" not in m.warnings[0]
    assert "cannot run the kernels" in m.warnings[0] and "lessons 1-2" in m.warnings[0]


def test_colab_t4_and_cpu_runtimes_are_told_which_runtime_runs_the_kernels():
    for m in (colab(capability=(7, 5), gpu="Tesla T4", driver="580.82.07"), colab()):
        assert any(env.COLAB_GPU_RUNTIME in w and "A100, L4 or H100" in w for w in m.warnings), m.warnings
    assert not any(env.COLAB_GPU_RUNTIME in w for w in colab(capability=(9, 0), gpu="H100",
                                                               driver="580.82.07").warnings)
    assert not any(env.COLAB_GPU_RUNTIME in w for w in machine(capability=(7, 5), gpu="T4").warnings)


def test_colab_is_detected_from_its_kernel_or_its_environment(monkeypatch):
    monkeypatch.delenv("COLAB_RELEASE_TAG", raising=False)
    monkeypatch.delitem(sys.modules, "google.colab", raising=False)
    assert not env.on_colab()
    monkeypatch.setenv("COLAB_RELEASE_TAG", "release-colab_20260101-060000_RC00")
    assert env.on_colab() and env.probe().colab and "(Colab)" in env.report(env.probe()).splitlines()[0]


@pytest.mark.parametrize("smi, arch", [
    (None, env.COMPILE_ONLY_ARCH),                                 # no GPU
    (("Tesla T4", (7, 5), "580.82.07"), env.COMPILE_ONLY_ARCH),    # the DSL cannot target sm_75: compile only
    (("NVIDIA A100", (8, 0), "580.82.07"), None),                  # kernels run on the GPU itself
])
def test_compile_only_mode_covers_gpus_the_dsl_cannot_target(monkeypatch, smi, arch):
    monkeypatch.setattr(env, "_nvidia_smi", lambda: smi)
    monkeypatch.setattr(env, "_torch_gpu", lambda: None)
    monkeypatch.setattr(env, "_torch_cuda_build", lambda: "12.8")  # a torch that makes CUDA tensors
    monkeypatch.delenv("CUTE_DSL_ARCH", raising=False)
    assert env.use_compile_only_arch() == arch
    assert env.os.environ.get("CUTE_DSL_ARCH") == arch


#: Colab's GPU image (googlecolab/backend-info, 2026-08-19): cuda-compat-12-8 570.124.06, cuda-bindings 12.9.7,
#: torch 2.11.0+cu128; pip then adds the DSL's CUDA 12 libraries.
COLAB_GPU = dict(capability=(8, 0), gpu="NVIDIA A100-SXM4-40GB", driver="570.124.06", dsl_cuda_major=12,
                 cuda_bindings="12.9.7", torch="2.11.0+cu128", torch_cuda="12.8")


def test_a_driver_older_than_the_dsl_build_needs_blocks_the_kernels_with_what_works_instead():
    m = colab(**COLAB_GPU)
    blocked = m.kernels_blocked(80)
    assert blocked.startswith("needs NVIDIA driver >= 575.51.03 (CUDA 12.9) for the CuTe DSL's CUDA 12 libraries "
                              "and cuda-bindings 12.9.7; this driver is 570.124.06"), blocked
    assert "compile-only parts run here" in blocked and "modal run cloud/modal_lab.py" in blocked
    assert not m.can_run_kernels
    assert m.capabilities().startswith("lessons 1-2 and the compile-only parts of 3-8") and blocked in m.capabilities()
    # off Colab the driver can be upgraded, and the verdict says so
    assert "upgrade the driver" in machine(**COLAB_GPU).kernels_blocked(80)


def test_the_verdict_compares_the_whole_driver_version():
    assert env.driver_version("570.124.06") == (570, 124, 6) and env.driver_version("n/a") is None
    just_below = machine(**{**COLAB_GPU, "driver": "575.51.02"})
    assert not just_below.can_run_kernels and "575.51.02" in just_below.kernels_blocked()
    assert machine(**{**COLAB_GPU, "driver": "575.51.03"}).kernels_blocked() is None
    # cuda-bindings 13 needs CUDA 13's driver even beside the DSL's CUDA 12 libraries
    assert ">= 580.65.06 (CUDA 13.0) for cuda-bindings 13.0.1;" in machine(
        **{**COLAB_GPU, "driver": "575.57.08", "cuda_bindings": "13.0.1"}).kernels_blocked()


def test_a_cpu_only_torch_blocks_the_kernels_and_names_the_fix():
    m = machine(capability=(9, 0), gpu="H100", driver="580.159.04", torch="2.13.0", torch_cuda=None)
    assert "torch 2.13.0 is a CPU build" in m.kernels_blocked() and "pytorch.org" in m.kernels_blocked()
    assert "no torch is installed" in machine(capability=(9, 0), gpu="H100", torch=None,
                                              torch_cuda=None).kernels_blocked()


def test_the_verdict_keeps_the_arch_reasons():
    assert machine(capability=None).kernels_blocked(80) == "needs sm_80; this machine has no GPU"
    assert machine(capability=(8, 0), gpu="A100").kernels_blocked(90) == "needs sm_90; this GPU is sm_80"
    assert machine(dsl=None, capability=(9, 0)).kernels_blocked(90) == "needs the CuTe DSL and an sm_90 GPU"
    assert machine(capability=(9, 0), gpu="H200", driver="580.159.04").kernels_blocked(90) is None


@pytest.fixture
def colab_gpu_runtime(monkeypatch):
    """This process as Colab's GPU runtime sees itself: an A100 with the image's driver, the DSL's CUDA 12 build."""
    versions = {"torch": COLAB_GPU["torch"], "nvidia-cutlass-dsl": env.DSL_PIN, "cuda-bindings": "12.9.7",
                "nvidia-cutlass-dsl-libs-cu12": env.DSL_PIN}
    monkeypatch.setattr(env, "_nvidia_smi", lambda: (COLAB_GPU["gpu"], COLAB_GPU["capability"], COLAB_GPU["driver"]))
    monkeypatch.setattr(env, "_version", versions.get)
    monkeypatch.setattr(env, "_torch_cuda_build", lambda: COLAB_GPU["torch_cuda"])
    monkeypatch.setenv("COLAB_RELEASE_TAG", "simulated")


def test_gpu_cells_skip_on_a_driver_too_old_for_the_dsl_with_the_doctors_reason(colab_gpu_runtime, monkeypatch,
                                                                                 capsys):
    import IPython

    ran = []
    shell = type("Shell", (), {"run_cell": lambda self, cell: ran.append(cell)})()
    monkeypatch.setattr(IPython, "get_ipython", lambda: shell)
    env.gpu_cell("80", "print('launched')")
    line = capsys.readouterr().out
    assert ran == [] and line == f"[GPU cell not run: {env.probe().kernels_blocked(80)}]\n"
    assert "575.51.03" in line and "570.124.06" in line and "modal run cloud/modal_lab.py" in line
    env.doctor()
    assert env.probe().kernels_blocked(80) in capsys.readouterr().out  # the doctor's "can do" gives the same reason
    monkeypatch.setattr(env, "_nvidia_smi", lambda: ("NVIDIA H200", (9, 0), "580.159.04"))
    env.gpu_cell("90", "print('launched')")
    assert ran == ["print('launched')"] and capsys.readouterr().out == ""


def test_the_gpu_marker_skips_with_the_same_verdict(colab_gpu_runtime, tmp_path):
    from cutecourse.grading import plugin

    item = type("Item", (), {"markers": [], "get_closest_marker": lambda self, name: (
        pytest.mark.gpu(80).mark if name == "gpu" else None), "add_marker": lambda self, m: self.markers.append(m)})()
    config = type("Config", (), {"_cutecourse_machine": env.probe(), "getoption": lambda self, *a: None})()
    plugin.pytest_collection_modifyitems(config, [item])
    (skip,) = item.markers
    assert skip.kwargs["reason"] == f"not run: {env.probe().kernels_blocked(80)}"


def test_compile_only_mode_covers_a_driver_too_old_for_the_dsl(colab_gpu_runtime, monkeypatch):
    monkeypatch.delenv("CUTE_DSL_ARCH", raising=False)
    assert env.use_compile_only_arch() == env.COMPILE_ONLY_ARCH


@pytest.mark.parametrize("system, machine_, shipped", [
    ("linux", "x86_64", True), ("linux", "aarch64", True), ("win32", "AMD64", True),
    ("win32", "ARM64", False), ("darwin", "arm64", False), ("darwin", "x86_64", False),
])
def test_the_dsl_is_where_nvidia_ships_it(system, machine_, shipped):
    assert env.dsl_shipped(system, machine_) is shipped


def test_the_dsl_cell_says_where_the_dsl_is_shipped(monkeypatch, capsys):
    import importlib.util

    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None)
    monkeypatch.setattr(env, "dsl_shipped", lambda *a: False)
    env.dsl_cell("", "raise SystemExit(3)")
    assert "NVIDIA ships it for Linux and Windows x86_64 only" in capsys.readouterr().out
    monkeypatch.setattr(env, "dsl_shipped", lambda *a: True)
    env.dsl_cell("", "raise SystemExit(3)")
    assert f"pip install nvidia-cutlass-dsl=={env.DSL_PIN}" in capsys.readouterr().out


def test_load_new_installs_reads_a_pth_that_pip_wrote_after_start_up(tmp_path, monkeypatch):
    """As the DSL's wheel does: a .pth whose import line puts the package's folder on sys.path."""
    import importlib
    import site

    site_dir, packages = tmp_path / "site-packages", tmp_path / "site-packages" / "shipped" / "dsl_packages"
    (packages / "fresh_dsl_module").mkdir(parents=True)
    (packages / "fresh_dsl_module" / "__init__.py").write_text("ANSWER = 42\n")
    (site_dir / "shipped" / "__init__.py").write_text("")
    (site_dir / "shipped_packages.pth").write_text(
        "import sys, os, shipped; sys.path.insert(0, os.path.join(shipped.__path__[0], 'dsl_packages'))\n")
    monkeypatch.setattr(sys, "path", [*sys.path, str(site_dir)])  # the folder is there; its .pth was never read
    monkeypatch.setattr(site, "getsitepackages", lambda: [str(site_dir)])
    monkeypatch.setattr(site, "getusersitepackages", lambda: str(tmp_path / "no-user-site"))
    monkeypatch.delitem(sys.modules, "shipped", raising=False)
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module("fresh_dsl_module")
    assert env.load_new_installs() == [str(packages)]
    assert importlib.import_module("fresh_dsl_module").ANSWER == 42
    sys.modules.pop("fresh_dsl_module")
    sys.modules.pop("shipped")
