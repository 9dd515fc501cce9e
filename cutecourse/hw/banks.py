"""The bank model of shared memory: the bank of an element and the wavefronts one warp-wide access takes.

The model (NVIDIA GPUs since Volta): shared memory has 32 banks of 4 bytes; byte address ``a`` lives in bank
``(a // 4) % 32``. One instruction is served in *phases*: a group of threads whose requests together are at most
128 bytes (the whole warp for 4-byte accesses, half a warp for 8-byte, a quarter warp for 16-byte, the 8 row
addresses of one ``ldmatrix`` 8x8 matrix). A phase takes as many *wavefronts* as the largest number of distinct
4-byte words it touches in any one bank (threads reading the same word share it). The instruction's cost is the
sum over its phases; a conflict-free access takes one wavefront per 128 bytes.

An access is either an :class:`Access` (a pattern placed on the layout's logical 2-D tile for an element width)
or explicit phases: a list of phases, each a list of the element coordinates read or written in it. A layout is
read as a 2-D tile (:mod:`cutecourse.hw.tile`); :func:`cutecourse.viz.bank_map` draws its banks.

>>> from cutecourse.layout import parse_layout
>>> wavefronts(parse_layout("(8,64):(64,1)"), 16, LDMATRIX_8x8)  # 8 rows, all in banks 0-3
8
>>> wavefronts(parse_layout("S<3,3,3> o 0 o (8,64):(64,1)"), 16, LDMATRIX_8x8)  # swizzled: conflict-free
1
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Sequence, Union

from cutecourse.layout import ComposedLayout, Layout
from cutecourse.layout.inttuple import product

from .tile import Coord, LayoutLike, as_layout, grid_crd, grid_modes

__all__ = ["Access", "LDMATRIX_8x8", "WARP_128BIT_STORE", "bank_of", "wavefronts", "ideal_wavefronts",
           "access_phases", "check_element_bits"]

BANKS = 32
BANK_BYTES = 4
WAVEFRONT_BYTES = 128
ELEMENT_BITS = (8, 16, 32, 64, 128)
Phases = Sequence[Sequence[Coord]]


@dataclass(frozen=True)
class Access:
    """A warp's shared-memory instruction: ``threads`` threads each move ``bytes_per_thread`` contiguous bytes.

    Each thread's bytes are ``bytes_per_thread * 8 // element_bits`` elements along one row (mode 1) of the
    layout's tile. ``pattern`` says where thread ``t`` starts:

    - ``"rows"``: at row ``t``, column 0 (each thread gives one row address, as for ``ldmatrix``);
    - ``"row_major"``: at element ``t * vec`` of the tile in row-major order (a warp sweeping a row-major tile).

    Threads are served in phases of ``128 // bytes_per_thread`` (see the module docstring).

    >>> Access("ld.shared.b32", threads=32, bytes_per_thread=4, pattern="row_major").threads_per_phase
    32
    """

    name: str
    threads: int
    bytes_per_thread: int
    pattern: str

    def __post_init__(self) -> None:
        if self.bytes_per_thread not in (1, 2, 4, 8, 16):
            raise ValueError(f"Access: bytes_per_thread must be 1, 2, 4, 8 or 16, got {self.bytes_per_thread}")
        if self.pattern not in ("rows", "row_major"):
            raise ValueError(f"Access: pattern must be 'rows' or 'row_major', got {self.pattern!r}")
        if not 1 <= self.threads <= 32:
            raise ValueError(f"Access: threads must be 1..32 (one warp), got {self.threads}")

    @property
    def threads_per_phase(self) -> int:
        return min(32, WAVEFRONT_BYTES // self.bytes_per_thread)


LDMATRIX_8x8 = Access("ldmatrix 8x8 (8 rows of 16 bytes)", threads=8, bytes_per_thread=16, pattern="rows")
"""One ``ldmatrix`` 8x8 matrix: 8 threads each give a row address; 16 bytes per row; one phase."""

WARP_128BIT_STORE = Access("warp 128-bit stores", threads=32, bytes_per_thread=16, pattern="row_major")
"""32 threads each store 16 contiguous bytes, sweeping the tile row by row; 4 phases of 8 threads."""


def check_element_bits(element_bits: int, fn: str) -> None:
    """Raise ValueError unless ``element_bits`` is a width the model counts (one of :data:`ELEMENT_BITS`)."""
    if element_bits not in ELEMENT_BITS:
        raise ValueError(f"{fn}: element_bits must be one of {ELEMENT_BITS}, got {element_bits!r} "
                         f"(16 for fp16/bf16, 32 for fp32)")


def access_phases(access: Union[Access, Phases], rows: int, cols: int, element_bits: int,
                  fn: str = "access_phases") -> list[list[tuple[int, int]]]:
    """The ``(row, col)`` element coordinates of each phase of ``access`` on a ``rows x cols`` tile.

    >>> access_phases(LDMATRIX_8x8, 8, 64, 32)[0][:5]  # 32-bit elements: 4 per thread
    [(0, 0), (0, 1), (0, 2), (0, 3), (1, 0)]
    """
    if not isinstance(access, Access):
        return [[c if isinstance(c, tuple) else (0, c) for c in phase] for phase in access]
    if access.bytes_per_thread * 8 % element_bits:
        raise ValueError(f"{fn}: {access.name} moves {access.bytes_per_thread} bytes per thread, not a whole "
                         f"number of {element_bits}-bit elements; use a smaller element_bits")
    vec = access.bytes_per_thread * 8 // element_bits
    starts = ([(t, 0) for t in range(access.threads)] if access.pattern == "rows"
              else [divmod(t * vec, cols) for t in range(access.threads)])
    last_row, last_col = max(r for r, _ in starts), max(k for _, k in starts) + vec - 1
    if last_row >= rows or last_col >= cols:
        raise ValueError(f"{fn}: {access.name} needs a tile of at least {last_row + 1} rows x {last_col + 1} "
                         f"columns of {element_bits}-bit elements, the layout has {rows}x{cols}; use a bigger "
                         f"layout or another access")
    per = access.threads_per_phase
    threads = [[(r, k + j) for j in range(vec)] for r, k in starts]
    return [sum(threads[p:p + per], []) for p in range(0, len(threads), per)]


def bank_of(offset: int, element_bits: int) -> int:
    """The bank of the element at ``offset`` (in elements): ``(offset * bytes // 4) % 32``.

    >>> bank_of(64, 16), bank_of(3, 32)
    (0, 3)
    """
    return (offset * element_bits // 8 // BANK_BYTES) % BANKS


def _words(offset: int, element_bits: int) -> range:
    start = offset * element_bits // 8
    return range(start // BANK_BYTES, (start + max(1, element_bits // 8) - 1) // BANK_BYTES + 1)


def _cost(L: Union[Layout, ComposedLayout], rows_shape: object, phases: Sequence[Sequence[tuple[int, int]]],
          element_bits: int) -> int:
    """Wavefronts of `phases`: per phase, the most distinct 4-byte words that fall in one bank."""
    total = 0
    for phase in phases:
        words = {w for r, k in phase for w in _words(L(grid_crd(rows_shape, r, k)), element_bits)}
        total += max(Counter(w % BANKS for w in words).values(), default=0)
    return total


def wavefronts(layout: LayoutLike, element_bits: int, access: Union[Access, Phases]) -> int:
    """The number of shared-memory wavefronts ``access`` takes on ``layout`` (module docstring: the model).

    ``layout`` maps a logical ``(row, col)`` coordinate to an element offset in shared memory (a Layout, a
    swizzled ComposedLayout, or their text); ``element_bits`` is the element width.

    >>> from cutecourse.layout import parse_layout
    >>> wavefronts(parse_layout("(8,64):(64,1)"), 16, WARP_128BIT_STORE)  # 4 phases, each one contiguous row
    4
    >>> wavefronts(parse_layout("(8,64):(1,8)"), 16, WARP_128BIT_STORE)  # column-major: 8-way conflicts
    32
    """
    fn = "wavefronts"
    L = as_layout(layout, fn, "layout")
    check_element_bits(element_bits, fn)
    rows_shape, cols_shape = grid_modes(L, fn)
    phases = access_phases(access, product(rows_shape), product(cols_shape), element_bits, fn)
    return _cost(L, rows_shape, phases, element_bits)


def ideal_wavefronts(phases: list[list[tuple[int, int]]], element_bits: int) -> int:
    """The fewest wavefronts `phases` could take: one per 128 bytes of distinct elements in each phase.

    >>> ideal_wavefronts(access_phases(WARP_128BIT_STORE, 8, 64, 16), 16)  # 4 phases of 128 bytes
    4
    """
    return sum(-(-len(set(p)) * element_bits // (8 * WAVEFRONT_BYTES)) for p in phases)
