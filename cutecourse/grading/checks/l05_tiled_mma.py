"""Checks of lesson 5 (MMA atoms, TiledMMA, three-level tiling): a lane's mma.sync coordinates, wgmma's A operand
from registers written as a layout, an ldmatrix simulator, a TiledMMA for a warp grid, and what the Tensor Core GEMM
kernels of lessons 5-7 share: their PTX cases, their GEMM cases and the float64 judge (the kernels of 5.5 and 5.6
are judged in :mod:`l05_mainloop`).

Every reference comes from :mod:`cutecourse.fragments` (the fragments derived from CuTe's TV layouts) or, for the
GEMMs, from float64 products of the inputs as the learner's process holds them; the hidden tests
(tests/hidden/test_05_tiled_mma.py) use the same references and generators on inputs the notebook never shows.
"""

from __future__ import annotations

import functools
import random
import re
from typing import Any, Callable

from cutecourse import fragments as F
from cutecourse.fragments.atoms import MmaAtom
from cutecourse.grading import wire
from cutecourse.grading.checks import Check, input_of, relative_error
from cutecourse.layout import Layout, parse_layout

# --------------------------------------------------------------------------- 5.1 a lane's A, B, C coordinates


def reference_coords(k: int, lane: int) -> tuple[list[tuple[int, int]], ...]:
    """Lane `lane`'s (row, column) per value of mma.sync.m16n8k{k}'s A (m, k), B (k, n) and C (m, n), in register
    order (a0, a1, ...)."""
    frag = F.mma_fragments(F.mma_atom(k))
    a, b, c = (frag[x][lane].tolist() for x in "ABC")
    return [tuple(x) for x in a], [(kk, n) for n, kk in b], [tuple(x) for x in c]


def _pairs(value: Any, count: int) -> list[tuple[int, int]] | None:
    if not isinstance(value, (list, tuple)) or len(value) != count:
        return None
    out = []
    for p in value:
        if not (isinstance(p, (list, tuple)) and len(p) == 2 and all(isinstance(x, int) for x in p)):
            return None
        out.append((int(p[0]), int(p[1])))
    return out


def coords_hint(k: int, lane: int, value: Any) -> str | None:
    want = reference_coords(k, lane)
    if not (isinstance(value, (list, tuple)) and len(value) == 3):
        return f"expected (a, b, c): three lists of (row, column) pairs, got {value!r}"
    for name, got, ref, rows in zip("ABC", value, want, ("(m, k)", "(k, n)", "(m, n)")):
        pairs = _pairs(got, len(ref))
        if pairs is None:
            return f"{name} should be {len(ref)} {rows} pairs of ints (one per value, in register order), got {got!r}"
        if pairs != ref:
            i = next(i for i, (g, r) in enumerate(zip(pairs, ref)) if g != r)
            return (f"{name}'s value {i} is {pairs[i]}, which is not where lane {lane} holds it: groupID = lane >> 2 "
                    f"picks the row ({'n' if name == 'B' else 'm'}), threadID_in_group = lane % 4 the pair of "
                    f"columns; check which values add 8 and in which order")
    return None


def _judge_coords(case: tuple[Any, ...], value: Any, outputs: list[Any]) -> str | None:
    return coords_hint(*case, value)


mma_coords = Check("mma_coords", "mma_coords",
                   lambda: [(16, 0), (16, 5), (16, 31), (8, 7), (8, 30), (16, 18)], _judge_coords)

# --------------------------------------------------------------------------- 5.2 wgmma's A from registers


