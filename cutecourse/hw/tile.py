"""A layout read as a 2-D tile: the convention the bank model and the pictures share.

A rank-1 layout is one row; a rank-2 layout has mode 0 down the rows and mode 1 across the columns. A layout may
be given as a Layout, a ComposedLayout (e.g. a swizzled one) or its text as the DSL prints it.

>>> L = as_layout("(8,64):(64,1)", "example")
>>> grid_modes(L, "example"), L(grid_crd(8, 1, 2))
((8, 64), 66)
"""

from __future__ import annotations

from typing import Any, Union

from cutecourse.layout import ComposedLayout, Layout, parse_layout
from cutecourse.layout.inttuple import IntTuple

__all__ = ["LayoutLike", "Coord", "as_layout", "grid_modes", "grid_crd"]

LayoutLike = Union[Layout, ComposedLayout, str]
Coord = Union[int, tuple]


def as_layout(L: Any, fn: str, arg: str = "L") -> Union[Layout, ComposedLayout]:
    """``L`` as a Layout or ComposedLayout; text is parsed with ``parse_layout`` (ValueError says what is wrong)."""
    if isinstance(L, (Layout, ComposedLayout)):
        return L
    if isinstance(L, str):
        try:
            return parse_layout(L)
        except ValueError as e:
            raise ValueError(f"{fn}: {arg}={L!r} does not parse: {e}. Write it as the DSL prints it, "
                             f"e.g. '(4,8):(8,1)'") from None
    raise ValueError(f"{fn}: {arg} must be a Layout, a ComposedLayout or its text such as '(4,8):(8,1)', "
                     f"got {type(L).__name__} {L!r}")


def grid_modes(L: Union[Layout, ComposedLayout], fn: str) -> tuple[IntTuple, IntTuple]:
    """``(rows_shape, cols_shape)``: rank 1 is one row, rank 2 is mode 0 down and mode 1 across."""
    if L.rank == 1:
        return 1, L.shape
    if L.rank == 2:
        return L.shape[0], L.shape[1]
    raise ValueError(f"{fn}: takes rank-1 and rank-2 layouts, got rank {L.rank} layout {L}; group its modes "
                     f"first, e.g. group_modes(L, 1, {L.rank}), or slice it")


def grid_crd(rows_shape: IntTuple, r: int, k: int) -> Coord:
    """The layout's coordinate of row ``r``, column ``k`` of its tile: ``k`` for one row, else ``(r, k)``."""
    return k if rows_shape == 1 else (r, k)
