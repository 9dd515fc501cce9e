"""One labelled grid of cells with CuTe's hierarchy drawn as gaps and grouping lines; every picture is made of these.

A mode of shape ``(2,4)`` spans 8 rows (or columns): a gap with a line in it separates each group of 2, and a wider
gap with a thicker line each group of 8. Deeper nesting gets wider gaps, so ``((2,2),4)`` shows three levels, and
the groups stand apart at 100% zoom.

>>> from cutecourse.viz.svg import Canvas
>>> c = Canvas(200, 100)
>>> draw_grid(c, 20, 20, 2, (2, 2), 20, 20, lambda r, k: Cell(str(r + 2 * k), "#fff", f"({r},{k})"))
(85.0, 40.0)
>>> c.finish().count('class="cell"')
8
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Optional

from cutecourse.layout import IntTuple
from cutecourse.layout.inttuple import leaves, product

from .svg import Canvas

__all__ = ["Cell", "draw_grid", "cell_size"]

_GROUP_COLOUR = "#333"  # grouping lines: darker than the cells' 0.5 px borders


@dataclass
class Cell:
    """What one grid cell shows: its label, fill, hover text and ``data-*`` attributes (for tests and tools)."""

    label: str
    fill: str
    tooltip: str
    data: dict[str, str] = field(default_factory=dict)
    strong: bool = False  # drawn with a thick outline (a highlighted access, a looked-up coordinate)
    faded: bool = False   # drawn pale (outside a highlighted access)


def cell_size(cols: int, label_chars: int, font: float = 11, widest: float = 1100) -> float:
    """A cell width that fits ``label_chars`` characters and keeps ``cols`` columns under ``widest`` pixels."""
    need = label_chars * font * 0.62 + 6
    return max(need, min(40.0, widest / max(cols, 1)))


def _group_lines(shape: IntTuple) -> list[tuple[int, float]]:
    """``(every, width)``: a line every ``every`` rows/columns, thicker for outer levels of the mode."""
    out, every = [], 1
    for level, s in enumerate(leaves(shape)[:-1]):
        every *= s
        out.append((every, 2 + level))
    return out


def _positions(shape: IntTuple, size: float) -> tuple[list[float], list[tuple[float, float]]]:
    """Where each row (or column) of a mode of `shape` starts, each `size` long, with a gap before every group of
    the nested mode; and ``(centre, line width)`` of each gap, for its grouping line."""
    n = product(shape)
    gaps = {}
    for every, width in _group_lines(shape):
        for j in range(every, n, every):
            gaps[j] = width  # an outer level's boundary overrides the inner ones at the same place
    starts = []
    lines = []
    at = 0.0
    for j in range(n):
        if j in gaps:
            gap = gaps[j] + 3
            lines.append((at + gap / 2, gaps[j]))
            at += gap
        starts.append(at)
        at += size
    return starts, lines


def draw_grid(c: Canvas, x0: float, y0: float, rows_shape: IntTuple, cols_shape: IntTuple, cw: float, ch: float,
              cell: Callable[[int, int], Optional[Cell]], headers: bool = True,
              font: float = 11) -> tuple[float, float]:
    """Draw ``size(rows_shape) x size(cols_shape)`` cells at ``(x0, y0)``; return the grid's (width, height).

    ``cell(r, k)`` describes the cell in row ``r``, column ``k``; ``None`` leaves it blank (class ``empty``).
    Row and column numbers go left and above when ``headers`` is set.
    """
    ys, row_lines = _positions(rows_shape, ch)
    xs, col_lines = _positions(cols_shape, cw)
    for r, y_off in enumerate(ys):
        for k, x_off in enumerate(xs):
            x, y = x0 + x_off, y0 + y_off
            spec = cell(r, k)
            if spec is None:
                c.rect(x, y, cw, ch, fill="#fff", stroke="#bbb", stroke_width=0.5, cls="empty")
                continue
            c.cell(x, y, cw, ch, spec.label, spec.fill, spec.tooltip, spec.data, size=font,
                   stroke_width=2.5 if spec.strong else 0.5, cls="cell strong" if spec.strong else "cell",
                   opacity=0.35 if spec.faded else 1.0)
    w, h = xs[-1] + cw, ys[-1] + ch
    for y, width in row_lines:
        c.line(x0, y0 + y, x0 + w, y0 + y, width, colour=_GROUP_COLOUR)
    for x, width in col_lines:
        c.line(x0 + x, y0, x0 + x, y0 + h, width, colour=_GROUP_COLOUR)
    c.rect(x0, y0, w, h, stroke_width=2, cls="border")
    if headers:
        hf = min(font, 10)
        for r, y_off in enumerate(ys):
            c.text(x0 - 4, y0 + y_off + ch / 2, str(r), size=hf, anchor="end", cls="hdr")
        for k, x_off in enumerate(xs):
            c.text(x0 + x_off + cw / 2, y0 - 8, str(k), size=hf, cls="hdr")
    return w, h

