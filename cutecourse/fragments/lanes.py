"""Lane tables of the Tensor Core fragments, read off the atoms' TV layouts (:mod:`cutecourse.fragments.atoms`), and
simulators of ldmatrix / stmatrix on data: what a GPU register dump must show (tests/gpu/test_fragments_gpu.py).

Every table is a numpy array computed from a layout, never typed in:

- ``coords(layout_tv, shape)[t, v]``: the (row, column) that thread ``t`` holds in value ``v``;
- ``owners(layout_tv, shape)[row, column]``: the (thread, value) that holds a cell (-1 where none does);
- ``address_lanes(atom)[j, r]``: the lane whose address ldmatrix reads as row ``r`` of matrix ``j``;
- ``register_elements(atom)[t, j, h]``: the (matrix, row, column) in half ``h`` of lane ``t``'s register ``j``.

>>> from cutecourse.fragments import ldmatrix, mma_atom
>>> address_lanes(ldmatrix(4))[1].tolist()          # matrix 1's rows come from lanes 8-15
[8, 9, 10, 11, 12, 13, 14, 15]
>>> register_elements(ldmatrix(1))[5, 0].tolist()   # lane 5: row 1, columns 2 and 3 of matrix 0
[[0, 1, 2], [0, 1, 3]]
"""

from __future__ import annotations

from typing import Any

import numpy as np

from cutecourse.layout import Layout

from .atoms import CopyAtom, MmaAtom

__all__ = ["coords", "owners", "mma_fragments", "address_lanes", "register_elements", "simulate_ldmatrix",
           "simulate_stmatrix", "MATRIX_ROWS"]  # cutecourse.fragments._LANES lists the same names

#: An 8 x 8 matrix of 16-bit elements: 8 rows of 16 bytes, one row address per lane.
MATRIX_ROWS = 8


def _table(layout_tv: Layout, fn: str) -> np.ndarray:
    """``layout_tv((t, v))`` for every thread t and value v, as an int array (threads, values)."""
    if not isinstance(layout_tv, Layout) or layout_tv.rank != 2:
        raise ValueError(f"{fn}: layout_tv must be a rank-2 Layout (thread, value) -> index, got {layout_tv!r}")
    threads, values = layout_tv[0].size(), layout_tv[1].size()
    return np.array([[layout_tv((t, v)) for v in range(values)] for t in range(threads)], dtype=np.int64)


def _shape(shape: Any, fn: str) -> tuple[int, int]:
    if (isinstance(shape, tuple) and len(shape) == 2
            and all(isinstance(s, int) and not isinstance(s, bool) and s > 0 for s in shape)):
        return shape
    raise ValueError(f"{fn}: shape must be (rows, columns), two positive ints, got {shape!r}")


