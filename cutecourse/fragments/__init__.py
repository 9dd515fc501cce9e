"""Which lane holds which element: the register fragments of ldmatrix, mma.sync, stmatrix and wgmma, derived from
CuTe's thread-value layouts with the eager algebra (numpy and :mod:`cutecourse.layout` only; any OS, no DSL).

- :mod:`.atoms`: the instructions as CuTe writes them, ``(thread, value) -> index`` layouts, and TiledMMA's tiled
  layouts (``tiled_mma``); ``str()`` of each is what the DSL prints. Pure Python.
- :mod:`.lanes`: the tables a lesson reads and a GPU test checks: a lane's coordinates, who gives each row address,
  which register gets which element, and simulators of ldmatrix / stmatrix on data. Loads numpy on first use, so
  ``import cutecourse.fragments`` (and the pictures in ``cutecourse.viz``, which draw these atoms) stay light.
- :mod:`.dump` (needs the DSL and a GPU to run): kernels that write what each lane really holds.

>>> from cutecourse import fragments
>>> fragments.coords(fragments.mma_atom(16).layout_a, (16, 16))[5].tolist()[:2]
[[1, 2], [1, 3]]
"""

from __future__ import annotations

import importlib
from typing import Any

from .atoms import *  # noqa: F403
from .atoms import __all__ as _atoms_all

#: lanes' public names, loaded (with numpy) on first use.
_LANES = ("coords", "owners", "mma_fragments", "address_lanes", "register_elements", "simulate_ldmatrix",
          "simulate_stmatrix", "MATRIX_ROWS")

__all__ = [*_atoms_all, *_LANES]


def __getattr__(name: str) -> Any:
    if name in _LANES:
        return getattr(importlib.import_module(f"{__name__}.lanes"), name)
    if name in ("lanes", "dump"):
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
