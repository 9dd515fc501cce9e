"""The Tensor Core instructions as CuTe sees them: thread-value layouts of the MMA atoms, the ldmatrix/stmatrix copy
atoms, and the tiled TV layouts of a TiledMMA, all built with the eager algebra (:mod:`cutecourse.layout`).

Each atom is written once, as CuTe's own traits write it (``mma_traits_sm80.hpp``, ``copy_traits_sm75.hpp``,
``mma_traits_sm90_gmma.hpp``): a layout ``(thread, value) -> index``. Everything else (the lane tables in
:mod:`cutecourse.fragments.lanes`, the tiled layouts below) is derived from these layouts with the algebra, and
``str()`` of every layout here is what the CuTe DSL prints for the same atom (tests/unit/test_fragments_vs_dsl.py).

Index conventions, as in CuTe:

- MMA operands: A ``(T, V) -> m + k*M``, B ``(T, V) -> n + k*N``, C ``(T, V) -> m + n*M`` (column-major).
- ldmatrix/stmatrix: the ``num_matrices`` 8 × 8 matrices of 16-bit elements one instruction moves, stacked;
  element ``64*j + 8*r + c`` is row ``r``, column ``c`` of matrix ``j`` (a row is one 16-byte shared-memory
  line). The *source* layout of ldmatrix says which lane gives which row's address; the *destination* layout which
  lane receives which elements in its registers (two 16-bit values per 32-bit register).

>>> print(mma_atom(16).layout_a)
((4,8),(2,2,2)):((32,1),(16,8,128))
>>> print(ldmatrix(4).layout_dst, ldmatrix(4, transpose=True).layout_dst)
(32,(2,4)):(2,(1,64)) ((4,8),(1,2,4)):((16,1),(1,8,64))
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Union

import cutecourse.layout as L
from cutecourse.layout import Layout

__all__ = ["MmaAtom", "CopyAtom", "TiledMma", "mma_atom", "wgmma_atom", "ldmatrix", "stmatrix", "tiled_mma",
           "MMA_KS", "LDMATRIX_COUNTS", "WGMMA_NS"]

#: The K of the mma.sync atoms for 16-bit inputs (m16n8k8 and m16n8k16).
MMA_KS = (8, 16)
#: How many 8 × 8 matrices one ldmatrix / stmatrix moves: .x1, .x2, .x4.
LDMATRIX_COUNTS = (1, 2, 4)
#: The N of wgmma.m64nNk16: multiples of 8 up to 256.
WGMMA_NS = tuple(range(8, 257, 8))

# mma_traits_sm80.hpp's names: (thread, value) -> index of a 16 x 8, 16 x 16, 8 x 8, 8 x 16 fragment.
_SM80_16x8_ROW = Layout(((4, 8), (2, 2)), ((32, 1), (16, 8)))
_SM80_16x16_ROW = Layout(((4, 8), (2, 2, 2)), ((32, 1), (16, 8, 128)))
_SM80_8x8_ROW = Layout(((4, 8), 2), ((16, 1), 8))
_SM80_8x16_ROW = Layout(((4, 8), (2, 2)), ((16, 1), (8, 64)))


@dataclass(frozen=True)
class MmaAtom:
    """One warp-wide (or warpgroup-wide) MMA instruction: its shape and the TV layouts of its operands.

    ``layout_a``/``layout_b`` are None where the operand comes from shared memory (wgmma's descriptors)."""

    name: str
    ptx: str  # the PTX instruction it issues
    shape_mnk: tuple[int, int, int]
    threads: int
    layout_a: Layout | None
    layout_b: Layout | None
    layout_c: Layout


def mma_atom(k: int = 16) -> MmaAtom:
    """The ``mma.sync.aligned.m16n8k{k}`` atom for fp16/bf16 inputs and an fp32 (or fp16) accumulator, k 8 or 16.

    A lane ``t`` splits as ``(t % 4, t // 4)``: ``t // 4`` (the PTX's *groupID*) picks the row of A and C and the
    column of B, ``t % 4`` (*threadID_in_group*) the pair of K (or N) columns.

    >>> print(mma_atom(8).layout_b, mma_atom(8).layout_c)
    ((4,8),2):((16,1),8) ((4,8),(2,2)):((32,1),(16,8))
    """
    if k not in MMA_KS:
        raise ValueError(f"mma_atom: k={k!r} is not an mma.sync shape for 16-bit inputs; use k=16 (m16n8k16) or "
                         f"k=8 (m16n8k8)")
    a, b = (_SM80_16x16_ROW, _SM80_8x16_ROW) if k == 16 else (_SM80_16x8_ROW, _SM80_8x8_ROW)
    return MmaAtom(f"SM80_16x8x{k}_F32F16F16F32_TN", f"mma.sync.aligned.m16n8k{k}.row.col", (16, 8, k), 32, a, b,
                   _SM80_16x8_ROW)


def wgmma_atom(n: int) -> MmaAtom:
    """The accumulator of ``wgmma.mma_async.m64n{n}k16`` (Hopper): 128 threads, four warps stacked along M, each
    holding mma.sync's 16 × 8 C fragment ``n / 8`` times along N. A and B come from shared memory (descriptors), so
    they have no register layout here.

    >>> print(wgmma_atom(16).layout_c)
    ((4,8,4),(2,2,2)):((128,1,16),(64,8,512))
    """
    if n not in WGMMA_NS:
        raise ValueError(f"wgmma_atom: n={n!r}; wgmma.m64nNk16 takes N a multiple of 8 from 8 to 256, e.g. n=128")
    # CuTe's CLayout_64xN: the m16n8 C fragment (threads (4,8), values (2,2): strides 128 = 2 columns, 1 row, 64
    # = 1 column, 8 rows of the 64 x n tile), a third thread mode for the warp (16 rows down) and a third value mode
    # for the n/8 repeats along N (8 columns = 512), absent when n = 8 (CuTe drops the size-1 mode).
    repeats = ((n // 8,), (512,)) if n > 8 else ((), ())
    layout = Layout(((4, 8, 4), (2, 2, *repeats[0])), ((128, 1, 16), (64, 8, *repeats[1])))
    return MmaAtom(f"SM90_64x{n}x16_F32F16F16_SS", f"wgmma.mma_async.sync.aligned.m64n{n}k16", (64, n, 16), 128,
                   None, None, layout)


@dataclass(frozen=True)
class CopyAtom:
    """A warp-wide copy between shared memory and registers: which lane holds which of the stacked 8 × 8 matrices'
    elements on each side (16-bit elements; see the module docstring for the index)."""

    name: str
    ptx: str
    num_matrices: int
    transpose: bool
    layout_src: Layout  # (thread, value) -> element of the source side
    layout_dst: Layout  # (thread, value) -> element of the destination side

    @property
    def layout_rows(self) -> Layout:
        """The side whose lanes give row addresses in shared memory (ldmatrix's source, stmatrix's destination)."""
        return self.layout_src if self.ptx.startswith("ldmatrix") else self.layout_dst

    @property
    def layout_registers(self) -> Layout:
        """The side in registers, two 16-bit values per 32-bit register (ldmatrix's destination, stmatrix's
        source)."""
        return self.layout_dst if self.ptx.startswith("ldmatrix") else self.layout_src


def _check_copy(fn: str, num_matrices: int, transpose: bool) -> None:
    if num_matrices not in LDMATRIX_COUNTS:
        raise ValueError(f"{fn}: num_matrices={num_matrices!r}; the instruction moves 1, 2 or 4 8x8 matrices (.x1, "
                         f".x2, .x4), e.g. num_matrices=4")
    if not isinstance(transpose, bool):
        raise ValueError(f"{fn}: transpose={transpose!r} must be True (.trans) or False")


def _per_mode(layout: Layout) -> Layout:
    return L.coalesce(layout, target_profile=(1, 1))


def _rows_bits(x: int) -> Layout:
    """(thread, bit) -> bit of the stacked matrices: lane 8j + r gives the address of row r of matrix j (128 bits);
    the lanes past 8x repeat the first ones (stride 0): the hardware ignores their addresses."""
    return _per_mode(Layout(((8 * x, 32 // (8 * x)), 128), ((128, 0), 1)))


def _registers_bits(x: int, transpose: bool) -> Layout:
    """(thread, bit) -> bit of the stacked matrices for the registers: register j holds matrix j. Without .trans,
    lane t gets row t // 4, elements 2(t % 4) and 2(t % 4) + 1 (32 contiguous bits); with .trans it gets column
    t // 4, rows 2(t % 4) and 2(t % 4) + 1 (two 16-bit values 128 bits apart)."""
    if transpose:
        return _per_mode(Layout(((4, 8), (16, 2, x)), ((256, 16), (1, 128, 1024))))
    return _per_mode(Layout((32, (32, x)), (32, (1, 1024))))


def ldmatrix(num_matrices: int = 4, transpose: bool = False) -> CopyAtom:
    """``ldmatrix.sync.aligned.m8n8.x{num_matrices}[.trans].shared.b16`` (CuTe's ``SM75_U32x{n}_LDSM_N`` /
    ``SM75_U16x{2n}_LDSM_T``), in 16-bit elements: CuTe writes the traits in bits, and the DSL shows them recast to
    the element type, as :func:`cutecourse.layout.recast_layout` does here.

    >>> a = ldmatrix(1)
    >>> print(a.layout_src, a.layout_dst)
    ((8,4),8):((8,0),1) (32,2):(2,1)
    """
    _check_copy("ldmatrix", num_matrices, transpose)
    src = L.recast_layout(16, 1, _rows_bits(num_matrices))
    dst = L.recast_layout(16, 1, _registers_bits(num_matrices, transpose))
    name = f"SM75_U16x{2 * num_matrices}_LDSM_T" if transpose else f"SM75_U32x{num_matrices}_LDSM_N"
    ptx = f"ldmatrix.sync.aligned.m8n8.x{num_matrices}{'.trans' if transpose else ''}.shared.b16"
    return CopyAtom(name, ptx, num_matrices, transpose, src, dst)


def stmatrix(num_matrices: int = 4, transpose: bool = False) -> CopyAtom:
    """``stmatrix.sync.aligned.m8n8.x{num_matrices}[.trans].shared.b16`` (sm_90): ldmatrix run backwards. The source
    is the registers (ldmatrix's destination layout), the destination the rows whose addresses the lanes give.

    >>> print(stmatrix(4).layout_src, stmatrix(4).layout_dst)
    (32,(2,4)):(2,(1,64)) (32,8):(8,1)
    """
    _check_copy("stmatrix", num_matrices, transpose)
    load = ldmatrix(num_matrices, transpose)
    name = f"SM90_U16x{2 * num_matrices}_STSM_T" if transpose else f"SM90_U32x{num_matrices}_STSM_N"
    ptx = f"stmatrix.sync.aligned.m8n8.x{num_matrices}{'.trans' if transpose else ''}.shared.b16"
    return CopyAtom(name, ptx, num_matrices, transpose, load.layout_dst, load.layout_src)


@dataclass(frozen=True)
class TiledMma:
    """An MMA atom laid over a grid of warps (``atom_layout_mnk``) and a permutation tile: what
    ``cute.make_tiled_mma`` builds. ``tv_layout_A_tiled`` etc. map ``(thread, value)`` of the whole CTA's threads to
    an index of the ``tile_size_mnk`` tile, exactly as the DSL prints them."""

    atom: MmaAtom
    thr_layout_vmnk: Layout
    tile_size_mnk: tuple[int, int, int]
    tv_layout_A_tiled: Layout
    tv_layout_B_tiled: Layout
    tv_layout_C_tiled: Layout

    @property
    def threads(self) -> int:
        return self.thr_layout_vmnk.size()


Permutation = Union[int, Layout, None]


def _as_permutation(p: Permutation, default: int, mode: str) -> Layout:
    if p is None:
        return L.make_layout(default)
    if isinstance(p, Layout):
        return p
    if isinstance(p, int) and not isinstance(p, bool) and p > 0:
        return L.make_layout(p)
    raise ValueError(f"tiled_mma: permutation_mnk's {mode} mode is {p!r}; give an int (a tile of that many "
                     f"rows), a Layout, or None (atoms x warps)")


def _thrfrg(ref: Layout, perm: tuple[Layout, Layout], atom_tv: Layout, atom_mn: tuple[int, int],
            thr_mn: tuple[int, int]) -> Layout:
    """CuTe's ``TiledMMA::thrfrg_A/B/C``: a (rows, cols) tile as ((ThrV, (Thr0, Thr1)), (FrgV, (Rest0, Rest1)))."""
    permuted = L.logical_divide(ref, perm)
    atoms = L.zipped_divide(permuted, tuple(L.make_layout(s) for s in atom_mn))  # ((Atom0, Atom1), (Rest0, Rest1))
    tv = L.composition(atoms, (atom_tv, None))  # ((ThrV, FrgV), (Rest0, Rest1))
    rest = L.logical_divide(tv[1], tuple(L.make_layout(s) for s in thr_mn))  # ((Thr0, Rest0), (Thr1, Rest1))
    return L.make_layout([L.make_layout([tv[0][0], L.make_layout([rest[0][0], rest[1][0]])]),
                          L.make_layout([tv[0][1], L.make_layout([rest[0][1], rest[1][1]])])])


def tiled_mma(atom: MmaAtom, atom_layout_mnk: Any = (1, 1, 1),
              permutation_mnk: tuple[Permutation, Permutation, Permutation] = (None, None, None)) -> TiledMma:
    """``cute.make_tiled_mma(atom, atom_layout_mnk, permutation_mnk)`` evaluated eagerly.

    `atom_layout_mnk`: a Layout or a shape (column-major) of warps over (M, N, K); `permutation_mnk`: per mode an int
    tile, a Layout, or None. The thread index is ``thr_layout_vmnk = tiled_product(atom threads, atom_layout_mnk)``:
    lane fastest, then the warps in `atom_layout_mnk`'s order.

    >>> t = tiled_mma(mma_atom(16), (2, 2, 1), (32, 32, 16))
    >>> t.tile_size_mnk, str(t.tv_layout_C_tiled)
    ((32, 32, 16), '((4,8,2,2),((2,2),(1,2))):((64,1,16,256),((32,8),(0,512)))')
    """
    if not isinstance(atom, MmaAtom) or atom.layout_a is None:
        raise ValueError(f"tiled_mma: atom must be an mma.sync MmaAtom (fragments.mma_atom(16)), got {atom!r}")
    grid = atom_layout_mnk if isinstance(atom_layout_mnk, Layout) else L.make_layout(atom_layout_mnk)
    if L.rank(grid) != 3:
        raise ValueError(f"tiled_mma: atom_layout_mnk={atom_layout_mnk!r} must have three modes (M, N, K), e.g. "
                         f"(2, 2, 1)")
    if len(permutation_mnk) != 3:
        raise ValueError(f"tiled_mma: permutation_mnk={permutation_mnk!r} must have three modes (M, N, K)")
    thr = L.tiled_product(L.make_layout(atom.threads), grid)  # (ThrV, ThrM, ThrN, ThrK)
    warps = tuple(L.size(thr, mode=[i]) for i in (1, 2, 3))
    perm = tuple(_as_permutation(p, s * w, m) for p, s, w, m in zip(permutation_mnk, atom.shape_mnk, warps, "MNK"))
    tile = tuple(L.size(p) for p in perm)
    for size, s, w, m in zip(tile, atom.shape_mnk, warps, "MNK"):
        if size % (s * w):
            raise ValueError(f"tiled_mma: the permutation's {m} mode covers {size}, not a multiple of the atom's "
                             f"{s} x {w} warps = {s * w}")
    (am, an, ak), (tm, tn, tk) = atom.shape_mnk, warps
    to_thr_idx = L.right_inverse(thr)  # thread index -> its (ThrV, ThrM, ThrN, ThrK) coordinate, linearised
    a = _thrfrg(L.make_layout((tile[0], tile[2])), (perm[0], perm[2]), atom.layout_a, (am, ak), (tm, tk))
    b = _thrfrg(L.make_layout((tile[1], tile[2])), (perm[1], perm[2]), atom.layout_b, (an, ak), (tn, tk))
    c = _thrfrg(L.make_layout((tile[0], tile[1])), (perm[0], perm[1]), atom.layout_c, (am, an), (tm, tn))
    # A (B) is shared by the warps along N (M): their thread coordinates map onto one (ThrM, ThrK) ((ThrN, ThrK)).
    a = L.composition(a, ((None, (L.make_layout((tm, tn), (1, 0)), None)), None))
    b = L.composition(b, ((None, (L.make_layout((tm, tn), (0, 1)), None)), None))
    tv = [L.composition(x, (to_thr_idx, None)) for x in (a, b, c)]
    return TiledMma(atom, thr, tile, *tv)
