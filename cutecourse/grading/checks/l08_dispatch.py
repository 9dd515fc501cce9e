"""Checks of lesson 8 (kernel composition, dispatch and profiling), its three CPU exercises: the tile a persistent CTA
computes in a Hilbert raster (8.1), the balanced persistent grid and its efficiency (8.2), and a dispatcher over a
CUTLASS-library-like table of kernels instanced per alignment (8.3). The capstone, 8.4, has its own module
(`l08_splitk`).

The references are written out here from the exercises' rules, each in a form of its own (8.1 descends the curve
with its quadrants' maps as matrices). The hints name the idea that is missing (the quadrants' turns, the cells
outside the grid, the curve transposed, a narrower last group of tiles, the hardware's limit on co-resident
clusters, a partial last wave, the padding of a partial tile, vectors narrower than 16 bytes) and never print the
right answer. The hidden tests (tests/hidden/test_08_dispatch_profiling.py) draw their random inputs with the
generators below.
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


# --------------------------------------------------------------------------- 8.1 the Hilbert raster

#: How the Hilbert curve on a square of side 2h runs through its four quadrants: for each, in the curve's order, the
#: map from the quadrant's own curve (side h, (u, v)) to the square's (i, j) = M (u, v) + offset, as (M, offset(h)):
#: top left transposed, bottom left and bottom right as they are, top right turned about the anti-diagonal.
QUADRANTS = (((0, 1, 1, 0), lambda h: (0, 0)), ((1, 0, 0, 1), lambda h: (h, 0)),
             ((1, 0, 0, 1), lambda h: (h, h)), ((0, -1, -1, 0), lambda h: (h - 1, 2 * h - 1)))
#: The same quadrants in a curve that does not turn them: each is the square's curve shifted (a "U" order).
UNTURNED = tuple(((1, 0, 0, 1), offset) for offset in (lambda h: (0, 0), lambda h: (h, 0), lambda h: (h, h),
                                                        lambda h: (0, h)))


def _side(tiles_m: int, tiles_n: int) -> int:
    """The side of the Hilbert square: the smallest power of two that covers both extents."""
    return 1 << (max(tiles_m, tiles_n) - 1).bit_length()


def _mul(a: tuple[int, ...], b: tuple[int, ...]) -> tuple[int, ...]:
    return (a[0] * b[0] + a[1] * b[2], a[0] * b[1] + a[1] * b[3], a[2] * b[0] + a[3] * b[2], a[2] * b[1] + a[3] * b[3])


def _apply(a: tuple[int, ...], v: tuple[int, int]) -> tuple[int, int]:
    return a[0] * v[0] + a[1] * v[1], a[2] * v[0] + a[3] * v[1]


def hilbert_tile(work: int, tiles_m: int, tiles_n: int, quadrants: Any = QUADRANTS) -> tuple[int, int]:
    """The tile (m, n) of work item `work` in the Hilbert raster of a tiles_m x tiles_n grid: the Hilbert curve of
    the smallest power-of-two square that covers the grid, its cells outside the grid skipped. Descends the quadrants,
    counting the grid's tiles in each (the overlap of two rectangles), so it costs O(log side).

    >>> [hilbert_tile(w, 3, 2) for w in range(6)]
    [(0, 0), (0, 1), (1, 1), (1, 0), (2, 0), (2, 1)]
    """
    if not 0 <= work < tiles_m * tiles_n:
        raise ValueError(f"work={work}: a {tiles_m} x {tiles_n} grid has work items 0 to {tiles_m * tiles_n - 1}")
    side, rest = _side(tiles_m, tiles_n), work
    turn, origin = (1, 0, 0, 1), (0, 0)  # the square's map from its curve's (u, v) to the grid's (m, n)
    while side > 1:
        half = side // 2
        for m_q, offset in quadrants:
            t = _apply(turn, offset(half))
            child, child_origin = _mul(turn, m_q), (origin[0] + t[0], origin[1] + t[1])
            far = _apply(child, (half - 1, half - 1))
            rows = sorted((child_origin[0], child_origin[0] + far[0]))
            cols = sorted((child_origin[1], child_origin[1] + far[1]))
            inside = max(0, min(rows[1], tiles_m - 1) - rows[0] + 1) * max(0, min(cols[1], tiles_n - 1) - cols[0] + 1)
            if rest < inside:
                turn, origin = child, child_origin
                break
            rest -= inside
        side = half
    return origin


@functools.lru_cache(maxsize=64)
def hilbert_order(tiles_m: int, tiles_n: int) -> tuple[tuple[int, int], ...]:
    """Every tile of the grid in Hilbert-raster order (for grids small enough to list)."""
    return tuple(hilbert_tile(w, tiles_m, tiles_n) for w in range(tiles_m * tiles_n))


@functools.lru_cache(maxsize=64)
def _mistaken_orders(tiles_m: int, tiles_n: int) -> dict[str, tuple[tuple[int, int], ...]]:
    """The orders of the classic mistakes, to name one when a learner's order is it."""
    side = _side(tiles_m, tiles_n)
    cells = [(m, n) for m in range(tiles_m) for n in range(tiles_n)]
    morton = sorted(cells, key=lambda t: sum(((t[0] >> b) & 1) << (2 * b + 1) | ((t[1] >> b) & 1) << (2 * b)
                                           for b in range(side.bit_length())))
    square = tuple(hilbert_tile(w, side, side) for w in range(side * side)) if side <= 64 else ()
    orders = {
        TRANSPOSED: tuple((n, m) for m, n in hilbert_order(tiles_n, tiles_m)),
        UNTURNED_HINT: tuple(hilbert_tile(w, tiles_m, tiles_n, UNTURNED) for w in range(tiles_m * tiles_n)),
        MORTON: tuple(morton),
        ROW_MAJOR: tuple(cells),
        UNSKIPPED: square[:tiles_m * tiles_n],
    }
    return {hint: order for hint, order in orders.items() if order != hilbert_order(tiles_m, tiles_n)}


