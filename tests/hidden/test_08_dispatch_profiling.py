"""Hidden tests of lesson 8: the column-grouped raster over whole random grids (every tile exactly once, each work
item's tile; groups wider than the grid, ragged last groups, 1-row and 1-column grids); the balanced persistent grid
on random problems, tiles, GPUs, cluster shapes and limits on co-resident clusters, and its refusals of bad input;
the dispatcher on random archs, shapes (dimensions of 1, odd ones, around the 132-tile line), majors, alignments
(1 byte for fp8) and dtypes, and its refusals naming the fallback; the bound of random profiles, near the 60 % line,
with ties and extra metrics, and a profile missing a unit's metric.

References: cutecourse.grading.checks.l08_dispatch (the rules written out), computed here.
"""

import random

import pytest

from cutecourse.grading import sandbox
from cutecourse.grading.checks import l08_dispatch as L


def reply(learner, name: str, *args):
    """(value, None) when the learner's function returned, (None, the error's text) when it raised."""
    try:
        value, _ = learner.call(name, *args)
    except sandbox.LearnerError as exc:
        text = str(exc).split("; the end of its stderr", 1)[0]
        return None, text.removeprefix(f"{name} raised ")
    return value, None


@pytest.mark.exercise("8.1", points=2)
def test_raster_computes_every_tile_once_on_random_grids(learner):
    rng = random.Random(801)
    # a ragged last group, a group wider than the grid, a 1-row grid, a 1-column grid, one group per column
    grids = [(9, 11, 4), (6, 5, 8), (1, 9, 4), (7, 1, 3), (4, 5, 1), (3, 16, 16)]
    grids += [L.random_raster_grid(rng) for _ in range(12)]
    for grid in grids:
        tiles = [learner.call("raster", work, *grid)[0] for work in range(grid[0] * grid[1])]
        hint = L.raster_grid_hint(grid, tiles)
        assert hint is None, f"raster(work, tiles_m, tiles_n, group_n) on {grid}: {hint}"


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


@pytest.mark.exercise("8.4", points=2)
def test_bound_of_random_profiles_near_the_line_with_ties_and_extra_metrics(learner):
    rng = random.Random(804)
    profiles = [L.profile_of(59.99, 10.0, 20.0, 30.0), L.profile_of(10.0, 60.0, 59.0, 5.0),
                L.profile_of(70.0, 70.0, 70.0, 70.0), L.profile_of(5.0, 30.0, 80.5, 80.5, **L.DECOYS),
                L.profile_of(0.0, 0.0, 0.0, 0.0, 3.0)]
    profiles += [L.random_profile(rng) for _ in range(60)]
    for profile in profiles:
        value, error = reply(learner, "bound", profile)
        assert error is None, f"bound of {L.percentages(profile)} raised {error}"
        hint = L.bound_hint(profile, value)
        assert hint is None, f"bound of {L.percentages(profile)} gave {value!r}: {hint}"
    missing = L.METRICS["l2"]
    profile = {k: v for k, v in L.profile_of(90.0, 20.0, 30.0, 10.0).items() if k != missing}
    value, error = reply(learner, "bound", profile)
    assert error is not None and error.split(":")[0] in ("KeyError", "ValueError") and missing in error, \
        f"bound of a profile without {missing} gave {value!r}{'' if error is None else ' and raised ' + error}: a " \
        f"missing metric is a KeyError or ValueError that names it"
