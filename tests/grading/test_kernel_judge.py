"""Kernel exercises are judged on the module the learner's host compiles to, never on what the learner's process says
(issue 32, part 1): the process compiles and sends back the DSL's export; the grader reads it as data
(`cutecourse.grading.modules`), takes the PTX checks' text from it, and on a GPU runs it in its own launcher, a
process with no learner code and no torch.

Each attack of the review is a submission here: PTX text from a replaced `cute.compile`, a rewritten harness that
answers with anything it likes (torch's product on a GPU), a module whose PTX is another compile's, an object that
calls more than the DSL's runtime, and a wrong kernel (C = 2·acc), which passes the PTX checks and only a GPU fails."""

from __future__ import annotations

import numpy as np
import pytest

from cutecourse import env
from cutecourse.grading import harness, modules, reports, results, sandbox

from .submissions import answer_from_file, edited, grade_lesson, lesson_solution, statuses

pytestmark = pytest.mark.slow
GPU = env.gpu_missing(80) is None
L4, L5 = "04_tiled_copy", "05_tiled_mma"
SOLUTION_4_2, SOLUTION_5_5 = lesson_solution(L4, "4.2"), lesson_solution(L5, "5.5")


def solution_module(tmp_path, arch: str = "sm_80") -> dict:
    """What the learner's process sends for 4.2's solution: the DSL's export and its PTX."""
    host = answer_from_file(tmp_path, SOLUTION_4_2, "cast_host")
    return harness.module(host, arch, harness.TensorSpec("float32", 2, "cpu"),
                          harness.TensorSpec("float16", 2, "cpu"), vector=4)


# The review's first attack: an empty host, and a `cute.compile` that returns the PTX a right answer would have.
PTX_TEXT = '''
import cutlass.cute as cute

PTX = {ptx!r}


class Compiled:
    __ptx__ = PTX

    def dump_to_object(self, prefix):
        return b""

    def __call__(self, *args):
        return None


def fake_compile(*args, **kwargs):
    return Compiled()


cute.compile = fake_compile


@cute.jit
def cast_host(mA: cute.Tensor, mB: cute.Tensor, stream):
    pass
'''

# The second: the harness reached through a module the DSL imports, rewritten to answer for the kernel. Its `module`
# sends the right PTX with an object of its own making; its `prepare` (what launched kernels before) writes torch's
# values into the outputs.
HARNESS_REWRITTEN = '''
import cutlass.cute as cute
import cutlass.runtime as R

H = R.sys.modules["importlib"].import_module("cutecourse.grading.harness")
PTX = {ptx!r}


def forged_module(host, arch, *args, vector=1):
    return {{"object": R.sys.modules["numpy"].frombuffer(b"\\x7fELF" + bytes(60), dtype="uint8"), "ptx": PTX}}


def forged_prepare(host, examples, vector=1):
    def run(*args):
        args[1].copy_(args[0])
    return run


H.module = forged_module
H.prepare = forged_prepare


@cute.jit
def cast_host(mA: cute.Tensor, mB: cute.Tensor, stream):
    pass
'''


def test_ptx_text_and_a_rewritten_harness_earn_no_kernel_point(tmp_path):
    ptx = solution_module(tmp_path)["ptx"]
    for attack in (PTX_TEXT.format(ptx=ptx), HARNESS_REWRITTEN.format(ptx=ptx)):
        report = grade_lesson(tmp_path, L4, {"4.2": attack}, timeout=300, exercises={"4.2"})
        assert report.exercises()["4.2"][0] == 0, reports.summary(report)
        failed = [t.output for t in report.tests if t.status == results.FAILED]
        assert any("module" in output for output in failed), failed


def test_the_solution_earns_its_ptx_points_through_its_module_and_they_are_provisional_without_a_gpu(tmp_path):
    report = grade_lesson(tmp_path, L4, {"4.2": SOLUTION_4_2}, timeout=300, exercises={"4.2"}, shared=True)
    assert report.exercises()["4.2"] == ((6.0 if GPU else 2.0), 6.0), reports.summary(report)
    provisional = [n for n in report.notes if n.startswith("provisional")]
    if GPU:
        assert not provisional
    else:
        assert provisional and "4.2" in provisional[0] and "4 points not run here" in provisional[0], report.notes
        assert all("provisional" in t.output for t in report.tests if t.status == results.PASSED)


def test_the_grader_reads_the_module_the_dsl_exports(tmp_path):
    sent = solution_module(tmp_path)
    module = modules.read(sent)
    assert module.sm == 80 and len(module.kernels) == 1 and module.kernels[0] in module.ptx
    assert module.object == sent["object"].tobytes()


def test_a_module_that_calls_more_than_the_dsls_runtime_is_refused(tmp_path):
    sent = solution_module(tmp_path)
    data = sent["object"].tobytes()
    assert data.count(b"_cudaGetDevice\0")
    # The same object, its call of cudaGetDevice renamed to a call of dlopen (the string table's entry, padded).
    forged = data.replace(b"_cudaGetDevice\0", b"dlopen\0" + bytes(8))
    with pytest.raises(modules.ModuleError, match="calls dlopen"):
        modules.read({"object": np.frombuffer(forged, np.uint8), "ptx": sent["ptx"]})


