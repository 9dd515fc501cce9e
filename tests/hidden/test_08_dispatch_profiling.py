"""Hidden tests of lesson 8: the Hilbert raster over whole random grids (every tile exactly once, each work item's
tile; squares, odd and partial grids whose curve square is larger than the grid, 1-row and 1-column grids) and on
grids far too large to walk (the descent takes one step per level); the balanced persistent grid on random problems,
tiles, GPUs, cluster shapes and limits on co-resident clusters, and its refusals of bad input; the dispatcher on random
archs, shapes (dimensions of 1, odd ones, around the 132-tile line), majors, alignments (1 byte for fp8) and dtypes,
and its refusals naming the fallback; and the capstone, split-K with a deterministic reduction: its PTX for both
16-bit dtypes and both archs, then on a GPU real GEMMs on random ragged shapes with split counts that do not divide
the k-tiles (and more splits than k-tiles), fp16 and bf16, NaN-poisoned D and workspace, against float64 and bit for
bit against the slices' fixed-order sum, cases whose slices cancel (a reduction in another order rounds the small
ones away), the same launch twice; and its speed on a deep-K problem as a ratio to the ladder's step 5, both timed
in the same launcher process, with a generous margin. A GPU test checks the kernel's PTX first, so that a kernel the
exercise did not ask for (the package's own step, the lesson's worked example) earns nothing.

References: cutecourse.grading.checks.l08_dispatch and l08_splitk (the rules written out), computed here.
"""

import random

import numpy as np
import pytest

from cutecourse.grading import modules, sandbox, wire
from cutecourse.grading.checks import l08_dispatch as L
from cutecourse.grading.checks import l08_splitk as SPLITK


def reply(learner, name: str, *args):
    """(value, None) when the learner's function returned, (None, the error's text) when it raised."""
    try:
        value, _ = learner.call(name, *args)
    except sandbox.LearnerError as exc:
        text = str(exc).split("; the end of its stderr", 1)[0]
        return None, text.removeprefix(f"{name} raised ")
    return value, None


#: Seconds one raster call may take on a huge grid: a descent takes microseconds, a walk of the curve far longer.
RASTER_TIMEOUT_S = 10


@pytest.mark.exercise("8.1", points=2)
def test_raster_computes_every_tile_once_on_random_grids_and_descends_huge_ones(learner):
    rng = random.Random(801)
    # squares of 1, 2 and 8; a 1-row and a 1-column grid; partial grids whose curve square is 2, 4 and 8 times larger
    grids = [(1, 1), (2, 2), (8, 8), (1, 9), (7, 1), (3, 5), (9, 4), (17, 3), (5, 12)]
    grids += [L.random_raster_grid(rng) for _ in range(12)]
    # One call on a huge grid first, under its timeout, for its last tile: a walk of the curve stops there, before the
    # random grids, where nothing bounds a call and a walk takes seconds to minutes (the first tile stopped nothing:
    # a walk reaches it at once). What it returns is judged with the rest below.
    tiles_m, tiles_n, works = L.HUGE_GRIDS[0]
    _huge_call(learner, works[-1], tiles_m, tiles_n)
    for grid in grids:
        tiles = [learner.call("raster", work, *grid)[0] for work in range(grid[0] * grid[1])]
        hint = L.raster_grid_hint(grid, tiles)
        assert hint is None, f"raster(work, tiles_m, tiles_n) on {grid}: {hint}"
    for tiles_m, tiles_n, works in L.HUGE_GRIDS:
        for work in works:
            value = _huge_call(learner, work, tiles_m, tiles_n)
            hint = L.raster_hint((work, tiles_m, tiles_n), value)
            assert hint is None, f"raster({work}, {tiles_m}, {tiles_n}) gave {value!r}: {hint}"


def _huge_call(learner, work: int, tiles_m: int, tiles_n: int) -> object:
    """raster(work, tiles_m, tiles_n) on a grid too large to walk, within RASTER_TIMEOUT_S."""
    try:
        value, _ = learner.call("raster", work, tiles_m, tiles_n, timeout=RASTER_TIMEOUT_S)
    except sandbox.LearnerError as exc:
        if "timed out" in str(exc):
            pytest.fail(f"raster({work}, {tiles_m}, {tiles_n}) took more than {RASTER_TIMEOUT_S} s: a persistent CTA "
                        f"computes its tile in a few steps per level of the curve (descend the quadrants, counting "
                        f"the grid's tiles in each), not by walking the curve")
        raise
    return value