def tv_layout(value: Any, threads: int, values: int, what: str, to: str = "index"
              ) -> tuple[Layout | None, str | None]:
    """`value` (a Layout or its text) read as a (thread, value) -> `to` layout of `threads` threads with `values`
    values each, like `what`: (the layout, None), or (None, what is wrong with it)."""
    try:
        got = parse_layout(str(value))
    except ValueError as exc:
        return None, f"expected a Layout (or its text), got {value!r}: {exc}"
    if not isinstance(got, Layout) or got.rank != 2:
        return None, f"expected a rank-2 layout (thread, value) -> {to}, got {value}"
    if (got[0].size(), got[1].size()) != (threads, values):
        return None, (f"{value} has {got[0].size()} threads and {got[1].size()} values; {what} has {threads} "
                      f"threads and {values} values per thread")
    return got, None


def layout_hint(value: Any, want: Layout, shape: tuple[int, int], what: str) -> str | None:
    """Is `value` (a Layout or its text) the same function (thread, value) -> index as `want` on a `shape` tile?
    Any way of writing it is right."""
    got, problem = tv_layout(value, want[0].size(), want[1].size(), what)
    if problem:
        return problem
    try:
        at = F.coords(got, shape)
    except ValueError:
        return (f"{value} reaches indices outside the {shape[0]}x{shape[1]} tile (column-major: m + {shape[0]} k)")
    ref = F.coords(want, shape)
    wrong = (at != ref).any(axis=-1)
    if wrong.any():
        t, v = (int(x) for x in next(zip(*wrong.nonzero())))
        return (f"{value} puts thread {t}'s value {v} at {tuple(at[t, v].tolist())}; that element is held elsewhere "
                f"({int(wrong.sum())} of {wrong.size} values are misplaced)")
    return None


#: mma.sync.m16n8k32's atom for 8-bit inputs (s8/u8, and e4m3/e5m2 on sm_89+), as CuTe's SM80_16x8x32_S32S8S8S32_TN
#: writes it: one 32-bit register holds four K-adjacent values (PTX ISA, "Matrix Fragments for mma.m16n8k32").
MMA_K32_8BIT = MmaAtom("SM80_16x8x32_S32S8S8S32_TN", "mma.sync.aligned.m16n8k32.row.col", (16, 8, 32), 32,
                       Layout(((4, 8), (4, 2, 2)), ((64, 1), (16, 8, 256))),
                       Layout(((4, 8), (4, 2)), ((32, 1), (8, 128))), Layout(((4, 8), (2, 2)), ((32, 1), (16, 8))))
WGMMA_A_BITS = (16, 8)  # fp16/bf16 (k16) and 8-bit (k32) inputs
WGMMA_A_GROUPS = (1, 2, 3, 4)  # consumer warpgroups stacked along M


def reference_wgmma_a(element_bits: int, warpgroups: int) -> Layout:
    """The A operand of RS wgmma (``wgmma.mma_async.m64nNk{256 / bits}``, A from registers) for `warpgroups`
    warpgroups stacked along M: (thread, value) -> m + 64 * warpgroups * k. It is the mma.sync A fragment of the
    same K, one warp per 16 rows: a TiledMMA of 4 * warpgroups warps along M (the DSL's RS TiledMMA prints the same,
    tests/grading/test_lesson_05.py)."""
    atom = F.mma_atom(16) if element_bits == 16 else MMA_K32_8BIT
    return F.tiled_mma(atom, (4 * warpgroups, 1, 1)).tv_layout_A_tiled


def wgmma_a_hint(element_bits: int, warpgroups: int, value: Any) -> str | None:
    k = 256 // element_bits
    return layout_hint(value, reference_wgmma_a(element_bits, warpgroups), (64 * warpgroups, k),
                       f"wgmma's register A ({warpgroups} warpgroup(s), {element_bits}-bit elements)")


def _judge_wgmma_a(case: tuple[Any, ...], value: Any, outputs: list[Any]) -> str | None:
    return wgmma_a_hint(*case, value)


wgmma_a = Check("wgmma_a", "wgmma_a_layout", lambda: [(16, 1), (8, 1), (16, 2)], _judge_wgmma_a)

# --------------------------------------------------------------------------- 5.3 an ldmatrix simulator


