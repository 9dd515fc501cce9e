"""Pictures of a layout (coordinate → index) and of a thread-value layout over an (M, N) tile.

``layout(L)`` mirrors CuTe's ``print_layout``: mode 0 runs down the rows, mode 1 across the columns, and each
cell shows the index ``L(r, c)``. ``tv_layout(layout_tv, tiler_mn)`` mirrors ``print_latex_tv``: each cell of the
tile shows which thread ``T`` holds it as which value ``V``.

>>> from cutecourse.layout import make_layout
>>> p = layout(make_layout((4, 8), stride=(8, 1)))
>>> p.svg.count('class="cell"')
32
"""

from __future__ import annotations

from typing import Any, Callable, Iterable, Optional

from cutecourse.hw.tile import Coord, LayoutLike, as_layout, grid_crd, grid_modes
from cutecourse.layout import ComposedLayout, Layout
from cutecourse.layout.inttuple import IntTuple, product, product_each, to_str

from .grid import Cell, cell_size, draw_grid
from .svg import Canvas, Picture, check_size, index_colour, thread_colour

__all__ = ["layout", "tv_layout", "draw_tv", "TOP", "LEFT", "PAD"]

TOP = 48  # the margins of a grid picture: the title above, the row labels left, a pad right and below
LEFT = 34
PAD = 12


def layout(L: LayoutLike, color: Optional[Callable[[int], str]] = None, title: Optional[str] = None,
           highlight: Iterable[Coord] = ()) -> Picture:
    """Draw ``L``: one cell per coordinate, numbered with its index and coloured by index.

    ``L`` is a Layout, a ComposedLayout (e.g. a swizzled layout) or its text (``"(4,8):(8,1)"``). Rank 1 draws
    as one row; rank 2 as a grid, mode 0 = rows, mode 1 = columns; hierarchical modes get grouping lines.
    ``color(index)`` returns a CSS colour to replace the default colouring. Cells whose coordinate is in
    ``highlight`` (an int for rank 1, ``(row, col)`` for rank 2) get a thick outline. Hovering a cell shows
    ``coordinate → index``. Raises ValueError for rank > 2 or more than ``MAX_CELLS`` cells.

    >>> p = layout("((2,2),4):((1,8),2)", title="hierarchical rows")
    >>> p.svg.count('class="cell"'), p.svg.count('class="group"')
    (16, 1)
    """
    L = as_layout(L, "viz.layout")
    rows_shape, cols_shape = grid_modes(L, "viz.layout")
    n = L.size()
    check_size(n, f"layout {L}", "viz.layout")
    fill = color or index_colour
    marked = set(highlight)
    rows, cols = product(rows_shape), product(cols_shape)

    def cell(r: int, k: int) -> Cell:
        crd = grid_crd(rows_shape, r, k)
        idx = L(crd)
        return Cell(str(idx), fill(idx), f"{to_str(crd)} → {idx}", {"crd": to_str(crd), "idx": str(idx)},
                    strong=crd in marked)

    label_chars = max(len(str(L(grid_crd(rows_shape, r, k)))) for r in (0, rows - 1) for k in (0, cols - 1))
    cw = cell_size(cols, max(label_chars, 2))
    c = Canvas(LEFT + cols * cw + PAD, TOP + rows * cw + PAD)
    c.text(LEFT, 14, title if title is not None else str(L), size=13, anchor="start", cls="title", weight="bold")
    draw_grid(c, LEFT, TOP, rows_shape, cols_shape, cw, cw, cell)
    return Picture(c.finish(), title or str(L))


def _tile(tiler_mn: Any, fn: str) -> tuple[int, int]:
    if isinstance(tiler_mn, Layout):
        tiler_mn = product_each(tiler_mn.shape)
    if (isinstance(tiler_mn, tuple) and len(tiler_mn) == 2
            and all(isinstance(x, int) and not isinstance(x, bool) and x > 0 for x in tiler_mn)):
        return tiler_mn
    raise ValueError(f"{fn}: tiler_mn must be (M, N), two positive ints, got {tiler_mn!r}; make_layout_tv "
                     f"returns (tiler_mn, layout_tv), so call tv_layout(layout_tv, tiler_mn)")


