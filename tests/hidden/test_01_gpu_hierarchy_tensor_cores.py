"""Hidden tests of lesson 1: the learner's calculators on random inputs, against the references of the lesson's
checks module (cutecourse.hw and exact arithmetic), computed here."""

import math
import random

import pytest

from cutecourse import hw
from cutecourse.grading.checks import l01_hardware as L


def close(a, b):
    return isinstance(a, (int, float)) and not isinstance(a, bool) and math.isclose(a, b, rel_tol=1e-9)


@pytest.mark.exercise("1.1", points=2)
def test_min_n_compute_bound_on_random_gemms_and_gpus(learner):
    rng = random.Random(101)
    cases = [L.random_min_n_case(rng) for _ in range(60)]
    assert any(L.reference_min_n(*c) is None for c in cases) and any(L.reference_min_n(*c) == 1 for c in cases)
    for case in cases:
        value, _ = learner.call("min_n_compute_bound", *case)
        want = L.reference_min_n(*case)
        assert value == want and not isinstance(value, bool), f"min_n_compute_bound{case} gave {value!r}"


@pytest.mark.exercise("1.2", points=2)
def test_cluster_tile_intensity_on_random_tiles_and_clusters(learner):
    rng = random.Random(102)
    for _ in range(60):
        case = L.random_cluster_tile_case(rng)
        value, _ = learner.call("cluster_tile_intensity", *case)
        assert close(value, L.reference_cluster_tile(*case)), f"cluster_tile_intensity{case} gave {value!r}"


def random_blocks(seed, count):
    """(threads, regs, smem, limits) for real archs and for made-up ones, so that no arch can be hard-coded; smem 0
    with no reservation (sm_70, sm_75, and made-up ones) comes up too, and every fourth kernel is register-bound."""
    rng = random.Random(seed)
    for i in range(count):
        limits = hw.ARCH_LIMITS[rng.choice(sorted(hw.ARCH_LIMITS))].as_dict()
        if i % 3 == 2:  # a made-up GPU
            limits.update(max_blocks_per_sm=rng.choice([8, 16, 20, 32]), smem_alloc_unit=rng.choice([128, 256, 512]),
                          smem_reserved_per_block=rng.choice([0, 512, 1024, 2048]),
                          reg_alloc_unit=rng.choice([128, 256, 512]), max_threads_per_sm=rng.choice([1024, 1536, 2048]))
        threads = rng.choice([32, 64, 96, 100, 128, 192, 256, 384, 512, 768, 1024])
        threads = min(threads, limits["max_threads_per_sm"])
        regs = rng.choice([16, 24, 32, 33, 40, 48, 64, 72, 96, 128, 168, 200, 255])
        smem = rng.choice([0, 0, 1000, 4096, 16 * 1024, 40 * 1024, 48 * 1024, 64 * 1024, 99 * 1024, 160 * 1024])
        smem = min(smem, limits["smem_per_block_max"])
        if i % 4 == 1:  # register-bound: no smem, and a register count the allocation unit rounds up
            regs, smem = rng.choice([33, 37, 41, 72, 100, 130, 168, 200]), 0
        yield threads, regs, smem, limits


@pytest.mark.exercise("1.3", points=2)
def test_blocks_per_sm_on_random_kernels_and_archs(learner):
    cases = list(random_blocks(103, 80))
    assert any(smem == 0 and lim["smem_reserved_per_block"] == 0 for _, _, smem, lim in cases)  # the zero case
    for threads, regs, smem, limits in cases:
        value, _ = learner.call("blocks_per_sm", threads, regs, smem, limits)
        want = L.reference_blocks(threads, regs, smem, limits)
        assert value == want, f"blocks_per_sm({threads}, {regs}, {smem}, {limits}) gave {value!r}"


@pytest.mark.exercise("1.4", points=2)
def test_wave_efficiency_on_random_gemms_and_gpus(learner):
    rng = random.Random(104)
    for _ in range(60):
        case = L.random_wave_case(rng)
        value, _ = learner.call("wave_efficiency", *case)
        assert close(value, L.reference_wave_efficiency(*case)), f"wave_efficiency{case} gave {value!r}"
