"""The bank map: every element of a shared-memory layout coloured by its bank, and the cells one access touches.

The model it draws (banks, phases, wavefronts) is :mod:`cutecourse.hw.banks`.

>>> from cutecourse.hw.banks import LDMATRIX_8x8
>>> 'data-wavefronts="8"' in bank_map("(8,64):(64,1)", 16, LDMATRIX_8x8).svg  # 8 rows, all in banks 0-3
True
"""

from __future__ import annotations

from typing import Optional, Union

from cutecourse.hw.banks import (BANKS, Access, Phases, access_phases, bank_of, check_element_bits, ideal_wavefronts,
                                 wavefronts)
from cutecourse.hw.tile import LayoutLike, as_layout, grid_crd, grid_modes
from cutecourse.layout.inttuple import product, to_str

from .grid import Cell, cell_size, draw_grid
from .svg import Canvas, Picture, check_size

__all__ = ["bank_map"]


def bank_colour(bank: int) -> str:
    """The fill of a bank: 32 hues round the colour wheel, alternating lightness so neighbours differ."""
    return f"hsl({bank * 360 // BANKS},65%,{70 + 10 * (bank % 2)}%)"


def bank_map(layout: LayoutLike, element_bits: int = 16, access: Optional[Union[Access, Phases]] = None,
             title: Optional[str] = None) -> Picture:
    """Draw the bank of every element of a shared-memory ``layout``; with ``access``, its cells and cost.

    Each cell shows the bank of ``layout(row, col)`` for ``element_bits``-wide elements, coloured by bank.
    Cells ``access`` touches get a thick outline (the others are faded), and the picture states the
    wavefronts it takes next to the conflict-free ideal.

    >>> from cutecourse.hw.banks import LDMATRIX_8x8
    >>> p = bank_map("S<3,3,3> o 0 o (8,64):(64,1)", 16, LDMATRIX_8x8)
    >>> 'data-wavefronts="1"' in p.svg, p.svg.count('class="cell strong"')
    (True, 64)
    """
    fn = "viz.bank_map"
    L = as_layout(layout, fn, "layout")
    check_element_bits(element_bits, fn)
    rows_shape, cols_shape = grid_modes(L, fn)
    rows = product(rows_shape)
    cols = product(cols_shape)
    check_size(rows * cols, f"layout {L}", fn)
    touched: set[tuple[int, int]] = set()
    cost = ideal = 0
    note = ""
    if access is not None:
        phases = access_phases(access, rows, cols, element_bits, fn)
        touched = {c for p in phases for c in p}
        cost = wavefronts(L, element_bits, phases)
        ideal = ideal_wavefronts(phases, element_bits)
        name = access.name if isinstance(access, Access) else "access"
        verdict = "conflict-free" if cost <= ideal else f"{cost / ideal:g}x the ideal"
        note = f"{name}: {cost} wavefront{'s' * (cost != 1)} (ideal {ideal}, {verdict})"

    def cell(r: int, k: int) -> Cell:
        crd = grid_crd(rows_shape, r, k)
        off = L(crd)
        b = bank_of(off, element_bits)
        return Cell(str(b), bank_colour(b), f"{to_str(crd)} → offset {off}, bank {b}",
                    {"crd": to_str(crd), "idx": str(off), "bank": str(b)},
                    strong=(r, k) in touched, faded=bool(touched) and (r, k) not in touched)

    cw = cell_size(cols, 2, font=10)
    top = 66 if note else 48
    c = Canvas(max(34 + cols * cw + 12, 520), top + rows * cw + 12)
    c.text(34, 14, title if title is not None else f"banks of {L}, {element_bits}-bit elements", size=13,
           anchor="start", cls="title", weight="bold")
    if note:
        c.raw(f'<g class="wavefronts" data-wavefronts="{cost}" data-ideal="{ideal}"></g>')
        c.text(34, 34, note, size=12, anchor="start", cls="wavefront-note")
    draw_grid(c, 34, top, rows_shape, cols_shape, cw, cw, cell, font=10)
    return Picture(c.finish(), title or f"banks of {L}")
