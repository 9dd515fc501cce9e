"""Lesson 6's GPU measurements, on a CPU: the bank-conflict microbenchmark compiles for sm_80 and sm_90a with one
``ldmatrix.x4`` per 16 columns of a loop trip and XOR-computed addresses only when swizzled; the wavefront model
predicts its cycles; the mbarrier demo compiles for sm_90a with the instructions its docstring teaches, and its
scenarios follow the three rules; the benchmark's stage sweep runs every step from its least stage count to the
most that fit; every argument error names the argument, the value and the fix."""

import importlib

import pytest

pytest.importorskip("cutlass")
pytest.importorskip("torch")

from cutecourse.kernels import mbarrier_demo, ptx, smem_banks  # noqa: E402

from . import benchmarks  # noqa: E402

LDMATRIX_X4 = "ldmatrix.sync.aligned.m8n8.x4.shared.b16"


@pytest.fixture(scope="module")
def bank_ptx():
    """(layout, row elements, arch) -> the bank kernel's PTX, compiled once each."""
    return {(layout, row, arch): smem_banks.kernel_ptx(layout, row, arch)
            for layout in ("plain", "swizzled") for row in (64, 32) for arch in ("sm_80", "sm_90a")}


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
@pytest.mark.parametrize("row_elements", [64, 32])
@pytest.mark.parametrize("layout", ["plain", "swizzled"])
def test_the_bank_kernel_issues_one_ldmatrix_x4_per_16_columns_a_loop_trip(bank_ptx, layout, row_elements, arch):
    code = bank_ptx[layout, row_elements, arch]
    assert ptx.count(code, LDMATRIX_X4) == row_elements // 16
    assert ptx.count(code, "ldmatrix") == ptx.count(code, LDMATRIX_X4)  # no other ldmatrix form
    assert "%clock64" in code


@pytest.mark.parametrize("row_elements", [64, 32])
def test_only_the_swizzled_tile_computes_its_addresses_with_xor(bank_ptx, row_elements):
    for arch in ("sm_80", "sm_90a"):
        assert ptx.count(bank_ptx["swizzled", row_elements, arch], "xor") > 0
        assert ptx.count(bank_ptx["plain", row_elements, arch], "xor") == 0


def test_the_model_predicts_8x_the_cycles_on_128_byte_rows_and_4x_on_64_byte_rows():
    assert smem_banks.predicted_cycles("plain", 64) == 32 and smem_banks.predicted_cycles("swizzled", 64) == 4
    assert smem_banks.predicted_cycles("plain", 32) == 16 and smem_banks.predicted_cycles("swizzled", 32) == 4
    assert smem_banks.predicted_cycles("S<1,3,3>", 32) == 8  # one bit of swizzle halves the conflicts
    assert smem_banks.predicted_cycles("S<3,3,3>", 32) == 4
    assert smem_banks.Config("swizzled", 32).swizzle == (2, 3, 3)
    assert smem_banks.Config("swizzled", 64).layout_text() == "S<3,3,3> o 0 o (8,64):(64,1)"


def test_the_bank_timing_is_the_slowest_warp_over_the_ldmatrix_of_a_cta_alone_on_its_sm():
    config = smem_banks.Config("plain", 64, warps=2)  # 4 ldmatrix.x4 a trip a warp, 8 a trip for the CTA
    record = [[0, 800, 1000], [1, 400, 500], [1, 400, 500], [2, 900, 1200]]  # SM 1 ran two CTAs: left out
    assert smem_banks.cycles_per_ldmatrix(record, config, iterations=10) == pytest.approx((1000 / 80 + 1200 / 80) / 2)
    with pytest.raises(RuntimeError, match="every SM ran more than one"):
        smem_banks.cycles_per_ldmatrix([[3, 1, 1], [3, 1, 1]], config, iterations=10)


@pytest.mark.parametrize("call, match", [
    (lambda: smem_banks.Config(row_elements=48), r"row_elements=48: .* pass row_elements=64 or 32"),
    (lambda: smem_banks.Config(layout="diagonal"), r"layout='diagonal': pass 'plain', 'swizzled', or a swizzle"),
    (lambda: smem_banks.Config(layout="S<3,2,3>"), r"layout='S<3,2,3>': .* such as 'S<2,3,3>'"),
    (lambda: smem_banks.Config(warps=0), r"warps=0: pass 1 to 16 warps .* e.g. warps=8"),
    (lambda: smem_banks.measure(iterations=0), r"iterations=0: pass a loop count .* e.g. iterations=4096"),
    (lambda: smem_banks.kernel_ptx(arch="ampere"), r"arch='ampere' is not an SM arch name; use one like 'sm_80'"),
    (lambda: mbarrier_demo.run("deadlock"), r"scenario='deadlock': pick one of right, arrival_count"),
    (lambda: mbarrier_demo.run("right", tries=5), r"tries=5: pass 100 to 1000000 .* e.g. tries=1000"),
    (lambda: mbarrier_demo.run("right", max_cycles=10), r"max_cycles=10: pass at least 10\*\*6 cycles"),
    (lambda: mbarrier_demo.kernel_ptx("sm_80"), r"arch='sm_80': .* need sm_90 or newer; pass arch='sm_90a'"),
])
def test_argument_errors_name_the_argument_the_value_and_the_fix(call, match):
    with pytest.raises(ValueError, match=match):
        call()