def draw_tv(c: Canvas, x0: float, y0: float, layout_tv: Layout, mn: tuple[IntTuple, IntTuple], cw: float, ch: float,
            fn: str, transpose: bool = False, font: float = 9, lane: Optional[int] = None,
            mark: Optional[tuple[int, int]] = None) -> None:
    """Draw the ``T<t> V<v>`` cells of ``layout_tv`` over an ``mn`` tile (``transpose``: N down, M across).

    A mode of ``mn`` given as a shape, e.g. ``((8, 2), 16)``, is drawn with its groups apart (every 8 rows here).
    ``lane``: that thread's cells stay bright and every other thread's fade; ``mark``: the ``(m, n)`` cell gets a
    thick outline, and stays bright."""
    M, N = product(mn[0]), product(mn[1])
    if layout_tv.rank != 2:
        raise ValueError(f"{fn}: layout_tv must have rank 2, (thread, value) -> offset, got {layout_tv}")
    owner: dict[int, tuple[int, int]] = {}
    for v in range(product(layout_tv.shape[1])):
        for t in range(product(layout_tv.shape[0])):
            i = layout_tv((t, v))
            if not 0 <= i < M * N:
                raise ValueError(f"{fn}: layout_tv {layout_tv} maps (T{t}, V{v}) to offset {i}, outside the "
                                 f"{M}x{N} tile; check the argument order: tv_layout(layout_tv, tiler_mn)")
            owner.setdefault(i, (t, v))  # a value held by several threads (stride 0) shows its first owner

    def cell(r: int, k: int) -> Optional[Cell]:
        m, n = (k, r) if transpose else (r, k)
        tv = owner.get(m + n * M)
        if tv is None:
            return None
        t, v = tv
        return Cell(f"T{t} V{v}", thread_colour(t), f"({m},{n}) ← T{t} V{v}",
                    {"crd": f"({m},{n})", "t": str(t), "v": str(v)}, strong=(m, n) == mark,
                    faded=lane is not None and t != lane and (m, n) != mark)

    draw_grid(c, x0, y0, mn[1] if transpose else mn[0], mn[0] if transpose else mn[1], cw, ch, cell, font=font)


def tv_layout(layout_tv: LayoutLike, tiler_mn: Any, title: Optional[str] = None) -> Picture:
    """Draw a thread-value layout over its (M, N) tile: each cell reads ``T<t> V<v>``, coloured by thread.

    Arguments in CuTe's order, ``print_latex_tv(layout_tv, tile_mn)``: ``layout_tv`` maps ``(thread, value)``
    to a column-major offset ``m + n*M`` in the tile; ``tiler_mn`` is ``(M, N)``. ``make_layout_tv`` returns
    the pair the other way round, ``(tiler_mn, layout_tv)``, so reverse it: ``tv_layout(*make_layout_tv(thr,
    val)[::-1])``. Tile cells no thread holds are left blank.

    >>> from cutecourse.layout import make_layout, make_layout_tv
    >>> tiler_mn, tv = make_layout_tv(make_layout((4, 8), stride=(8, 1)), make_layout((1, 4)))
    >>> tv_layout(tv, tiler_mn).svg.count('class="cell"')
    128
    """
    if isinstance(layout_tv, tuple) and isinstance(tiler_mn, (Layout, str)):
        raise ValueError(f"viz.tv_layout: got (tiler_mn, layout_tv) = ({layout_tv!r}, {tiler_mn}); the order is "
                         f"tv_layout(layout_tv, tiler_mn), as in CuTe's print_latex_tv")
    L = as_layout(layout_tv, "viz.tv_layout", "layout_tv")
    if isinstance(L, ComposedLayout):
        raise ValueError(f"viz.tv_layout: layout_tv must be a plain Layout, got the composed layout {L}")
    M, N = _tile(tiler_mn, "viz.tv_layout")
    check_size(M * N, f"the {M}x{N} tile", "viz.tv_layout")
    check_size(L.size(), f"layout_tv {L}", "viz.tv_layout")
    cw, ch = cell_size(N, 8, font=9), 26
    c = Canvas(LEFT + N * cw + PAD, TOP + M * ch + PAD)
    c.text(LEFT, 14, title if title is not None else f"{L} over {M}x{N}", size=13, anchor="start",
           cls="title", weight="bold")
    draw_tv(c, LEFT, TOP, L, (M, N), cw, ch, "viz.tv_layout")
    return Picture(c.finish(), title or f"tv {L}")
