"""Checks of lesson 8 (kernel composition, dispatch and profiling), its four CPU exercises: the tile a persistent CTA
computes in a column-grouped raster (8.1), the balanced persistent grid and its efficiency (8.2), a dispatcher over
a CUTLASS-library-like table of kernels instanced per alignment (8.3), and the bound a kernel's Nsight Compute
metrics name (8.4).

The references are written out here from the exercises' rules, each in a form of its own (8.1 lists the whole
raster order instead of computing one work item's tile). The hints name the idea that is missing (the package's
row-grouped order, a narrower last group, the hardware's limit on co-resident clusters, a partial last wave, vectors
narrower than 16 bytes, the 60 % line, the tie order) and never print the right answer. The hidden tests
(tests/hidden/test_08_dispatch_profiling.py) draw their random inputs with the generators below.
"""

from __future__ import annotations

import functools
import math
import random
from typing import Any

from cutecourse.grading.checks import Check


def _count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _pair(value: Any, size: int) -> bool:
    return isinstance(value, (tuple, list)) and len(value) == size


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


# --------------------------------------------------------------------------- 8.1 the column-grouped raster


@functools.lru_cache(maxsize=64)
def raster_order(tiles_m: int, tiles_n: int, group_n: int) -> tuple[tuple[int, int], ...]:
    """Every tile (m, n) in the order a column-grouped raster hands them out: groups of `group_n` tile columns (the
    last may be narrower), left to right; inside a group, row by row, along N first.

    >>> raster_order(2, 3, 2)
    ((0, 0), (0, 1), (1, 0), (1, 1), (0, 2), (1, 2))
    """
    return tuple((m, n) for first in range(0, tiles_n, group_n) for m in range(tiles_m)
                 for n in range(first, min(first + group_n, tiles_n)))


@functools.lru_cache(maxsize=64)
def row_grouped_order(tiles_m: int, tiles_n: int, group_m: int) -> tuple[tuple[int, int], ...]:
    """The package's raster (steps 9-11, `_tile_coord`): groups of `group_m` tile rows, top to bottom; inside a
    group, column by column, along M first. To name that mistake."""
    return tuple((m, n) for first in range(0, tiles_m, group_m) for n in range(tiles_n)
                 for m in range(first, min(first + group_m, tiles_m)))


@functools.lru_cache(maxsize=64)
def along_m_order(tiles_m: int, tiles_n: int, group_n: int) -> tuple[tuple[int, int], ...]:
    """Groups of `group_n` tile columns, left to right, but column by column inside a group. To name that mistake."""
    return tuple((m, n) for first in range(0, tiles_n, group_n) for n in range(first, min(first + group_n, tiles_n))
                 for m in range(tiles_m))


PACKAGE_ORDER = ("groups of {group} tile rows, walked column by column (the package's steps 9-11); this raster "
                 "groups tile columns, and goes along N first inside a group")
ALONG_M = ("the right groups of columns, but inside a group work items go along M first (column by column); this "
           "raster goes along N first, row by row")


def raster_hint(case: tuple[int, int, int, int], value: Any) -> str | None:
    """What is wrong with `value` as raster(*case), or None."""
    work, tiles_m, tiles_n, group_n = case
    if not (_pair(value, 2) and all(_count(v) for v in value)):
        return f"expected the tile (m, n), two ints, got {value!r}"
    want = raster_order(tiles_m, tiles_n, group_n)[work]
    got = tuple(value)
    if got == want:
        return None
    m, n = got
    if not (0 <= m < tiles_m and 0 <= n < tiles_n):
        if (n, m) == want:
            return (f"({m}, {n}) lies outside the {tiles_m} x {tiles_n} grid of tiles: is the tile (m, n), its row "
                    f"first?")
        return (f"({m}, {n}) lies outside the {tiles_m} x {tiles_n} grid of tiles: is the last group of columns as "
                f"wide as the others when {group_n} does not divide {tiles_n}?")
    if got == row_grouped_order(tiles_m, tiles_n, group_n)[work]:
        return f"that is where a raster puts work item {work} that has " + PACKAGE_ORDER.format(group=group_n)
    first_n = want[1] // group_n * group_n
    if n // group_n != first_n // group_n:
        return (f"work item {work} lands in the wrong group of columns: how many work items does a group of "
                f"{group_n} columns of a grid {tiles_m} tiles tall hold?")
    if got == along_m_order(tiles_m, tiles_n, group_n)[work]:
        return ALONG_M
    return (f"the right group of columns, but not the right tile inside it: inside a group, work items go along N "
            f"first (row by row); how wide is a row of the last group of a grid {tiles_n} tiles wide?")


