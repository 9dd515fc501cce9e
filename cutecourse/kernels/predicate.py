"""Device-side predication helpers, shared by the kernels that take any shape."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import cutlass
import cutlass.cute as cute


def per_vector(coords: cute.Tensor, shape: cute.Shape, vector: int) -> cute.Tensor:
    """One predicate per copy atom of a thread's partition of an identity tensor: is the atom's first element inside
    `shape`? Mode 0 of a partition holds the thread's values of one copy step, `vector` per atom (e.g. (V, 4): four
    atoms of V); the other modes repeat it. Whole vectors are in or out, because launchers use vectors only when the
    contiguous mode is a multiple of the vector width."""
    return per_vector_if(coords, vector, lambda c: cute.elem_less(c, shape))


def per_vector_if(coords: cute.Tensor, vector: int, inside: Callable[[Any], Any],
                  dtype: Any = cutlass.Boolean) -> cute.Tensor:
    """`per_vector` with any test of the first element's coordinate, e.g. ``lambda c: (c[0] < M) & (c[1] >= 0)``; or,
    with another `dtype`, any value of it (e.g. an Int32 count per vector)."""
    atoms = cute.size(coords, mode=[0]) // vector
    pred = cute.make_rmem_tensor(cute.make_layout((atoms, *coords.shape[1:])), dtype)
    grouped = cute.group_modes(coords, 1, cute.rank(coords))  # (values of one step, every step of this thread)
    for i in range(cute.size(pred)):  # a plain helper is not rewritten by the DSL: this loop unrolls at trace time
        pred[i] = inside(grouped[((i % atoms) * vector, i // atoms)])
    return pred
