"""One copy launcher for any 2-D shape: the tiled 128-bit step (b) where whole tiles and aligned rows allow it, the
predicated step (c) otherwise, which itself uses 128-bit vectors where rows are aligned and scalar atoms where they
are not. `route(src, dst)` says which path a pair of tensors takes.

    from cutecourse.kernels.copy import copy, route
    route(x, y)   # 'tiled, 128-bit' | 'predicated, 128-bit' | 'predicated, scalar'
    copy(x, y)    # y[:] = x
"""

from __future__ import annotations

from typing import Any

from cutecourse.kernels import copy_predicated, copy_tiled, launch


def route(src: Any, dst: Any) -> str:
    """The path `copy` takes for these tensors, from their shapes and alignment alone."""
    if copy_tiled.fits(src, dst):
        return "tiled, 128-bit"
    return "predicated, 128-bit" if launch.vector_width(src, dst) > 1 else "predicated, scalar"


def copy(src: Any, dst: Any) -> Any:
    """``dst[:] = src`` by the fastest step that fits; returns dst. The tensors are checked once."""
    config = copy_predicated.plan(src, dst)
    if copy_tiled.fits(src, dst):  # then config.vector is the full 128-bit width
        return copy_tiled.run(copy_tiled.Config(config.dtype, config.vector), src, dst)
    return copy_predicated.run(config, src, dst)