def test_ptx_that_is_not_the_modules_own_compile_is_refused(tmp_path):
    sent, other = solution_module(tmp_path), solution_module(tmp_path, "sm_90a")
    modules.read(other)  # each is whole on its own
    with pytest.raises(modules.ModuleError, match="not its compile's"):
        modules.read({"object": sent["object"], "ptx": other["ptx"]})  # the sm_90a PTX with the sm_80 module
    renamed = sent["ptx"].replace(".entry kernel_", ".entry kernel_x")
    with pytest.raises(modules.ModuleError, match="not its compile's"):
        modules.read({"object": sent["object"], "ptx": renamed})


@pytest.mark.parametrize("sent, why", [
    ("ptx text", "no compiled module"),
    ({"object": np.zeros(8, np.uint8), "ptx": ""}, "not a 64-bit little-endian ELF"),
    ({"object": np.arange(4), "ptx": ""}, "no compiled module"),
    ({"object": np.zeros(8, np.uint8), "ptx": "", "value": 1}, "no compiled module"),
])
def test_what_is_not_a_module_is_refused_with_what_is_wrong(sent, why):
    with pytest.raises(modules.ModuleError, match=why):
        modules.read(sent)


def test_a_module_without_kernels_is_refused(tmp_path):
    sent = solution_module(tmp_path)
    data = sent["object"].tobytes().replace(modules.CUBIN_SYMBOL.encode() + b"\0", b"kernels_bin\0\0\0\0\0")
    with pytest.raises(modules.ModuleError, match="embeds no kernels"):
        modules.read({"object": np.frombuffer(data, np.uint8), "ptx": sent["ptx"]})


def test_the_launcher_imports_no_torch_and_no_answers():
    import subprocess
    import sys

    probe = f"import sys; import {sandbox.LAUNCHER} as L; print('torch' in sys.modules, callable(L._serve))"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "True"]


def test_a_learner_process_compiles_a_kernel_answer_without_torch(tmp_path):
    """What a learner process does with a kernel answer on a CPU (the grader's `via="module"`, and the checks'
    `via="ptx"` in the notebook kernel: compiles from stand-ins of the tensors' dtypes and ranks) imports no torch,
    which would add over a CPU-second to every such process."""
    import subprocess
    import sys

    path = tmp_path / "answer.py"
    path.write_text(SOLUTION_4_2)
    probe = (f"import importlib.util, sys; spec = importlib.util.spec_from_file_location('answer', {str(path)!r}); "
             f"answer = importlib.util.module_from_spec(spec); spec.loader.exec_module(answer); "
             f"from cutecourse.grading import checks, harness, sandbox; T = harness.TensorSpec; "
             f"sent = harness.module(answer.cast_host, 'sm_80', T('float32', 2, 'cpu'), T('float16', 2, 'cpu'), "
             f"vector=4); check = checks.cast_ptx.spec(); "
             f"ptx, _ = sandbox.execute(answer.cast_host, check['cases'][0], 'ptx', check['options']); "
             f"print('torch' in sys.modules, 'ld.global' in sent['ptx'], 'ld.global' in ptx)")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "True", "True"], out.stderr[-2000:]


def test_the_stand_ins_element_types_are_what_from_dlpack_makes_of_torchs_dtypes():
    import torch
    from cutlass.cute.runtime import from_dlpack

    for name in harness.CUTE_DTYPES:
        made = from_dlpack(torch.empty(1, dtype=getattr(torch, name))).element_type
        assert harness._cute_dtype(name) is made, (name, made)


# A wrong kernel: the solution of 5.5 storing twice the product. Its PTX has every instruction the checks look for.
DOUBLED = edited(SOLUTION_5_5, ("tCgC[i] = acc[i].to(mC.element_type)", "tCgC[i] = (acc[i] * 2.0).to(mC.element_type)"))


@pytest.mark.gpu(80)
def test_on_a_gpu_the_solution_earns_every_point_through_the_launcher_and_no_attack_earns_a_kernel_point(tmp_path):
    report = grade_lesson(tmp_path, L5, {"5.5": SOLUTION_5_5}, timeout=300, exercises={"5.5"})
    assert report.exercises()["5.5"][0] == report.exercises()["5.5"][1], reports.summary(report)
    assert not [n for n in report.notes if n.startswith("provisional")]
    ptx = solution_module(tmp_path)["ptx"]
    for attack in (PTX_TEXT.format(ptx=ptx), HARNESS_REWRITTEN.format(ptx=ptx)):
        report = grade_lesson(tmp_path, L4, {"4.2": attack}, timeout=300, exercises={"4.2"})
        assert report.exercises()["4.2"][0] == 0, reports.summary(report)


@pytest.mark.gpu(80)
def test_on_a_gpu_a_wrong_kernel_keeps_its_ptx_points_and_fails_every_gpu_judge(tmp_path):
    report = grade_lesson(tmp_path, L5, {"5.5": DOUBLED}, timeout=300, exercises={"5.5"})
    state = statuses(report)
    assert state["hidden test_k8_gemm_on_random_ragged_shapes"] == results.FAILED, reports.summary(report)
    assert state["hidden test_k8_mainloop_ptx_for_both_dtypes_and_archs"] == results.PASSED, reports.summary(report)
    judged = {name: status for name, status in state.items() if name.startswith("check ")}
    assert sorted(judged.values()) == [results.FAILED, results.PASSED], judged  # k8_gemm fails, k8_ptx passes
