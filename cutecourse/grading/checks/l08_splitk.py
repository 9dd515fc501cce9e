"""Checks of exercise 8.4 (lesson 8's capstone): split-K with a deterministic reduction. Each CTA of a
(tiles_m, tiles_n, splits) grid computes one K-slice of one tile of D = A @ B.T into an fp32 workspace
(splits, M, N); the last CTA of a tile to arrive (an atomic count per tile) adds the tile's slices in split order,
s = 0, 1, ..., in fp32, and only then rounds to D's dtype and stores D. Its PTX on any machine; real GEMMs on a GPU.

The PTX check wants what the composition is made of: the given mainloop (m16n8k16 MMAs fed by ldmatrix), the split
from blockIdx.z, fp32 stores of the partial tile, an integer atomic add that counts the arrivals, a release between
the stores and the arrival (a fence, or an atomic with release semantics) and a CTA barrier between them, a barrier
and an acquire between the arrival and the reads of the other slices, and no floating-point atomics (their order is
the order the CTAs arrive in, so their sums change from run to run).

The GEMMs are judged on both outputs: every workspace slice against the float64 product of its own K-slice (which
k-tiles split s owns is part of the exercise), and D bit for bit against the fixed-order fp32 sum of the slices the
kernel wrote, rounded once to D's dtype, then against float64 within the course's bounds. A case whose first two
slices cancel exactly (values of ±256, exact in fp32) shows a reduction in another order: adding a small slice to a
large one before the large ones cancel rounds it at the large one's precision. The hidden tests
(tests/hidden/test_08_dispatch_profiling.py) use the same generators on shapes and split counts the notebook never
shows, and judge the speed on a deep-K problem as a ratio to the ladder's step 5 timed in the same process.
"""

from __future__ import annotations

import random
import re
from typing import Any

from cutecourse.grading import wire
from cutecourse.grading.checks import Check, input_of, relative_error, rounded
from cutecourse.grading.checks import l05_tiled_mma as L5

TILE_M = 128  # the answer cell's CTA tile
TILE_N = 128
TILE_K = 32
STAGES = 4
VECTOR = 8  # 16-bit elements per 16-byte cp.async: N and K are multiples of it
PTX_CASES = L5.PTX_GRID  # the hidden PTX test's; the check compiles L5.CHECK_PTX_CASES
#: The magnitude of the cancelling slices' elements: 256 · 256 products, summed exactly in fp32.
BIG = 256.0

_FLOAT_ATOMIC = re.compile(r"^\s*(?:@!?%\w+\s+)?(?:atom|red)\.[\w.]*\.(?:f32|f16|bf16|f64|f16x2|bf16x2)\b",
                           re.MULTILINE)
_INT_ADD = re.compile(r"^\s*(?:@!?%\w+\s+)?atom\.[\w.]*\.add\.[us]32\b", re.MULTILINE)
_STORE_32 = re.compile(r"^\s*(?:@!?%\w+\s+)?st\.global(?:\.v[24])?\.(?:b32|f32|u32|s32)\b")
_LOAD_32 = re.compile(r"^\s*(?:@!?%\w+\s+)?ld\.global(?:\.[a-z]+)*(?:\.v[24])?\.(?:b32|f32)\b")
_BARRIER = re.compile(r"^\s*(?:@!?%\w+\s+)?(?:bar\.sync|barrier\.sync)")
_FENCE = re.compile(r"^\s*(?:@!?%\w+\s+)?(?:fence\.(?:sc|acq_rel)\.(?:gpu|sys)|membar\.(?:gl|sys))")