TRANSPOSED = ("that is the curve with m and n swapped: this raster's curve takes its first step on a 2 x 2 square "
              "down, along M, and its top-left quadrant is the one transposed")
UNTURNED_HINT = ("that is a curve whose quadrants are not turned: each quadrant's curve must start where the "
                 "previous one ended, so the top-left quadrant is transposed and the top-right one turned about the "
                 "anti-diagonal")
MORTON = "that is a Z (Morton) order, which jumps between quadrants; a Hilbert curve moves one tile at a time"
ROW_MAJOR = "that is the row-major order: a Hilbert raster keeps consecutive work items next to each other in 2D"
UNSKIPPED = ("that numbers every cell of the curve's power-of-two square, also those outside the grid: work items "
             "count only the tiles inside the grid")


def raster_hint(case: tuple[int, int, int], value: Any) -> str | None:
    """What is wrong with `value` as raster(*case), or None."""
    work, tiles_m, tiles_n = case
    if not (_pair(value, 2) and all(_count(v) for v in value)):
        return f"expected the tile (m, n), two ints, got {value!r}"
    got = tuple(value)
    if got == hilbert_tile(work, tiles_m, tiles_n):
        return None
    m, n = got
    if not (0 <= m < tiles_m and 0 <= n < tiles_n):
        return (f"({m}, {n}) lies outside the {tiles_m} x {tiles_n} grid of tiles: are the curve's cells outside "
                f"the grid skipped (work items number only the tiles inside it)?")
    if tiles_m * tiles_n <= 4096:
        for hint, order in _mistaken_orders(tiles_m, tiles_n).items():
            if work < len(order) and got == order[work] and hint != ROW_MAJOR:
                return hint
    return (f"({m}, {n}) is not the tile of work item {work}: at which level does your descent leave the quadrant "
            f"that holds it? Count the grid's tiles in each quadrant, in the curve's order, turned as the curve "
            f"turns them")


def raster_grid_hint(grid: tuple[int, int], tiles: list[Any]) -> str | None:
    """What is wrong with `tiles`, raster(work, *grid) for every work item in order, or None: every tile exactly
    once, then each work item's tile (a whole order named where it is a classic mistake's)."""
    tiles_m, tiles_n = grid
    for work, value in enumerate(tiles):
        if not (_pair(value, 2) and all(_count(v) for v in value)):
            return f"work item {work}: {raster_hint((work, *grid), value)}"
    seen = [tuple(v) for v in tiles]
    for work, (m, n) in enumerate(seen):
        if not (0 <= m < tiles_m and 0 <= n < tiles_n):
            return f"work item {work}: {raster_hint((work, *grid), (m, n))}"
    repeated = next((t for t in seen if seen.count(t) > 1), None)
    if repeated is not None:
        return (f"the {tiles_m} x {tiles_n} tiles are not each computed once: tile {repeated} comes up twice, and "
                f"{tiles_m * tiles_n - len(set(seen))} tiles are never computed")
    right = hilbert_order(tiles_m, tiles_n)
    if tuple(seen) == right:
        return None
    for hint, order in _mistaken_orders(tiles_m, tiles_n).items():
        if tuple(seen) == order:
            return hint
    grouped = next((g for g in range(2, tiles_m + 1) if tuple(seen) == row_grouped_order(tiles_m, tiles_n, g)), None)
    if grouped:
        return (f"that is a grouped raster, groups of {grouped} tile rows walked column by column (the ladder's steps "
                f"9-11): a Hilbert curve has no groups, and turns at every scale")
    work = next(w for w, (a, b) in enumerate(zip(seen, right)) if a != b)
    return f"work item {work}: {raster_hint((work, *grid), seen[work])}"


