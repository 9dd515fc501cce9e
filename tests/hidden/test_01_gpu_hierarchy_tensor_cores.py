"""Hidden tests of lesson 1: the learner's calculators on random inputs, against cutecourse.hw computed here."""

import math
import random

import pytest

from cutecourse import hw


def close(a, b):
    return isinstance(a, (int, float)) and not isinstance(a, bool) and math.isclose(a, b, rel_tol=1e-9)


@pytest.mark.exercise("1.1", points=2)
def test_gemm_intensity_on_random_shapes(learner):
    rng = random.Random(101)
    for _ in range(60):
        m, n, k = (rng.choice([1, 7, 16, 100, 333, 1024, 4097, 12288]) for _ in range(3))
        eb = rng.choice([1, 2, 4])
        value, _ = learner.call("gemm_intensity", m, n, k, eb)
        assert close(value, hw.gemm_intensity(m, n, k, eb)), f"gemm_intensity{(m, n, k, eb)} gave {value!r}"


@pytest.mark.exercise("1.2", points=2)
def test_cta_tile_intensity_on_random_tiles(learner):
    rng = random.Random(102)
    for _ in range(60):
        bm, bn = rng.choice([16, 32, 48, 64, 96, 128, 192, 256]), rng.choice([8, 16, 24, 64, 128, 160, 256])
        bk, eb = rng.choice([8, 16, 32, 64, 128]), rng.choice([1, 2, 4])
        value, _ = learner.call("cta_tile_intensity", bm, bn, bk, eb)
        assert close(value, hw.cta_tile_intensity(bm, bn, bk, eb)), f"cta_tile_intensity{(bm, bn, bk, eb)} gave {value!r}"


def random_blocks(seed, count):
    """(threads, regs, smem, limits) for real archs and for made-up ones, so that no arch can be hard-coded."""
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
        smem = rng.choice([0, 1000, 4096, 16 * 1024, 40 * 1024, 48 * 1024, 64 * 1024, 99 * 1024, 160 * 1024])
        smem = min(smem, limits["smem_per_block_max"])
        yield threads, regs, smem, limits


@pytest.mark.exercise("1.3", points=2)
def test_blocks_per_sm_on_random_kernels_and_archs(learner):
    for threads, regs, smem, limits in random_blocks(103, 80):
        want = hw.occupancy(threads, regs, smem, hw.ArchLimits(**limits)).blocks_per_sm
        value, _ = learner.call("blocks_per_sm", threads, regs, smem, limits)
        assert value == want, f"blocks_per_sm({threads}, {regs}, {smem}, {limits}) gave {value!r}"


@pytest.mark.exercise("1.4", points=2)
def test_binding_limits_on_random_kernels_and_archs(learner):
    for threads, regs, smem, limits in random_blocks(104, 80):
        want = set(hw.occupancy(threads, regs, smem, hw.ArchLimits(**limits)).binding)
        value, _ = learner.call("binding_limits", threads, regs, smem, limits)
        assert isinstance(value, (tuple, list)) and len(set(value)) == len(value) and set(value) == want, \
            f"binding_limits({threads}, {regs}, {smem}, {limits}) gave {value!r}"