@pytest.mark.exercise("8.2", points=2)
def test_persistent_grid_on_random_problems_gpus_and_clusters(learner):
    rng = random.Random(802)
    # step 10 at 8192³ with 2 x 1 clusters; 2 x 2 clusters on an H200 (30 co-resident); a problem of one partial wave;
    # clusters hanging over a ragged edge; a limit above what fits
    cases = [(8192, 8192, 128, 256, 132, 2, 1, None), (8192, 8192, 128, 256, 132, 2, 2, 30),
             (512, 384, 128, 128, 132, 2, 2, None), (1000, 1000, 128, 128, 108, 2, 2, None),
             (4096, 8192, 128, 256, 132, 1, 2, 100)]
    cases += [L.random_grid_case(rng) for _ in range(40)]
    for case in cases:
        value, error = reply(learner, "persistent_grid", *case)
        assert error is None, f"persistent_grid{case} raised {error}"
        hint = L.grid_hint(case, value)
        assert hint is None, f"persistent_grid{case} gave {value!r}: {hint}"
    for case, argument in L.BAD_GRIDS:
        value, error = reply(learner, "persistent_grid", *case)
        assert error is not None and error.startswith("ValueError") and argument in error, \
            f"persistent_grid{case} gave {value!r}{'' if error is None else ' and raised ' + error}: bad input " \
            f"(a non-positive extent, or fewer SMs than one cluster) is a ValueError that names the argument"


@pytest.mark.exercise("8.3", points=2)
def test_choose_on_random_problems_and_its_refusals(learner):
    rng = random.Random(803)
    served = [  # dimensions of 1, the 132-tile line from above and at it, fp8 on sm_90, vectors of 4 and 1 elements
        (90, (1, 4096, 4096), ("k", "k"), 16, "bfloat16"), (90, (4096, 1, 4096), ("m", "k"), 16, "float16"),
        (80, (4096, 4096, 1), ("k", "k"), 16, "float16"), (90, (1664, 2816, 1024), ("k", "k"), 16, "float16"),
        (90, (1408, 3072, 64), ("k", "k"), 32, "float8_e4m3fn"), (90, (1408, 2816, 64), ("k", "k"), 16, "float8_e5m2"),
        (120, (512, 512, 512), ("m", "n"), 8, "bfloat16"), (86, (4096, 4096, 4096), ("k", "k"), 2, "float16")]
    # sm_75; a dtype the table lacks; fp8 off sm_90, with 1-byte alignment, and M-major
    refused = [(75, (4096, 4096, 4096), ("k", "k"), 16, "float16"), (90, (4096, 4096, 4096), ("k", "k"), 16, "float32"),
               (89, (4096, 4096, 4096), ("k", "k"), 16, "float8_e4m3fn"),
               (90, (4096, 4096, 4096), ("k", "k"), 1, "float8_e5m2"),
               (90, (4096, 4096, 4096), ("m", "k"), 16, "float8_e4m3fn")]
    while len(served) < 60:
        case = L.random_choice_case(rng)
        if L.fallback(*case) is None:
            served.append(case)
    for case in served:
        value, error = reply(learner, "choose", *case)
        assert error is None, f"choose{case} raised {error}, but the table has a kernel for it"
        hint = L.choice_hint(case, value)
        assert hint is None, f"choose{case} gave {value!r}: {hint}"
    for case in refused:
        value, error = reply(learner, "choose", *case)
        hint = L.refusal_hint(case, error, value)
        assert hint is None, f"choose{case}: {hint}"


def assert_ptx(learner, dtype: str, arch: str) -> None:
    """The split-K host's PTX for `dtype` on `arch`, judged by the exercise's PTX hint."""
    code, _ = learner.call("splitk_host", *SPLITK.ptx_case(dtype, arch), via="ptx",
                           options={"vector": SPLITK.VECTOR}, timeout=300)
    problem = SPLITK.ptx_hint(code)
    assert problem is None, f"splitk_host for {dtype} on {arch}: {problem}"


