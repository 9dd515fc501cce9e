"""Pictures of CuTe: layouts, TV layouts, MMA atoms and shared-memory bank maps, as plain SVG.

Every function returns a :class:`Picture`: Jupyter draws it inline (no LaTeX), ``.svg`` is the text and
``.save(path)`` writes a file. Hovering a cell shows ``coordinate → index``. Pictures over
:data:`MAX_CELLS` cells raise ValueError. ``viz.widgets`` (ipywidgets explorers) and ``viz.plots`` (matplotlib
roofline and benchmark charts) load on first use, so ``from cutecourse import viz`` stays light. The pictures
draw models that live in :mod:`cutecourse.hw` (``bank_map`` draws :mod:`cutecourse.hw.banks`); the bank model's
names that ``bank_map`` takes and shows are importable here too.

>>> from cutecourse import viz
>>> from cutecourse.layout import make_layout
>>> viz.layout(make_layout((4, 8), stride=(8, 1))).svg.count('class="cell"')
32
>>> viz.wavefronts("(8,64):(64,1)", 16, viz.LDMATRIX_8x8)
8
"""

from __future__ import annotations

import importlib
from typing import Any

from cutecourse.hw.banks import LDMATRIX_8x8, WARP_128BIT_STORE, Access, bank_of, wavefronts

from .banks import bank_map
from .layout import layout, tv_layout
from .mma import MMA_ATOMS, mma_atom
from .svg import MAX_CELLS, Picture

__all__ = ["Picture", "MAX_CELLS", "layout", "tv_layout", "mma_atom", "MMA_ATOMS", "bank_map", "bank_of",
           "wavefronts", "Access", "LDMATRIX_8x8", "WARP_128BIT_STORE"]  # not widgets, plots: * would load them

_LAZY = ("widgets", "plots")  # they import ipywidgets / matplotlib, so only when asked for


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