def _counters_shape(m: int, n: int) -> tuple[int, int]:
    """The arrival counters' tensor: one int32 per tile, each row rounded up to 8 (whole 32-byte vectors)."""
    tiles_n = -(-n // TILE_N)
    return -(-m // TILE_M), 8 * -(-tiles_n // 8)


def slice_bounds(k: int, splits: int) -> list[tuple[int, int]]:
    """The K range [lo, hi) of each split: split s owns k-tiles s·k_tiles // splits up to (s+1)·k_tiles // splits
    (rounded down), so the slices differ by at most one k-tile and a split past the k-tiles owns none."""
    k_tiles = -(-k // TILE_K)
    edges = [s * k_tiles // splits for s in range(splits + 1)]
    return [(min(lo * TILE_K, k), min(hi * TILE_K, k)) for lo, hi in zip(edges, edges[1:])]


def _case(a: Any, b: Any, m: int, n: int, splits: int, dtype: str) -> tuple[Any, ...]:
    import numpy as np

    carried = np.float16 if dtype == "float16" else np.float32  # fp16 goes as its own bits: half the bytes
    return (wire.tensor(a.astype(carried), dtype), wire.tensor(b.astype(carried), dtype),
            wire.poisoned((m, n), dtype), wire.poisoned((splits, m, n), "float32"),
            wire.tensor(np.zeros(_counters_shape(m, n), np.int32), "int32"))


def cases(seed: int, shapes: list[tuple[int, int, int, int]], dtype: str) -> list[tuple[Any, ...]]:
    """(A, B, poisoned D, poisoned workspace, zeroed counters) per (M, N, K, splits): random normal A (M, K) and
    B (N, K) in `dtype`, D (M, N) in `dtype`, the workspace (splits, M, N) in fp32."""
    import numpy as np

    rng = np.random.default_rng(seed)
    return [_case(rng.standard_normal((m, k)), rng.standard_normal((n, k)), m, n, splits, dtype)
            for m, n, k, splits in shapes]


def cancelling_case(seed: int, m: int, n: int, splits: int, k_tiles_per_split: int, dtype: str) -> tuple[Any, ...]:
    """A case whose slice 1 is exactly minus slice 0 (A = +BIG there, -BIG here, B = BIG in both: every element
    ±2^16 · the slice's K, exact in fp32) and whose other slices are random normal: summed in split order the two
    cancel before the small slices are added; in another order a small slice is first rounded at the large one's
    precision."""
    import numpy as np

    rng = np.random.default_rng(seed)
    k = splits * k_tiles_per_split * TILE_K
    a, b = rng.standard_normal((m, k)), rng.standard_normal((n, k))
    (lo0, hi0), (lo1, hi1) = slice_bounds(k, splits)[:2]
    a[:, lo0:hi0], a[:, lo1:hi1] = BIG, -BIG
    b[:, lo0:hi0], b[:, lo1:hi1] = BIG, BIG
    return _case(a, b, m, n, splits, dtype)


def shape_of(case: tuple[Any, ...]) -> tuple[int, int, int, int]:
    """(M, N, K, splits) of a case."""
    m, k = wire.decode(case[0]["$tensor"]["array"]).shape
    splits, _, n = case[3]["$poisoned"]["shape"]
    return m, n, k, splits


def ptx_case(dtype: str, arch: str) -> tuple[Any, ...]:
    """A PTX case: the arch, then CPU stand-ins of A (M, K), B (N, K), D (M, N) in `dtype`, the fp32 workspace
    (splits, M, N) and the int32 counters."""
    import numpy as np

    shapes = (((64, 96), dtype), ((64, 96), dtype), ((64, 64), dtype), ((3, 64, 64), "float32"), ((1, 8), "int32"))
    return (arch, *(wire.tensor(np.zeros(s, np.float32), d, "cpu") for s, d in shapes))


def ptx_text(code: Any) -> str | None:
    return code if isinstance(code, str) and ".entry" in code else None


def ptx_hint(code: Any) -> str | None:
    """What is missing from, or wrong in, the PTX of a split-K GEMM with a deterministic reduction; None if it has
    what the exercise asks."""
    from cutecourse.kernels import ptx

    code = ptx_text(code)
    if code is None:
        return "expected the PTX text (a str with an .entry)"
    if _FLOAT_ATOMIC.search(code):
        return ("the PTX adds floating-point values with atomics: their additions happen in the order the CTAs "
                "arrive, which changes from run to run, and fp32 addition is not associative, so neither is D; "
                "store each partial tile and add the slices in a fixed order")
    k16 = ptx.count(code, "mma.sync.aligned.m16n8k16")
    if not k16 or not ptx.count(code, "ldmatrix.sync.aligned.m8n8.x4"):
        return ("no mma.sync.m16n8k16 fed by ldmatrix.x4 in the PTX: each CTA runs the given mainloop over its "
                "K-slice")
    if "%ctaid.z" not in code:
        return ("the kernel never reads blockIdx.z: the grid is (tiles_m, tiles_n, splits), and the third "
                "coordinate of cute.arch.block_idx() is the CTA's split")
    lines = code.splitlines()
    stores = [i for i, line in enumerate(lines) if _STORE_32.match(line)]
    atoms = [i for i, line in enumerate(lines) if _INT_ADD.match(line)]
    if not stores:
        return "no 32-bit global store in the PTX: each CTA stores its fp32 partial tile in the workspace"
    if not atoms:
        return ("no integer atomic add in the PTX: nothing counts the arrivals, so no CTA can know that the other "
                "slices of its tile are all in the workspace (cute.arch.atomic_add returns the count before its "
                "own arrival)")
    arrive = atoms[0]
    written = [i for i in stores if i < arrive]
    if not written:
        return ("the atomic add comes before any workspace store: a CTA arrives only once its partial tile is "
                "stored")
    between = lines[written[-1] + 1:arrive]
    if not any(_BARRIER.match(line) for line in between):
        return ("no CTA barrier between the workspace stores and the atomic add: one thread arrives for the whole "
                "CTA, and without a barrier it can arrive while other warps are still storing their part of the "
                "tile")
    if not any(_FENCE.match(line) for line in lines[:arrive]) and not re.search(r"\.(?:release|acq_rel)\b",
                                                                             lines[arrive]):
        return ("nothing orders the workspace stores before the arrival for other CTAs: a release (a gpu-scope "
                "fence before the atomic add, or the add's own release semantics) is what makes a CTA that sees "
                "the count also see the slice")
    reads = [i for i, line in enumerate(lines) if i > arrive and _LOAD_32.match(line)]
    if not reads:
        return ("no 32-bit global load after the atomic add: the last CTA to arrive reads every slice of its tile "
                "back from the workspace and adds them")
    after = lines[arrive + 1:reads[0]]
    if not any(_BARRIER.match(line) for line in after):
        return ("no CTA barrier between the atomic add and the reads of the slices: the other threads learn that "
                "their CTA arrived last only through shared memory and a barrier after the add")
    if not any(_FENCE.match(line) for line in after) and not re.search(r"\.(?:acquire|acq_rel)\b", lines[arrive]):
        return ("nothing orders the reads of the other slices after the arrival: an acquire (a gpu-scope fence "
                "after the atomic add, or the add's own acquire semantics) is what makes the slices the count "
                "announced visible")
    if ptx.guarded(code) == 0:
        return "no predicated global access: the edge tiles of a ragged matrix would read and write outside it"
    return None


#: The fp32 bounds a workspace slice is held to (its products and sums are fp32's: as an fp32 C).
_SLICE_BOUNDS = (1e-4, 1e-3)


def _ordered_sum(work: Any, order: Any) -> Any:
    import numpy as np

    total = np.zeros(work.shape[1:], np.float32)
    for s in order:
        total = total + work[s]
    return total


def _first(mask: Any) -> str:
    import numpy as np

    return ", ".join(str(int(i)) for i in np.argwhere(mask)[0])


def gemm_hint(case: tuple[Any, ...], d: Any, work: Any) -> str | None:
    """D and the workspace of a split-K launch, judged: each slice against the float64 product of its K range,
    then D bit for bit against the slices' fp32 sum in split order rounded to D's dtype, then against float64."""
    import numpy as np

    from cutecourse.kernels.gemm.tolerances import BOUNDS

    m, n, k, splits = shape_of(case)
    dtype = case[2]["$poisoned"]["dtype"]
    a, b = input_of(case), input_of(case[1:])
    d, work = np.asarray(d, np.float64), np.asarray(work, np.float32)
    if d.shape != (m, n) or work.shape != (splits, m, n):
        return f"D has shape {d.shape} and the workspace {work.shape}; expected {(m, n)} and {(splits, m, n)}"
    ref = a @ b.T
    scale = max(float(np.linalg.norm(ref)), 1e-300)
    for s, (lo, hi) in enumerate(slice_bounds(k, splits)):
        if np.isnan(work[s]).any():
            return (f"{int(np.isnan(work[s]).sum())} elements of workspace slice {s} were never written (the first "
                    f"is [{s}, {_first(np.isnan(work[s]))}]): every CTA stores its whole partial tile, zeros where "
                    f"its K-slice is empty")
        part = a[:, lo:hi] @ b[:, lo:hi].T
        rel = float(np.linalg.norm(work[s] - part)) / scale
        if rel > _SLICE_BOUNDS[0]:
            return (f"workspace slice {s} is not the product of split {s}'s K-slice (error {rel:.2e} of ‖A·Bᵀ‖, bound "
                    f"{_SLICE_BOUNDS[0]:.0e}): which k-tiles does split {s} of {splits} own when {splits} does not "
                    f"divide the k-tiles, and does every split cover its own?")
    if np.isnan(d).any():
        return (f"{int(np.isnan(d).sum())} of {d.size} elements of D were never written (the first is "
                f"D[{_first(np.isnan(d))}]): does the last CTA to arrive at each tile store the tile's D?")
    exact = rounded(_ordered_sum(work, range(splits)), dtype)
    if not np.array_equal(d, exact):
        wrong = d != exact
        where = f"{int(wrong.sum())} of {d.size} elements differ, the first D[{_first(wrong)}]"
        if splits > 1 and np.array_equal(d, rounded(_ordered_sum(work, range(splits - 1, -1, -1)), dtype)):
            return (f"D is the workspace's slices summed from the last split to the first ({where}): the reduction "
                    f"adds them in split order, from split 0")
        if np.array_equal(d, rounded(sum(rounded(work[s], dtype) for s in range(splits)), dtype)):
            return (f"D sums slices already rounded to {dtype} ({where}): the epilogue, the rounding included, comes "
                    f"after the fp32 reduction")
        return (f"D is not the fp32 sum of the workspace's slices in split order, rounded once to {dtype} ({where}): "
                f"is the order the same whichever CTA arrives last (split 0 first, never the last CTA's own "
                f"registers first), and does the reduction read every slice after all of them were stored?")
    frobenius, elementwise = BOUNDS[dtype]
    rel = relative_error(d, ref)
    worst = float(np.abs(d - ref).max()) / max(scale / max(ref.size, 1) ** 0.5, 1e-300)
    if rel > frobenius or worst > elementwise:
        return (f"D has relative error {rel:.2e} (bound {frobenius:.0e}), worst element {worst:.2e}·rms (bound "
                f"{elementwise:.0e}) against A @ B.T in float64")
    return None


def judge(case: tuple[Any, ...], value: Any, outputs: list[Any]) -> str | None:
    d, work = outputs
    return gemm_hint(case, d, work)


def random_shapes(rng: random.Random, count: int) -> list[tuple[int, int, int, int]]:
    """(M, N, K, splits): M any, N and K multiples of 8 (the launcher's promise) and mostly not of the tile, splits
    1-9 (the k-tiles need not divide by it, and may be fewer)."""
    return [(rng.randint(1, 400), VECTOR * rng.randint(1, 60), VECTOR * rng.randint(1, 400), rng.randint(1, 9))
            for _ in range(count)]


_rng = random.Random(804)
#: The hidden tests' (M, N, K, splits). One element; K below one k-tile with more splits than k-tiles (empty
#: slices); splits that do not divide the k-tiles (10 k-tiles in 4, 33 in 5); one split; many splits of a long K;
#: several tiles each way, ragged; then random ones.
SHAPES = [(1, 8, 8, 1), (65, 72, 24, 3), (128, 128, 320, 4), (200, 136, 1056, 5), (129, 264, 4096, 1),
          (300, 520, 520, 7), (257, 128, 96, 8), (33, 40, 2056, 2), (385, 392, 2048, 6)] + random_shapes(_rng, 5)
#: The notebook's check: fewer and smaller, the same kinds.
CHECK_SHAPES = [(64, 64, 64, 2), (100, 72, 320, 3), (7, 8, 8, 2), (130, 264, 1000, 4)]
#: Cancelling cases: (M, N, splits, k-tiles per split) over many tiles and splits. A reduction that starts from the
#: last CTA's own partial gives the ordered sum exactly when split 0 or 1 arrives last (fp32 addition commutes), so
#: only a tile whose last arrival is split 2 or later shows it: with 6 or 8 splits over 12 to 20 tiles, some tile's
#: is. (With 3 splits over 4 tiles the H200 once let that mistake pass: its last arrivals were all split 0 or 1.)
CANCELLING = [(512, 384, 6, 1), (300, 520, 8, 1)]


def check_cases() -> list[tuple[Any, ...]]:
    return cases(808, CHECK_SHAPES, "bfloat16") + [cancelling_case(809, 512, 512, 6, 1, "float16")]


def _judge_ptx(case: tuple[Any, ...], value: Any, outputs: list[Any]) -> str | None:
    return ptx_hint(value)


splitk_ptx = Check("splitk_ptx", "splitk_host", lambda: [ptx_case(d, a) for d, a in L5.CHECK_PTX_CASES],
                   _judge_ptx, via="ptx", options=(("vector", VECTOR),))
splitk_gemm = Check("splitk_gemm", "splitk_host", check_cases, judge, gpu=80, via="launch",
                    options=(("vector", VECTOR),))

# --------------------------------------------------------------------------- the speed judgement

#: The deep-K problem the speed is judged on (M, N, K, splits): 8 × 8 tiles of 128 × 128 fill 64 of an H200's 132
#: SMs; 4 splits make 256 CTAs. Measured on the H200 (2026-12-03, the exercise's solution): 1.40× step 5's speed in
#: this launcher (fp16, 20 launches, 3 interleaved rounds), 1.43× in settled rounds (bf16); 0.80× with 8 splits.
DEEP_K = (1024, 1024, 16384, 4)
#: The least speed, as a ratio to step 5 in the same launcher, that the judgement accepts: a fifth below the 1.40×
#: measured, so that a kernel as fast as the solution passes on a noisy run. The same mainloop with one split measured
#: 1.33× (its 128 × 128 tiles fill twice step 5's SMs): the margin judges the kernel as a whole, a reduction that
#: costs more than the splits win, not split-K's gain alone.
SPEED_MARGIN = 1.1
#: Launches per timing, and interleaved rounds (the median round decides).
REPEAT = 20
ROUNDS = 3


def step_host() -> Any:
    """The ladder's step 5 (the best mma.sync step) behind the exercise's host signature, (mA, mB, mD, mWork, mCount,
    stream) with the workspace and counters unused, so that the grader's launcher runs it as it runs an answer: the
    package's own code, exported by the grader (`harness.module`), never by a learner's process."""
    import cutlass
    import cutlass.cute as cute

    from cutecourse.kernels.gemm import epilogue, gemm05_swizzle, operands

    @cute.jit
    def step5_host(mA, mB, mD, mWork, mCount, stream):  # no annotations: this module's are strings
        ab = "bfloat16" if cutlass.const_expr(mA.element_type == cutlass.BFloat16) else "float16"
        ops = operands.Operands(ab=ab, c=ab, a_major="k", b_major="k", vector=VECTOR)
        pD = mD.iterator
        gemm05_swizzle.host(mA.iterator, mB.iterator, pD, mA.shape[0], mB.shape[0], mA.shape[1],
                            mA.layout.stride[0], mB.layout.stride[0], mD.layout.stride[0], stream, pD, pD, pD,
                            cutlass.Float32(1.0), cutlass.Float32(0.0), ops, gemm05_swizzle.Config(),
                            epilogue.PLAIN)

    return step5_host


def speed_hint(ratio: float, splits: int) -> str | None:
    """What a speed `ratio` to step 5 (step 5's ms over the learner's, both timed in one launcher) says, or None."""
    if ratio >= SPEED_MARGIN:
        return None
    return (f"with {splits} splits the kernel ran at {ratio:.2f}× step 5's speed on {DEEP_K[0]} × {DEEP_K[1]} × "
            f"{DEEP_K[2]}, where the judgement asks for at least {SPEED_MARGIN}×: step 5's 32 CTAs leave most SMs "
            f"idle, and split-K's tiles × splits CTAs should fill them. Does every split run its own K-slice only, "
            f"and does only the last CTA of a tile read the workspace back?")