@pytest.fixture(scope="module")
def demo_ptx():
    return mbarrier_demo.kernel_ptx("sm_90a")


def test_the_demo_compiles_for_sm90a_with_the_instructions_of_the_three_rules(demo_ptx):
    found = mbarrier_demo.mbarrier_instructions(demo_ptx)
    for opcode in ("mbarrier.init", "mbarrier.arrive.expect_tx", "mbarrier.try_wait.parity",
                   "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes"):
        assert any(op.startswith(opcode) for op in found), (opcode, found)
    assert sum(n for op, n in found.items() if op.startswith("mbarrier.try_wait")) == 1  # the bounded loop's one call
    assert "%clock64" in demo_ptx


def completes(scenario: mbarrier_demo.Scenario) -> bool:
    """The three rules as a reference: phase 0 completes when the arrivals reach the count and the bytes delivered
    the bytes armed; a wait for parity P passes once the barrier's current phase has parity 1 - P."""
    delivered = mbarrier_demo.COPY_BYTES if scenario.copy else 0
    phase = 1 if scenario.arrivals >= scenario.count and scenario.expect_bytes == delivered else 0
    return phase % 2 != scenario.parity


def test_every_scenario_predicts_what_the_three_rules_say():
    assert {name: completes(s) for name, s in mbarrier_demo.SCENARIOS.items()} == {
        name: s.completes for name, s in mbarrier_demo.SCENARIOS.items()}
    assert mbarrier_demo.SCENARIOS["right"].completes
    assert [s.completes for s in mbarrier_demo.SCENARIOS.values()].count(False) == 3  # one per rule broken


def test_the_reference_rules_can_fail():
    """`completes` is not vacuous: a broken count, byte total or parity each flips it."""
    from dataclasses import replace

    right = mbarrier_demo.SCENARIOS["right"]
    assert completes(right)
    assert not completes(replace(right, count=2))
    assert not completes(replace(right, expect_bytes=right.expect_bytes + 16))
    assert not completes(replace(right, parity=1))


@pytest.fixture(scope="module")
def benchmark():
    """benchmarks/smem_pipelines.py as a module (it imports benchmarks/gemm.py as `gemm`, as when run)."""
    return benchmarks.load("smem_pipelines")


def test_the_stage_sweep_runs_each_step_from_its_least_stages_to_the_most_that_fit(benchmark):
    configs = {name: config for name, (_, config) in benchmark.kernels_to_time([], benchmark.sweep(False)).items()}
    by_step: dict[tuple, list[int]] = {}
    for name, config in configs.items():
        by_step.setdefault((name.partition("(")[0], config.tile_k), []).append(config.stages)
    assert by_step == {("gemm04_multistage", 64): [3], ("gemm04_multistage", 32): [3, 4, 5, 6],
                       ("gemm05_swizzle", 64): [3], ("gemm05_swizzle", 32): [3, 4, 5, 6],
                       ("gemm06_tma", 64): [2, 3, 4], ("gemm07_wgmma", 64): [2, 3, 4],
                       ("gemm08_warpspecialized", 64): [2, 3, 4]}
    for (step, tile_k), stages in by_step.items():
        module = importlib.import_module(f"cutecourse.kernels.gemm.{step}")
        with pytest.raises(ValueError, match="fit|shared memory"):
            module.Config(tile_k=tile_k, stages=max(stages) + 1)
    assert list(benchmark.kernels_to_time([], benchmark.sweep(True))) == [
        "gemm05_swizzle(tile_k=32,stages=3)", "gemm07_wgmma(stages=4)"]


def test_step_8_refuses_one_stage_more_than_the_sweep_takes():
    from cutecourse.kernels.gemm import gemm08_warpspecialized as step

    with pytest.raises(ValueError, match="5 stages of 16-bit A and B tiles take more than the 232448 bytes"):
        step.Config(stages=5)