def raster_grid_hint(grid: tuple[int, int, int], tiles: list[Any]) -> str | None:
    """What is wrong with `tiles`, raster(work, *grid) for every work item in order, or None: every tile exactly
    once, then each work item's tile."""
    tiles_m, tiles_n, group_n = grid
    for work, value in enumerate(tiles):
        if not (_pair(value, 2) and all(_count(v) for v in value)):
            return f"work item {work}: {raster_hint((work, *grid), value)}"
    seen = [tuple(v) for v in tiles]
    right = raster_order(tiles_m, tiles_n, group_n)
    if tuple((n, m) for m, n in seen) == right != tuple(seen):
        return "every tile's two coordinates are swapped: is the tile (m, n), its row first?"
    for work, (m, n) in enumerate(seen):
        if not (0 <= m < tiles_m and 0 <= n < tiles_n):
            return f"work item {work}: {raster_hint((work, *grid), (m, n))}"
    repeated = next((t for t in seen if seen.count(t) > 1), None)
    if repeated is not None:
        return (f"the {tiles_m} x {tiles_n} tiles in groups of {group_n} columns are not each computed once: tile "
                f"{repeated} comes up twice, and {tiles_m * tiles_n - len(set(seen))} tiles are never computed")
    # A whole order is a surer tell than a work item's tile: at item 1 both mistakes below give (1, 0).
    if tuple(seen) == row_grouped_order(tiles_m, tiles_n, group_n) != right:
        return "that is the order of a raster that has " + PACKAGE_ORDER.format(group=group_n)
    if tuple(seen) == along_m_order(tiles_m, tiles_n, group_n) != right:
        return ALONG_M
    for work, value in enumerate(seen):
        hint = raster_hint((work, *grid), value)
        if hint is not None:
            return f"work item {work}: {hint}"
    return None


def random_raster_grid(rng: random.Random) -> tuple[int, int, int]:
    """(tiles_m, tiles_n, group_n): 1-row and 1-column grids, groups that do not divide the width, groups wider than
    the grid."""
    tiles_m = rng.choice((1, 1, 2, 3, 5, 8, 13, 16))
    tiles_n = rng.choice((1, 2, 3, 7, 10, 16, 21, 24))
    group_n = rng.choice((1, 2, 3, 4, 5, 8, tiles_n, tiles_n + 3))
    return tiles_m, tiles_n, group_n


def _judge_raster(case: tuple[Any, ...], value: Any, outputs: list[Any]) -> str | None:
    return raster_hint(case, value)


raster = Check("raster", "raster", lambda: [
    (0, 4, 6, 4), (2, 3, 5, 2), (1, 4, 6, 4), (5, 4, 6, 4), (15, 4, 6, 4), (16, 4, 6, 4), (18, 4, 6, 4), (23, 4, 6, 4),
    (7, 3, 5, 8), (4, 1, 7, 3)], _judge_raster)

# --------------------------------------------------------------------------- 8.2 the balanced persistent grid