def random_rows(rng: random.Random) -> list[list[int]]:
    """32 rows of eight distinct 16-bit values: lane i's row, what its address points at."""
    values = rng.sample(range(1, 2**16), 32 * 8)
    return [values[8 * i: 8 * i + 8] for i in range(32)]


def ldmatrix_hint(case: tuple[Any, ...], value: Any) -> str | None:
    import numpy as np

    rows, x, transpose = case
    want = F.simulate_ldmatrix(np.asarray(rows), x, transpose)
    try:
        got = np.asarray(value)
    except Exception:  # noqa: BLE001 - anything that is not array-like is a hint
        got = None
    if got is None or got.shape != want.shape:
        shape = None if got is None else got.shape
        return f"expected an array (32, {x}, 2): each lane's {x} registers of two halves; got shape {shape}"
    wrong = got != want
    if wrong.any():
        lane, reg, half = (int(i) for i in np.argwhere(wrong)[0])
        return (f"lane {lane}'s register {reg} half {half} is {got[lane, reg, half]}; {int(wrong.sum())} of "
                f"{wrong.size} values are wrong. Which lane's address gives each matrix's rows, and with "
                f"{'.trans' if transpose else 'no .trans'}, which row and column does a lane receive?")
    return None


def _ldmatrix_cases() -> list[tuple[Any, ...]]:
    rng = random.Random(503)
    return [(random_rows(rng), x, t) for x, t in ((1, False), (4, False), (2, True), (4, True), (1, True))]


def _judge_ldmatrix(case: tuple[Any, ...], value: Any, outputs: list[Any]) -> str | None:
    return ldmatrix_hint(case, value)


ldmatrix_sim = Check("ldmatrix_sim", "ldmatrix_sim", _ldmatrix_cases, _judge_ldmatrix)

# --------------------------------------------------------------------------- 5.4 a TiledMMA for a warp grid


def reference_tiled(warps_m: int, warps_n: int, k: int) -> tuple[str, str, str]:
    """The A, B, C tiled TV layouts of m16n8k{k} atoms over a ROW-major warps_m x warps_n grid of warps, permuted to
    (16 warps_m, 16 warps_n, k)."""
    grid = Layout((warps_m, warps_n, 1), (warps_n, 1, 0))
    t = F.tiled_mma(F.mma_atom(k), grid, (16 * warps_m, 16 * warps_n, k))
    return str(t.tv_layout_A_tiled), str(t.tv_layout_B_tiled), str(t.tv_layout_C_tiled)


def tiled_hint(case: tuple[Any, ...], value: Any) -> str | None:
    wm, wn, k = case
    if not (isinstance(value, (list, tuple)) and len(value) == 3):
        return f"expected three strings (str of tv_layout_A_tiled, _B_, _C_), got {value!r}"
    for name, got, want in zip("ABC", value, reference_tiled(*case)):
        if re.sub(r"\s+", "", str(got)) != want:
            return (f"tv_layout_{name}_tiled is {got}; is the warp grid ({wm}, {wn}, 1) row-major (warp w at "
                    f"(w // {wn}, w % {wn})), the atom m16n8k{k}, and the permutation (16 * warps_m, 16 * warps_n, "
                    f"{k})?")
    return None


def random_tiled_case(rng: random.Random) -> tuple[int, int, int]:
    """A grid of at least two warps along both M and N: only there do row- and column-major grids differ."""
    return rng.choice([2, 4, 8]), rng.choice([2, 4, 8]), rng.choice(F.MMA_KS)


def _judge_tiled(case: tuple[Any, ...], value: Any, outputs: list[Any]) -> str | None:
    return tiled_hint(case, value)


#: Row- and column-major warp grids differ only where both sides have two warps or more: three cases of four.
TILED_CASES = [(2, 2, 16), (2, 4, 8), (4, 2, 16), (1, 4, 8)]
tiled_mma_for = Check("tiled_mma_for", "tiled_mma_for", lambda: TILED_CASES, _judge_tiled)

