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


def test_t4_is_told_the_tensor_core_lessons_need_sm80():
    text = machine(capability=(7, 5), gpu="Tesla T4").capabilities()
    assert "need sm_80+" in text and "sm_75" in text


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