def reference_grid(m: int, n: int, tile_m: int, tile_n: int, sms: int, cluster_m: int, cluster_n: int,
                   max_clusters: int | None = None) -> tuple[int, int, float]:
    """(clusters launched, waves, efficiency) of the balanced persistent grid; ValueError on bad input.

    >>> reference_grid(4096, 4096, 128, 256, 132, 2, 1)  # step 10 at 4096³: 256 cluster tiles, 4 waves of 64
    (64, 4, 1.0)
    """
    sizes = dict(m=m, n=n, tile_m=tile_m, tile_n=tile_n, sms=sms, cluster_m=cluster_m, cluster_n=cluster_n)
    if max_clusters is not None:
        sizes["max_clusters"] = max_clusters
    bad = next((k for k, v in sizes.items() if v < 1), None)
    if bad is not None:
        raise ValueError(f"{bad}={sizes[bad]} must be at least 1")
    if sms < cluster_m * cluster_n:
        raise ValueError(f"sms={sms} cannot hold one {cluster_m} x {cluster_n} cluster")
    tiles = _cdiv(m, tile_m) * _cdiv(n, tile_n)
    items = _cdiv(_cdiv(m, tile_m), cluster_m) * _cdiv(_cdiv(n, tile_n), cluster_n)
    fit = min(sms // (cluster_m * cluster_n), max_clusters or sms)
    waves = _cdiv(items, fit)
    clusters = _cdiv(items, waves)
    return clusters, waves, tiles / (waves * clusters * cluster_m * cluster_n)


def _close(a: Any, b: float) -> bool:
    return isinstance(a, (int, float)) and not isinstance(a, bool) and math.isclose(a, b, rel_tol=1e-9)


def grid_hint(case: tuple[Any, ...], value: Any) -> str | None:
    """What is wrong with `value` as persistent_grid(*case), or None."""
    m, n, tile_m, tile_n, sms, cluster_m, cluster_n, *rest = case
    max_clusters = rest[0] if rest else None
    if not _pair(value, 3):
        return f"expected (clusters, waves, efficiency), got {value!r}"
    clusters, waves, efficiency = value
    if not (_count(clusters) and _count(waves)):
        return f"expected clusters and waves as ints, got {clusters!r} and {waves!r}"
    want_clusters, want_waves, want_efficiency = reference_grid(*case)
    size = cluster_m * cluster_n
    items = _cdiv(_cdiv(m, tile_m), cluster_m) * _cdiv(_cdiv(n, tile_n), cluster_n)
    if waves != want_waves:
        # Where a mistake's count happens to be the other's (no cluster hangs over the edge), both are named.
        causes = []
        if max_clusters is not None and waves == _cdiv(items, sms // size):
            causes.append(f"the hardware runs at most {max_clusters} clusters of {size} CTAs at once "
                          f"(max_clusters), which may be fewer than fit on {sms} SMs")
        if waves == _cdiv(_cdiv(m, tile_m) * _cdiv(n, tile_n), sms):
            causes.append(f"if it counts CTA tiles over SMs: a persistent cluster takes one cluster work item "
                          f"({cluster_m} x {cluster_n} tiles) at a time, and occupies {size} SMs")
        if causes:
            return f"waves={waves}: " + "; or, ".join(causes)
        return (f"waves={waves}: how many rounds do the cluster work items take on the clusters that can run at "
                f"once?")
    if clusters != want_clusters:
        if clusters > want_clusters:
            return (f"{clusters} clusters finish the work in {waves} waves, but their last wave is partly idle: "
                    f"fewer clusters finish in as many waves, with the last wave as full as it can be")
        return f"{clusters} clusters cannot take all {items} cluster work items in {waves} waves"
    if _close(efficiency, want_efficiency):
        return None
    if _close(efficiency, items / (waves * clusters)):
        return ("efficiency counts cluster work items; a cluster at the matrix's edge may hang over it, so count "
                "the CTA-tile slots and the tiles that lie in the matrix")
    if _close(efficiency, m * n / (waves * clusters * size * tile_m * tile_n)):
        return ("efficiency counts elements; this exercise counts CTA tiles: a tile that lies in the matrix is "
                "useful work even where it hangs over the edge")
    return (f"clusters and waves are right, but efficiency={efficiency!r}: the share of the CTA-tile slots of all "
            f"waves that compute a tile of the matrix")


def random_grid_case(rng: random.Random) -> tuple[Any, ...]:
    """A problem, a tile, a GPU and a cluster shape, with and without a limit on co-resident clusters; small
    problems (one partial wave) and ragged ones (tiles and clusters hanging over the edge) come up too."""
    m = rng.choice((128, 300, 1000, 2048, 4096, 5000, 8192, 12345))
    n = rng.choice((64, 256, 1000, 3000, 4096, 8192, 16384))
    tile_m, tile_n = rng.choice(((128, 128), (128, 256), (256, 128), (64, 128), (128, 64)))
    sms = rng.choice((78, 108, 114, 132, 148, 170))
    cluster_m, cluster_n = rng.choice(((1, 1), (2, 1), (1, 2), (2, 2), (4, 1), (1, 4), (4, 2)))
    max_clusters = rng.choice((None, None, 16, 30, 40))
    return m, n, tile_m, tile_n, sms, cluster_m, cluster_n, max_clusters


#: Inputs persistent_grid refuses with a ValueError naming the argument: a non-positive extent, tile, cluster or
#: limit, and fewer SMs than one cluster needs. (case, the argument the error must name)
BAD_GRIDS = (((0, 4096, 128, 256, 132, 2, 1, None), "m"), ((4096, 4096, 128, -256, 132, 2, 1, None), "tile_n"),
             ((4096, 4096, 128, 256, 6, 4, 2, None), "sms"), ((4096, 4096, 128, 256, 132, 2, 1, 0), "max_clusters"),
             ((4096, 4096, 128, 256, 132, 0, 1, None), "cluster_m"))


def _judge_grid(case: tuple[Any, ...], value: Any, outputs: list[Any]) -> str | None:
    return grid_hint(case, value)


persistent_grid = Check("persistent_grid", "persistent_grid", lambda: [
    (4096, 4096, 128, 256, 132, 2, 1, None), (1024, 1024, 128, 128, 132, 1, 1, None),
    (640, 8192, 128, 128, 132, 4, 1, None), (4096, 4096, 128, 256, 132, 2, 2, 30),
    (800, 3000, 128, 128, 132, 2, 1, None),
    (8192, 8192, 128, 256, 132, 1, 1, None), (256, 256, 128, 128, 132, 1, 1, None)], _judge_grid)

# --------------------------------------------------------------------------- 8.3 the dispatcher

ELEMENT_BYTES = {"float16": 2, "bfloat16": 2, "float8_e4m3fn": 1, "float8_e5m2": 1}
ARCHS = (75, 80, 86, 89, 90, 100, 120)
PINGPONG, COOPERATIVE = "sm90_tma_warpspecialized_pingpong", "sm90_tma_warpspecialized_cooperative"
MULTISTAGE, SIMT = "sm80_cp_async_multistage", "sm80_simt"
KERNELS = (PINGPONG, COOPERATIVE, MULTISTAGE, SIMT)
#: Fewer 128 x 256 tiles than an H100's or H200's SMs: the ping-pong kernel's 128 x 128 tiles keep more SMs busy.
SMALL_TILES = 132


def contiguous_extents(shape: tuple[int, int, int], majors: tuple[str, str]) -> tuple[int, int, int]:
    """The extents of A, B and C (row-major) along which their elements are contiguous."""
    m, n, k = shape
    return (k if majors[0] == "k" else m), (k if majors[1] == "k" else n), n


def widest_vector(shape: tuple[int, int, int], majors: tuple[str, str], alignment: int, element_bytes: int) -> int:
    """The most elements one load or store may move: at most 16 bytes, dividing the alignment and every contiguous
    extent."""
    extents = contiguous_extents(shape, majors)
    return next(v for v in (16, 8, 4, 2, 1) if v * element_bytes <= 16 and alignment % (v * element_bytes) == 0
                and all(e % v == 0 for e in extents))


def fallback(arch: int, shape: tuple[int, int, int], majors: tuple[str, str], alignment: int, dtype: str) -> str | None:
    """What a refused problem is sent to (the torch function a ValueError names), or None where the table has a
    kernel. The refusals in order: the dtype, the arch, then fp8's conditions."""
    if dtype not in ELEMENT_BYTES or arch < 80:
        return "torch.matmul"
    if ELEMENT_BYTES[dtype] == 1 and not (arch == 90 and tuple(majors) == ("k", "k")
                                          and widest_vector(shape, majors, alignment, 1) == 16):
        return "torch._scaled_mm"
    return None


def reference_choice(arch: int, shape: tuple[int, int, int], majors: tuple[str, str], alignment: int,
                     dtype: str) -> tuple[str, int]:
    """(kernel, vector) for a problem the table serves (see `fallback` for the others).

    >>> reference_choice(90, (4096, 4096, 4096), ("k", "k"), 16, "bfloat16")
    ('sm90_tma_warpspecialized_cooperative', 8)
    """
    width = ELEMENT_BYTES[dtype]
    vector = widest_vector(shape, majors, alignment, width)
    if arch == 90 and vector * width == 16:
        tiles = _cdiv(shape[0], 128) * _cdiv(shape[1], 256)
        return (PINGPONG if tiles < SMALL_TILES else COOPERATIVE), vector
    return (MULTISTAGE if vector * width >= 4 else SIMT), vector


def choice_hint(case: tuple[Any, ...], value: Any) -> str | None:
    """What is wrong with `value` as choose(*case) for a problem the table serves, or None."""
    arch, shape, majors, alignment, dtype = case
    if not (_pair(value, 2) and value[0] in KERNELS and _count(value[1])):
        return f"expected (kernel, vector): one of {', '.join(KERNELS)} and an int, got {value!r}"
    kernel, vector = value
    want_kernel, want_vector = reference_choice(*case)
    width = ELEMENT_BYTES[dtype]
    if vector != want_vector:
        if vector > want_vector:
            return (f"vector={vector}: do {vector * width}-byte accesses of {dtype} suit this alignment "
                    f"({alignment} bytes) and every contiguous extent (A's, B's and C's)?")
        if vector == 1 or vector * width == 16:
            return (f"vector={vector}, but a wider vector fits this alignment and these extents: vectors come in 1, 2, "
                    f"4, 8 and 16 elements, not only 16 bytes or scalars")
        return f"vector={vector}, but a wider vector fits this alignment ({alignment} bytes) and these extents"
    if kernel == want_kernel:
        return None
    if {kernel, want_kernel} == {PINGPONG, COOPERATIVE}:
        tiles = _cdiv(shape[0], 128) * _cdiv(shape[1], 256)
        return (f"this problem has {tiles} tiles of 128 x 256: which side of the small-problem line ({SMALL_TILES} "
                f"tiles) is that, and is the line itself small?")
    if kernel in (PINGPONG, COOPERATIVE):
        return (f"{kernel} runs only on sm_90, and its TMA needs 16-byte rows: does sm_{arch} with {vector}-element "
                f"vectors of {dtype} qualify?")
    if want_kernel in (PINGPONG, COOPERATIVE):
        return f"{kernel} works here, but sm_{arch} has a faster kernel for 16-byte vectors"
    return (f"{kernel} for {vector * width}-byte vectors: which accesses can cp.async make (4, 8 or 16 bytes), and "
            f"which need scalar loads?")


def refusal_hint(case: tuple[Any, ...], raised: str | None, value: Any = None) -> str | None:
    """What is wrong with the learner's reply to a problem the table refuses: `raised`, the error's text (None if it
    returned `value`), must be a ValueError naming the fallback."""
    arch, shape, majors, alignment, dtype = case
    want = fallback(*case)
    if raised is None:
        return (f"returned {value!r}, but no kernel of the table serves {dtype} on sm_{arch} with majors {majors} "
                f"and {alignment}-byte alignment: raise a ValueError that names what to call instead")
    if not raised.startswith("ValueError"):
        return f"raised {raised[:200]}; a refusal is a ValueError that names what to call instead"
    if want not in raised:
        return (f"the ValueError ({raised[:200]}) does not name the right fallback: which torch function serves "
                f"these inputs where the table cannot?")
    return None


def random_choice_case(rng: random.Random) -> tuple[Any, ...]:
    """Any arch, shape, majors, alignment and dtype of the table (refused ones too): dimensions of 1, odd ones,
    multiples of 2, 4, 8 and 16, around the 132-tile line; alignments from the element's size up."""
    dtype = rng.choice(tuple(ELEMENT_BYTES))
    arch = rng.choice(ARCHS)

    def extent() -> int:
        return rng.choice((1, 7, 96, 130, 250, 1000, 1004, 1026, 1536, 2816, 4096, 4100, 8192, 8200))

    majors = (rng.choice("km"), rng.choice("kn"))
    alignment = rng.choice([a for a in (1, 2, 4, 8, 16, 32, 256) if a >= ELEMENT_BYTES[dtype]])
    return arch, (extent(), extent(), extent()), majors, alignment, dtype


def _judge_choice(case: tuple[Any, ...], value: Any, outputs: list[Any]) -> str | None:
    return choice_hint(case, value)


choose = Check("choose", "choose", lambda: [
    (90, (4096, 4096, 4096), ("k", "k"), 16, "bfloat16"), (90, (1024, 1024, 4096), ("k", "k"), 16, "float16"),
    (90, (1536, 2816, 512), ("k", "k"), 256, "float16"), (80, (4096, 4096, 4096), ("k", "n"), 16, "float16"),
    (90, (4096, 4100, 4096), ("k", "k"), 16, "bfloat16"), (86, (1000, 999, 64), ("m", "k"), 16, "float16"),
    (90, (8192, 8192, 8192), ("k", "k"), 16, "float8_e4m3fn"), (100, (4096, 4096, 4096), ("k", "k"), 4, "float16"),
    (89, (4096, 4096, 4096), ("k", "k"), 16, "float16")], _judge_choice)

# --------------------------------------------------------------------------- 8.4 the bound

#: The Nsight Compute metric of each unit, in the rule's tie order.
METRICS = {"tensor":
               "sm__pipe_tensor_op_hmma_type_hmma_hgmma_qgmma_cycles_active.avg.pct_of_peak_sustained_active",
           "dram": "dram__throughput.avg.pct_of_peak_sustained_elapsed",
           "l2": "lts__t_sectors.avg.pct_of_peak_sustained_elapsed",
           "shared": "l1tex__data_pipe_lsu_wavefronts_mem_shared.avg.pct_of_peak_sustained_elapsed"}
OCCUPANCY = "sm__warps_active.avg.pct_of_peak_sustained_active"
DURATION = "gpu__time_duration.sum"
BOUNDS = (*METRICS, "latency")
#: A unit at or above this % of its peak is near its speed of light: it bounds the kernel.
SPEED_OF_LIGHT = 60.0


def reference_bound(profile: dict[str, float]) -> str:
    """The unit whose % of peak is highest (ties: tensor, dram, l2, shared) when it is at least 60, else "latency";
    KeyError naming a missing unit's metric.

    >>> reference_bound({**dict.fromkeys(METRICS.values(), 20.0), METRICS["dram"]: 91.0})
    'dram'
    """
    percent = [float(profile[metric]) for metric in METRICS.values()]
    top = max(percent)
    return BOUNDS[percent.index(top)] if top >= SPEED_OF_LIGHT else "latency"


def profile_of(tensor: float, dram: float, l2: float, shared: float, occupancy: float = 50.0,
               duration_ns: float = 1.0e6, **extra: float) -> dict[str, float]:
    """An ncu profile with these percentages (and any `extra` metrics, by their names)."""
    values = dict(zip(METRICS.values(), (tensor, dram, l2, shared)))
    return {**values, OCCUPANCY: occupancy, DURATION: duration_ns, **extra}


def percentages(profile: dict[str, float]) -> str:
    """A profile in a few words, for a test's message: the four units' percentages and how many other metrics."""
    units = ", ".join(f"{unit} {profile[metric]:g} %" for unit, metric in METRICS.items() if metric in profile)
    others = len(set(profile) - set(METRICS.values()))
    return f"{{{units}, {others} other metrics}}"


def bound_hint(profile: dict[str, float], value: Any) -> str | None:
    """What is wrong with `value` as bound(profile), or None."""
    if value not in BOUNDS:
        return f"expected one of {', '.join(map(repr, BOUNDS))}, got {value!r}"
    want = reference_bound(profile)
    if value == want:
        return None
    top = max(profile[metric] for metric in METRICS.values())
    if want == "latency":
        return (f"{value!r} is at {profile[METRICS[value]]:g} % of its peak, and no unit of this profile is nearer "
                f"its own: is a unit below the {SPEED_OF_LIGHT:g} % line what limits the kernel?")
    if value == "latency":
        return (f"a unit of this profile runs at or above {SPEED_OF_LIGHT:g} % of its peak: near its speed of light, "
                f"that unit is what limits the kernel")
    if profile[METRICS[value]] == top:
        return f"{value!r} ties with another unit at {top:g} %: which does the rule's tie order name?"
    return f"{value!r} is at {profile[METRICS[value]]:g} % of its peak, but another unit is busier"


#: Metrics a real ncu report holds beside the six: the same units measured another way, which the rule ignores.
DECOYS = {"sm__pipe_tensor_op_hmma_type_hmma_hgmma_qgmma_cycles_active.avg.pct_of_peak_sustained_elapsed": 97.0,
          "dram__throughput.avg.pct_of_peak_sustained_active": 99.0,
          "sm__throughput.avg.pct_of_peak_sustained_elapsed": 88.0,
          "launch__grid_size": 132.0}


def random_profile(rng: random.Random) -> dict[str, float]:
    """A profile: percentages anywhere, or near the 60 % line, or tied at the top; extra metrics now and then."""
    kind = rng.random()
    if kind < 0.3:  # near the line
        values = [round(rng.uniform(0, 59), 2) for _ in METRICS]
        values[rng.randrange(4)] = rng.choice((59.99, 60.0, 60.01, 59.5, 60.5))
    elif kind < 0.5:  # a tie at the top
        values = [round(rng.uniform(0, 70), 1) for _ in METRICS]
        top = round(rng.uniform(40, 95), 1)
        for i in rng.sample(range(4), rng.choice((2, 2, 3))):
            values[i] = top
    else:
        values = [round(rng.uniform(0, 100), 2) for _ in METRICS]
    extra = DECOYS if rng.random() < 0.4 else {}
    return profile_of(*values, occupancy=round(rng.uniform(5, 100), 1),
                      duration_ns=float(rng.randrange(10_000, 10_000_000)), **extra)


def _judge_bound(case: tuple[Any, ...], value: Any, outputs: list[Any]) -> str | None:
    return bound_hint(case[0], value)


bound = Check("bound", "bound", lambda: [
    (profile_of(82.4, 35.1, 48.0, 61.2, 24.5, 1.42e6),), (profile_of(0.0, 91.3, 70.2, 0.0, 88.0, 3.1e5),),
    (profile_of(41.0, 22.5, 30.4, 38.9, 12.1, 8.0e4),), (profile_of(75.0, 75.0, 40.0, 20.0, 30.0, 2.0e6),),
    (profile_of(20.0, 55.0, 66.0, 66.0, 60.0, 5.0e5),), (profile_of(12.0, 45.0, 60.0, 59.0, 70.0, 1.0e5),),
    (profile_of(30.0, 20.0, 40.0, 88.0, 45.0, 9.0e5, **DECOYS),)], _judge_bound)
