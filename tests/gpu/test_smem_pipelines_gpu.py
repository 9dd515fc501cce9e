"""Lesson 6 on the GPU: swizzling removes the bank conflicts the wavefront model predicts, each broken mbarrier rule
makes its bounded wait time out (and the right one completes with the copied data) without harming the GPU, and
`benchmarks/smem_pipelines.py --quick` runs."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

ROOT = Path(__file__).parents[2]
TIMED_OUT = ("arrival_count", "expect_tx", "parity")


@pytest.mark.gpu(80)
def test_swizzled_ldmatrix_costs_at_least_3x_fewer_cycles_than_on_plain_128_byte_rows():
    from cutecourse.kernels import smem_banks

    plain, swizzled = smem_banks.measure("plain", 64), smem_banks.measure("swizzled", 64)
    assert plain >= 3 * swizzled, f"plain {plain:.1f} vs swizzled {swizzled:.1f} cycles per ldmatrix.x4"
    # Shared memory serves a wavefront a cycle, so no measurement beats the model (a loop whose loads the compiler
    # hoisted would).
    assert swizzled >= 0.9 * smem_banks.predicted_cycles("swizzled", 64)
    assert plain >= 0.9 * smem_banks.predicted_cycles("plain", 64)


@pytest.mark.gpu(80)
def test_swizzled_ldmatrix_costs_at_least_2x_fewer_cycles_than_on_plain_64_byte_rows():
    from cutecourse.kernels import smem_banks

    plain, swizzled = smem_banks.measure("plain", 32), smem_banks.measure("swizzled", 32)
    assert plain >= 2 * swizzled, f"plain {plain:.1f} vs swizzled {swizzled:.1f} cycles per ldmatrix.x4"


@pytest.mark.gpu(90)
def test_the_right_mbarrier_use_completes_with_the_copied_data():
    from cutecourse.kernels import mbarrier_demo

    outcome = mbarrier_demo.run("right")
    assert outcome.completed and outcome.seen == sum(range(1, mbarrier_demo.WORDS + 1)), outcome


@pytest.mark.gpu(90)
@pytest.mark.parametrize("scenario", TIMED_OUT)
def test_each_broken_rule_times_out_and_the_gpu_still_works_afterwards(scenario):
    from cutecourse.kernels import mbarrier_demo

    outcome = mbarrier_demo.run(scenario, tries=1000)
    assert not outcome.completed and outcome.seen is None, outcome
    assert outcome.tries == 1000 or outcome.cycles >= 2 * 10**8, outcome  # it gave up at one of its two bounds
    x = torch.arange(1000, device="cuda", dtype=torch.float32)
    assert float((x * 2).sum()) == 999_000.0


@pytest.mark.gpu(90)
def test_parity_1_on_a_fresh_barrier_passes_at_once_with_nothing_arrived():
    from cutecourse.kernels import mbarrier_demo

    outcome = mbarrier_demo.run("fresh_parity")
    assert outcome.completed and outcome.tries == 1, outcome
    assert outcome.seen == mbarrier_demo.SENTINEL * mbarrier_demo.WORDS, "the buffer should still hold the sentinel"


@pytest.mark.gpu(90)
def test_the_lesson_benchmark_runs_quick_and_writes_its_json(tmp_path):
    out = tmp_path / "smem_pipelines.json"
    run = subprocess.run([sys.executable, "benchmarks/smem_pipelines.py", "--quick", "--json", str(out)], cwd=ROOT,
                         capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    assert "| scenario | what |" in run.stdout and "× torch.matmul" in run.stdout
    result = json.loads(out.read_text())
    assert [r["kernel"] for r in result["stage_sweep"]][0] == "torch.matmul"
    assert all(r["ratio"] > 0 for r in result["stage_sweep"]) and len(result["stage_sweep"]) == 3
    assert [r["completed"] for r in result["mbarrier"]] == [r["predicted"] for r in result["mbarrier"]]
    plain, swizzled = (r["measured"] for r in result["banks"])
    assert plain >= 3 * swizzled