def row_grouped_order(tiles_m: int, tiles_n: int, group_m: int) -> tuple[tuple[int, int], ...]:
    """The ladder's raster (steps 9-11, `_tile_coord`): groups of `group_m` tile rows, top to bottom; inside a group,
    column by column. To name that mistake."""
    return tuple((m, n) for first in range(0, tiles_m, group_m) for n in range(tiles_n)
                 for m in range(first, min(first + group_m, tiles_m)))


def random_raster_grid(rng: random.Random) -> tuple[int, int]:
    """(tiles_m, tiles_n): squares and powers of two, odd and partial grids (the curve's square larger than the
    grid), 1-row and 1-column grids."""
    extents = (1, 2, 3, 4, 5, 7, 8, 11, 13, 16, 17, 24, 31, 33)
    return rng.choice(extents), rng.choice(extents)


#: Grids whose curve square is far too large to walk: a raster that lists the curve's cells (one per work item, or
#: all of them once) runs out of time; the descent takes one step per level. (tiles_m, tiles_n, work items to ask)
HUGE_GRIDS = ((100_000, 3, (0, 1, 4114, 12345, 299_999)), (5, 70_001, (0, 7, 99_999, 350_004)),
              (40_000, 40_000, (0, 3, 1_234_567_890, 1_599_999_999)))


def _judge_raster(case: tuple[Any, ...], value: Any, outputs: list[Any]) -> str | None:
    return raster_hint(case, value)


raster = Check("raster", "raster", lambda: [
    (1, 2, 2), (5, 4, 4), (14, 4, 4), (3, 3, 2), (4, 3, 2), (9, 5, 3), (20, 8, 8), (13, 1, 20), (2, 6, 1),
    (60, 9, 7)], _judge_raster)

# --------------------------------------------------------------------------- 8.2 the balanced persistent grid


def reference_grid(m: int, n: int, tile_m: int, tile_n: int, sms: int, cluster_m: int, cluster_n: int,
                   max_clusters: int | None = None) -> tuple[int, int, float]:
    """(clusters launched, waves, efficiency) of the balanced persistent grid, the efficiency being the share of the
    launched CTAs' tile slots, over all waves, that computes elements of C (tile, wave and cluster quantization
    together); ValueError on bad input.

    >>> reference_grid(4096, 4096, 128, 256, 132, 2, 1)  # step 10 at 4096³: 256 cluster tiles, 4 waves of 64
    (64, 4, 1.0)
    >>> reference_grid(4100, 4096, 128, 256, 132, 2, 1)[:2]  # 33 tile rows: 17 cluster rows, 272 items, 5 waves
    (55, 5)
    """
    sizes = dict(m=m, n=n, tile_m=tile_m, tile_n=tile_n, sms=sms, cluster_m=cluster_m, cluster_n=cluster_n)
    if max_clusters is not None:
        sizes["max_clusters"] = max_clusters
    bad = next((k for k, v in sizes.items() if v < 1), None)
    if bad is not None:
        raise ValueError(f"{bad}={sizes[bad]} must be at least 1")
    if sms < cluster_m * cluster_n:
        raise ValueError(f"sms={sms} cannot hold one {cluster_m} x {cluster_n} cluster")
    items = _cdiv(_cdiv(m, tile_m), cluster_m) * _cdiv(_cdiv(n, tile_n), cluster_n)
    fit = min(sms // (cluster_m * cluster_n), max_clusters or sms)
    waves = _cdiv(items, fit)
    clusters = _cdiv(items, waves)
    return clusters, waves, m * n / (waves * clusters * cluster_m * cluster_n * tile_m * tile_n)


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
    tiles = _cdiv(m, tile_m) * _cdiv(n, tile_n)
    if _close(efficiency, tiles / (waves * clusters * size)):  # where no cluster hangs over, items count the same
        return ("efficiency counts whole tiles: a tile that hangs over the matrix's edge computes padding there "
                "(tile quantization); count the elements of C, not the tiles")
    if _close(efficiency, items / (waves * clusters)):
        return ("efficiency counts cluster work items; a cluster at the matrix's edge may hang over it, and so may "
                "a tile: count the elements of C that the CTAs' tile slots compute")
    return (f"clusters and waves are right, but efficiency={efficiency!r}: the share of the launched CTAs' "
            f"tile slots, over all waves, that computes elements of C")


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