def coords(layout_tv: Layout, shape: tuple[int, int]) -> np.ndarray:
    """(threads, values, 2): the (row, column) of each (thread, value) in a column-major `shape` tile.

    >>> from cutecourse.fragments import mma_atom
    >>> coords(mma_atom(16).layout_a, (16, 16))[0].tolist()   # lane 0's eight A values
    [[0, 0], [0, 1], [8, 0], [8, 1], [0, 8], [0, 9], [8, 8], [8, 9]]
    """
    rows, cols = _shape(shape, "coords")
    index = _table(layout_tv, "coords")
    if index.min() < 0 or index.max() >= rows * cols:
        raise ValueError(f"coords: layout_tv {layout_tv} reaches index {index.max()}, outside the {rows}x{cols} tile; "
                         f"is shape (M, K) for A, (N, K) for B, (M, N) for C?")
    return np.stack([index % rows, index // rows], axis=-1)


def owners(layout_tv: Layout, shape: tuple[int, int]) -> np.ndarray:
    """(rows, columns, 2): the (thread, value) holding each cell, the lowest thread where several do (a stride-0
    mode, e.g. the warps of a TiledMMA that share A), (-1, -1) where none does."""
    rows, cols = _shape(shape, "owners")
    at = coords(layout_tv, (rows, cols))
    out = np.full((rows, cols, 2), -1, dtype=np.int64)
    threads, values = at.shape[:2]
    for t in reversed(range(threads)):  # lower threads written last, so they win
        for v in range(values):
            out[at[t, v, 0], at[t, v, 1]] = (t, v)
    return out


def mma_fragments(atom: MmaAtom) -> dict[str, np.ndarray]:
    """Per operand of an mma.sync atom, ``coords``: A (m, k), B (n, k), C (m, n) of each lane's values. Value ``v``
    of A or B is half ``v % 2`` of 32-bit register ``v // 2`` (PTX's a0, a1, ... in order); C's are fp32, one per
    register.

    >>> from cutecourse.fragments import mma_atom
    >>> mma_fragments(mma_atom(16))["C"][5].tolist()
    [[1, 2], [1, 3], [9, 2], [9, 3]]
    """
    if not isinstance(atom, MmaAtom) or atom.layout_a is None or atom.layout_b is None:
        raise ValueError(f"mma_fragments: atom must be an mma.sync MmaAtom (fragments.mma_atom(16)), got {atom!r}")
    m, n, k = atom.shape_mnk
    return {"A": coords(atom.layout_a, (m, k)), "B": coords(atom.layout_b, (n, k)),
            "C": coords(atom.layout_c, (m, n))}


def _element(index: np.ndarray) -> np.ndarray:
    """(..., 3) of (matrix, row, column) for element indices of the stacked 8 x 8 matrices."""
    per = MATRIX_ROWS * MATRIX_ROWS
    return np.stack([index // per, index % per // MATRIX_ROWS, index % MATRIX_ROWS], axis=-1)


def _copy_atom(atom: Any, fn: str) -> CopyAtom:
    if not isinstance(atom, CopyAtom):
        raise ValueError(f"{fn}: atom must be a CopyAtom (fragments.ldmatrix(4) or fragments.stmatrix(4)), got "
                         f"{atom!r}")
    return atom


def address_lanes(atom: CopyAtom) -> np.ndarray:
    """(num_matrices, 8): the lane whose shared-memory address is row ``r`` of matrix ``j``, from the rows side of
    the atom (ldmatrix's source, stmatrix's destination): the first lane whose value 0 is that row's first element.
    The lanes past ``8 * num_matrices`` repeat earlier rows (stride 0): the hardware ignores their addresses."""
    atom = _copy_atom(atom, "address_lanes")
    first = _table(atom.layout_rows, "address_lanes")[:, 0]
    out = np.full((atom.num_matrices, MATRIX_ROWS), -1, dtype=np.int64)
    for lane in reversed(range(first.size)):
        j, r, c = _element(first[lane])
        if c == 0:
            out[j, r] = lane
    return out


def register_elements(atom: CopyAtom) -> np.ndarray:
    """(32, num_matrices, 2, 3): the (matrix, row, column) of half ``h`` (the low 16 bits first) of register ``j`` of
    each lane, from the registers side of the atom (ldmatrix's destination, stmatrix's source)."""
    atom = _copy_atom(atom, "register_elements")
    index = _table(atom.layout_registers, "register_elements")  # (32, 2 * num_matrices): value = 2 * register + half
    return _element(index.reshape(index.shape[0], atom.num_matrices, 2))


def _rows_in(rows: Any, fn: str) -> np.ndarray:
    rows = np.asarray(rows)
    if rows.ndim != 2 or rows.shape[1] != MATRIX_ROWS or rows.shape[0] < 1:
        raise ValueError(f"{fn}: rows must be (lanes, 8): the eight 16-bit values at each lane's address, got shape "
                         f"{rows.shape}")
    return rows


def simulate_ldmatrix(rows: Any, num_matrices: int = 4, transpose: bool = False) -> np.ndarray:
    """What each lane's registers hold after ``ldmatrix.x{num_matrices}[.trans]``: (32, num_matrices, 2), where
    ``rows[lane]`` are the eight 16-bit values at the address that lane gives (only the first ``8 * num_matrices``
    lanes' addresses are read).

    >>> import numpy as np
    >>> rows = np.arange(32 * 8).reshape(32, 8)       # lane i's row holds 8i .. 8i + 7
    >>> simulate_ldmatrix(rows, 1)[5].tolist(), simulate_ldmatrix(rows, 1, transpose=True)[5].tolist()
    ([[10, 11]], [[17, 25]])
    """
    from .atoms import ldmatrix

    atom = ldmatrix(num_matrices, transpose)
    lanes = address_lanes(atom)
    rows = _rows_in(rows, "simulate_ldmatrix")
    if rows.shape[0] <= lanes.max():
        raise ValueError(f"simulate_ldmatrix: .x{num_matrices} reads the rows of lanes 0-{lanes.max()}; rows has "
                         f"{rows.shape[0]}")
    where = register_elements(atom)
    return rows[lanes[where[..., 0], where[..., 1]], where[..., 2]]


def simulate_stmatrix(registers: Any, num_matrices: int = 4, transpose: bool = False) -> np.ndarray:
    """What ``stmatrix.x{num_matrices}[.trans]`` writes: (8 * num_matrices, 8), row ``i`` being the eight 16-bit
    values stored at lane ``i``'s address, from ``registers`` (32, num_matrices, 2) of the warp. ldmatrix then reads
    them back unchanged: ``simulate_ldmatrix(simulate_stmatrix(r, x, t), x, t) == r``."""
    from .atoms import stmatrix

    registers = np.asarray(registers)
    if registers.shape != (32, num_matrices, 2):
        raise ValueError(f"simulate_stmatrix: registers must be (32, {num_matrices}, 2): each lane's {num_matrices} "
                         f"registers of two 16-bit halves, got shape {registers.shape}")
    atom = stmatrix(num_matrices, transpose)
    lanes = address_lanes(atom)
    out = np.zeros((MATRIX_ROWS * num_matrices, MATRIX_ROWS), dtype=registers.dtype)
    where = register_elements(atom)
    out[lanes[where[..., 0], where[..., 1]], where[..., 2]] = registers
    return out