# --------------------------------------------------------------------------- Tensor Core GEMMs (5.5, 5.6; lessons 6-7)

VECTOR = 8  # 16-bit elements per 16-byte load: every contiguous extent is a multiple of it
#: (dtype, arch) of the kernels' PTX checks: both 16-bit types, both archs.
GEMM_PTX_CASES = [("float16", "sm_80"), ("bfloat16", "sm_80"), ("bfloat16", "sm_90a")]
#: (dtype, arch) of the hidden PTX tests of lessons 6-8's kernel answers: both 16-bit types on both archs.
PTX_GRID = [(dtype, arch) for dtype in ("float16", "bfloat16") for arch in ("sm_80", "sm_90a")]
#: What those lessons' notebook checks compile of the grid: each type and each arch once. A check runs twice in a
#: grade (in the notebook's kernel, then in the grader's re-judge), each case a compile of seconds; the hidden test
#: compiles the whole grid.
CHECK_PTX_CASES = [("float16", "sm_80"), ("bfloat16", "sm_90a")]


def ptx_text(code: Any) -> str | None:
    """`code` where a learner's compile returned PTX, else None (the kernel checks of lessons 5-7 read it)."""
    return code if isinstance(code, str) and ".entry" in code else None


def common_ptx_hint(code: str) -> str | None:
    """What every Tensor Core GEMM's PTX must show (ldmatrix, a barrier, predicated edges), or None."""
    from cutecourse.kernels import ptx

    if ptx.count(code, "ld.shared"):
        return ("the PTX reads shared memory with ld.shared: the operands must reach the registers through "
                "ldmatrix (cute.copy with the tiled copies made by make_tiled_copy_A/B)")
    if not ptx.count(code, "bar.sync"):
        return "no barrier in the mainloop: a warp would read a shared tile another warp has not finished writing"
    if ptx.guarded(code) == 0:
        return "no predicated global access: the edge tiles of a ragged matrix would read and write outside it"
    return None


def _a_shape(m: int, k: int, a_transposed: bool) -> tuple[int, int]:
    return (k, m) if a_transposed else (m, k)


def gemm_ptx_case(dtype: str, arch: str, batched: bool, batch: int | None = 2, a_transposed: bool = False
                  ) -> tuple[Any, ...]:
    """A PTX case: the arch, then CPU stand-ins of A, B (in `dtype`) and C (fp32): A (M, K), or (K, M) with
    `a_transposed`; B (N, K), or with `batched` B (K, N) and, unless `batch` is None, a leading L mode of `batch`
    GEMMs."""
    import numpy as np

    lead = (batch,) if batched and batch is not None else ()
    shapes = (_a_shape(64, 96, a_transposed), (96, 64) if batched else (64, 96), (64, 64))
    return (arch, *(wire.tensor(np.zeros(lead + s, np.float32), d, "cpu") for s, d in zip(shapes, (dtype, dtype,
                                                                                                   "float32"))))


def gemm_cases(seed: int, shapes: list[tuple[int | None, int, int, int]], dtype: str, batched: bool,
               a_transposed: bool = False) -> list[tuple[Any, ...]]:
    """(A, B, poisoned C) per (L, M, N, K): A (M, K) (or (K, M), `a_transposed`: A stored transposed, M-major),
    B (N, K), C (M, N); with `batched`, B (K, N) and a leading L mode on all three (L None: one GEMM, no L mode).
    Random normal inputs, rounded to `dtype` in the learner's process."""
    import numpy as np

    rng = np.random.default_rng(seed)
    cases = []
    for batch, m, n, k in shapes:
        lead = (batch,) if batched and batch is not None else ()
        a = rng.standard_normal(lead + _a_shape(m, k, a_transposed))
        b = rng.standard_normal(lead + ((k, n) if batched else (n, k)))
        cases.append((wire.tensor(a.astype(np.float32), dtype), wire.tensor(b.astype(np.float32), dtype),
                      wire.poisoned(lead + (m, n), "float32")))
    return cases