@pytest.mark.exercise("8.4", points=1)
def test_splitk_ptx_for_both_dtypes_and_archs(learner):
    for dtype, arch in SPLITK.PTX_CASES:
        assert_ptx(learner, dtype, arch)


def launch(learner, case) -> tuple:
    """(D, workspace) of one launch of the learner's split-K host on `case`."""
    _, (d, work) = learner.call("splitk_host", *case, via="launch", options={"vector": SPLITK.VECTOR}, timeout=300)
    return d, work


@pytest.mark.exercise("8.4", points=3)
@pytest.mark.gpu(80)
def test_splitk_gemm_on_random_ragged_shapes_and_split_counts(learner):
    for dtype in ("float16", "bfloat16"):
        assert_ptx(learner, dtype, "sm_80")  # the split-K asked for, not the package's step
    for dtype in ("float16", "bfloat16"):
        seed = 8040 + len(dtype)
        for shape, case in zip(SPLITK.SHAPES, SPLITK.cases(seed, SPLITK.SHAPES, dtype)):
            problem = SPLITK.gemm_hint(case, *launch(learner, case))
            assert problem is None, f"splitk_host {dtype} (M, N, K, splits) = {shape}: {problem}"
        for m, n, splits, per_split in SPLITK.CANCELLING:
            case = SPLITK.cancelling_case(seed, m, n, splits, per_split, dtype)
            first = launch(learner, case)
            problem = SPLITK.gemm_hint(case, *first)
            assert problem is None, f"splitk_host {dtype}, slices 0 and 1 cancelling, (M, N, splits) = " \
                                    f"{(m, n, splits)}: {problem}"
            again = launch(learner, case)
            same = (again[0] == first[0]) | (again[0] != again[0]) & (first[0] != first[0])
            assert same.all(), f"splitk_host {dtype}, (M, N, splits) = {(m, n, splits)}: two launches on the same " \
                               f"inputs gave D differing in {int((~same).sum())} elements: the reduction must not " \
                               f"depend on which CTA arrives when"


@pytest.mark.exercise("8.4", points=2)
@pytest.mark.gpu(80)
def test_splitk_outruns_step_5_on_a_deep_k_problem(learner):
    """The learner's kernel and the ladder's step 5, each exported as a module and timed by one launcher process
    on the same inputs, in interleaved rounds; the ratio of the median rounds is judged, never a time. The learner's
    outputs after the timed launches (poisoned again before them) are judged too: a kernel that works only on its
    first launch fails here."""
    import statistics

    for dtype in ("float16", "bfloat16"):
        assert_ptx(learner, dtype, "sm_80")
    m, n, k, splits = SPLITK.DEEP_K
    case = SPLITK.cases(8044, [SPLITK.DEEP_K], "float16")[0]
    options = {"vector": SPLITK.VECTOR}
    mine = learner.module("splitk_host", None, case, options, timeout=300)
    value, _ = sandbox.execute(SPLITK.step_host(), [wire.argument(None), *case], "module", options)
    step = modules.read(value)  # the package's own code, compiled here in the grader
    times: dict[str, list[float]] = {"mine": [], "step 5": []}
    with sandbox.Learner([], learner.walls, program=sandbox.LAUNCHER, timeout=300) as launcher:
        for r in range(SPLITK.ROUNDS):
            order = (("mine", mine), ("step 5", step))
            for name, module in order[::-1] if r % 2 else order:
                ms, outputs = launcher.call("run", np.frombuffer(module.object, np.uint8), *case,
                                            options={**options, "repeat": SPLITK.REPEAT})
                times[name].append(ms)
                if name == "mine":
                    problem = SPLITK.gemm_hint(case, *outputs)
                    assert problem is None, f"splitk_host after {SPLITK.REPEAT} launches on the same buffers " \
                                            f"(D and the workspace poisoned again before them): {problem}; does " \
                                            f"the last CTA of each tile leave its counter ready for the next launch?"
    ratio = statistics.median(times["step 5"]) / statistics.median(times["mine"])
    hint = SPLITK.speed_hint(ratio, splits)
    assert hint is None, f"splitk_host (M, N, K, splits) = {SPLITK.DEEP_K}: {hint}"
