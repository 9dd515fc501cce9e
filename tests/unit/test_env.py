"""`cutecourse doctor`: what it says about a machine, and the fixes it prints."""

import subprocess
import sys

import pytest

from cutecourse import env
from cutecourse.cli import main


def machine(**kw):
    base = dict(python="3.12.0", os="Linux x86_64", torch="2.13.0", dsl=env.DSL_PIN, dsl_cuda_major=13,
                cuda_bindings="13.0.1")
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
    monkeypatch.delenv("CUTE_DSL_ARCH", raising=False)
    assert env.use_compile_only_arch() == arch
    assert env.os.environ.get("CUTE_DSL_ARCH") == arch