def gemm_hint(case: tuple[Any, ...], out: Any, batched: bool, suspects: str = "", a_transposed: bool = False
              ) -> str | None:
    """`out` against the float64 product of the inputs as the learner's process held them (A (M, K) or, with
    `a_transposed`, (K, M); B (N, K), or (K, N) when `batched`), within the course's bounds for an fp32 C
    (cutecourse.kernels.gemm.tolerances.BOUNDS); where the values are wrong, `suspects` follows the hint (what else
    such a kernel gets wrong)."""
    import numpy as np

    from cutecourse.kernels.gemm.tolerances import BOUNDS

    a, b = input_of(case), input_of(case[1:])
    if a_transposed:
        a = np.swapaxes(a, -1, -2)
    ref = a @ b if batched else a @ np.swapaxes(b, -1, -2)
    got = np.asarray(out, dtype=np.float64)
    if got.shape != ref.shape:
        return f"C has shape {got.shape}, expected {ref.shape}"
    unwritten = int(np.isnan(got).sum())
    if unwritten:
        first = ", ".join(str(int(i)) for i in np.argwhere(np.isnan(got))[0])
        return (f"{unwritten} of {got.size} outputs were never written (the first is C[{first}]): is every tile in "
                f"the grid, and is the epilogue's predicate right?")
    frobenius, elementwise = BOUNDS["float32"]
    rel = relative_error(got, ref)
    rms = max(float(np.linalg.norm(ref)) / max(ref.size, 1) ** 0.5, 1e-300)
    worst = float(np.abs(got - ref).max()) / rms
    if rel > frobenius or worst > elementwise:
        return (f"relative error {rel:.2e} (bound {frobenius:.0e}), worst element {worst:.2e}·rms (bound "
                f"{elementwise:.0e}): some products are missing or counted twice (the K tail? an ldmatrix that "
                f"loads the wrong matrices?){suspects}")
    return None


def judge_gemm(batched: bool, suspects: str = "", a_transposed: bool = False) -> Any:
    """A GEMM check's judge: `gemm_hint` on the one poisoned output, naming `suspects` where it fails."""
    def judge(case: tuple[Any, ...], value: Any, outputs: list[Any]) -> str | None:
        (out,) = outputs
        return gemm_hint(case, out, batched, suspects, a_transposed)

    return judge


def result_hint(batched: bool, suspects: str) -> Callable[[tuple[Any, ...], Any], str | None]:
    """``hint(case, out)``: `gemm_hint` of a kernel whose B is (K, N) where `batched`, naming `suspects` (a kernel
    module's ``gemm_result_hint``)."""
    return functools.partial(gemm_hint, batched=batched, suspects=suspects)


def kernel_checks(name: str, target: str, ptx_hint: Callable[[Any], str | None],
                  ptx_cases: Callable[[], list[tuple[Any, ...]]], gemm_cases: Callable[[], list[tuple[Any, ...]]],
                  batched: bool, suspects: str, gpu: int) -> tuple[Check, Check]:
    """A GEMM kernel exercise's two checks of the host `target`: ``<name>_ptx``, `ptx_hint` on the PTX it compiles
    for each of `ptx_cases` (any machine), and ``<name>_gemm``, the real GEMMs of `gemm_cases` on a GPU of compute
    capability `gpu`, judged by `judge_gemm` (B (K, N) where `batched`, naming `suspects`)."""
    options = (("vector", VECTOR),)
    return (Check(f"{name}_ptx", target, ptx_cases, lambda case, value, outputs: ptx_hint(value), via="ptx",
                  options=options),
            Check(f"{name}_gemm", target, gemm_cases, judge_gemm(batched, suspects), gpu=gpu, via="launch",
                  options=options))
