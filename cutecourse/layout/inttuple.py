"""Integer tuples (``IntTuple``): an ``int`` or a (possibly nested) tuple of them.

Shapes, strides, coordinates and orders are all int-tuples.  Every function here
is small, pure and recursive; none of them needs a :class:`Layout`.

>>> flatten((2, (3, 4)))
(2, 3, 4)
>>> product((2, (3, 4)))
24
>>> idx2crd(13, (4, (2, 3)))
(1, (1, 1))
"""

from __future__ import annotations

from typing import Any, Union

IntTuple = Union[int, tuple]

#: What ``cutecourse.layout`` re-exports; the rest are helpers for the other modules.
__all__ = ["IntTuple", "congruent", "compatible", "product", "product_each", "prefix_product", "inner_product"]

# Deep enough for any realistic CuTe layout, shallow enough that malformed
# (e.g. self-nesting) input is rejected before Python's recursion limit.
MAX_DEPTH = 32


def is_int(x: Any) -> bool:
    """True for a Python int (bool excluded: ``True`` is not a shape)."""
    return type(x) is int or (isinstance(x, int) and not isinstance(x, bool))


def is_tuple(x: Any) -> bool:
    """True for a tuple (lists are not int-tuples)."""
    return isinstance(x, tuple)


def is_inttuple(x: Any, _d: int = 0) -> bool:
    """True when ``x`` is an int or a nested tuple of ints (empty tuples allowed)."""
    if is_int(x):
        return True
    if not isinstance(x, tuple) or _d > MAX_DEPTH:
        return False
    return all(is_inttuple(a, _d + 1) for a in x)


def flatten(t: IntTuple) -> IntTuple:
    """Leaves of ``t`` in order; an int stays an int.

    >>> flatten(((1, 2), 3))
    (1, 2, 3)
    """
    if isinstance(t, tuple):
        out: list = []
        _flat_into(t, out)
        return tuple(out)
    return t


def _flat_into(t: tuple, out: list) -> None:
    for a in t:
        if isinstance(a, tuple):
            _flat_into(a, out)
        else:
            out.append(a)


def leaves(t: IntTuple) -> tuple:
    """Leaves of ``t`` as a tuple, also for a bare int."""
    return flatten(t) if isinstance(t, tuple) else (t,)


def product(t: IntTuple) -> int:
    """Product of all leaves (1 for an empty tuple).

    >>> product((4, (2, 3)))
    24
    """
    if isinstance(t, tuple):
        p = 1
        for a in t:
            p *= product(a) if isinstance(a, tuple) else a
        return p
    return t


def tuple_sum(t: IntTuple) -> int:
    """Sum of all leaves."""
    if isinstance(t, tuple):
        return sum(tuple_sum(a) for a in t)
    return t


def inner_product(a: IntTuple, b: IntTuple) -> int:
    """Sum of the products of corresponding leaves of congruent ``a`` and ``b``.

    >>> inner_product((2, (3, 4)), (1, (2, 6)))
    32
    """
    if isinstance(a, tuple):
        return sum(inner_product(x, y) for x, y in zip(a, b))
    return a * b


def product_each(t: IntTuple) -> IntTuple:
    """Product of each top-level mode: ``((2,2),3) -> (4,3)``."""
    if isinstance(t, tuple):
        return tuple(product(a) for a in t)
    return t


def prefix_product(t: IntTuple, init: int = 1) -> IntTuple:
    """Exclusive colexicographic prefix product, congruent with ``t``.

    >>> prefix_product((2, (3, 4)))
    (1, (2, 6))
    """
    if isinstance(t, tuple):
        out = []
        for a in t:
            out.append(prefix_product(a, init))
            init *= product(a)
        return tuple(out)
    return init


def compact_left_strides(shape: IntTuple, init: int = 1) -> IntTuple:
    """Column-major (LayoutLeft) strides; size-1 modes get stride 0 like CuTe.

    >>> compact_left_strides((1, (2, 1, 3)))
    (0, (1, 0, 2))
    """
    if isinstance(shape, tuple):
        out = []
        for a in shape:
            out.append(compact_left_strides(a, init))
            init *= product(a)
        return tuple(out)
    return 0 if shape == 1 else init


def shape_div(a: IntTuple, b: int) -> IntTuple:
    """CuTe ``shape_div``: divide ``a`` by ``b`` mode by mode, consuming ``b``.

    For ints it is ``a // b`` when ``b`` divides ``a`` and 1 when ``a`` divides
    ``b``; callers check divisibility first (CuTe static_asserts it).

    >>> shape_div((4, 6), 8)
    (1, 3)
    """
    if isinstance(a, tuple):
        out = []
        for x in a:
            out.append(shape_div(x, b))
            b = shape_div(b, product(x))
        return tuple(out)
    q = a // b
    return q if q != 0 else 1


def ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def congruent(a: IntTuple, b: IntTuple) -> bool:
    """True when ``a`` and ``b`` have the same tuple profile.

    >>> congruent((1, (2, 3)), (4, (5, 6))), congruent((1, 2), (1, (2, 3)))
    (True, False)
    """
    if isinstance(a, tuple):
        return isinstance(b, tuple) and len(a) == len(b) and all(congruent(x, y) for x, y in zip(a, b))
    return not isinstance(b, tuple)


def compatible(a: IntTuple, b: IntTuple) -> bool:
    """True when shape ``b`` refines shape ``a``: same size, and each int of
    ``a`` matches a sub-tree of ``b`` with that size (coordinates of ``a`` can
    index ``b``).

    >>> compatible(24, (4, (2, 3))), compatible((4, 6), (4, (2, 3))), compatible((6, 4), (4, (2, 3)))
    (True, True, False)
    """
    if isinstance(a, tuple):
        return isinstance(b, tuple) and len(a) == len(b) and all(compatible(x, y) for x, y in zip(a, b))
    return a == product(b)


def elem_scale(a: IntTuple, b: IntTuple) -> IntTuple:
    """Leaf-wise product of congruent ``a`` and ``b``."""
    if isinstance(a, tuple):
        return tuple(elem_scale(x, y) for x, y in zip(a, b))
    return a * b


def zero_like(t: IntTuple) -> IntTuple:
    if isinstance(t, tuple):
        return tuple(zero_like(a) for a in t)
    return 0


def depth(t: IntTuple) -> int:
    """Nesting depth: 0 for an int, 1 for a flat tuple."""
    if isinstance(t, tuple):
        return 1 + max((depth(a) for a in t), default=0)
    return 0


def rank(t: IntTuple) -> int:
    """Number of top-level modes (1 for an int)."""
    return len(t) if isinstance(t, tuple) else 1


def to_str(t: IntTuple) -> str:
    """CuTe's compact print form: ``(4,(2,3))``."""
    if isinstance(t, tuple):
        return "(" + ",".join(to_str(a) for a in t) + ")"
    return str(t)


def crd2idx(crd: IntTuple, shape: IntTuple, stride: IntTuple) -> int:
    """Index of coordinate ``crd`` in ``(shape, stride)``.

    ``crd`` may be a natural (congruent) coordinate, a hierarchical one, or an
    int anywhere a shape has a tuple (it is unfolded colexicographically).
    An int past its (sub-)shape's size is unfolded like any other: the last
    mode takes the overflow, as in CuTe.  The caller checks that the ints are
    non-negative (:func:`is_coordinate`).

    >>> crd2idx(5, (4, (2, 3)), (8, (1, 2))), crd2idx((1, 4), (4, (2, 3)), (8, (1, 2))), crd2idx(7, (2, 3), (3, 1))
    (9, 12, 6)
    """
    if isinstance(crd, tuple):
        if not isinstance(shape, tuple) or len(crd) != len(shape):
            raise ValueError(f"coordinate {to_str(crd)} is not compatible with shape {to_str(shape)}")
        return sum(crd2idx(c, s, d) for c, s, d in zip(crd, shape, stride))
    if isinstance(shape, tuple):
        idx = 0
        last = len(shape) - 1
        for i, (s, d) in enumerate(zip(shape, stride)):
            if i == last:
                return idx + crd2idx(crd, s, d)
            n = product(s)
            idx += crd2idx(crd % n, s, d)
            crd //= n
        return idx  # empty shape: only coordinate 0
    return crd * stride


def idx2crd(idx: int, shape: IntTuple) -> IntTuple:
    """Colexicographic coordinate of ``idx`` in ``shape`` (natural, congruent).

    Past ``product(shape)`` the last mode takes the overflow, as in CuTe.

    >>> idx2crd(5, (2, 3)), idx2crd(7, (2, 3))
    ((1, 2), (1, 3))
    """
    if not isinstance(shape, tuple):
        return idx
    out = []
    for s in shape[:-1]:
        n = product(s)
        out.append(idx2crd(idx % n, s))
        idx //= n
    if shape:
        out.append(idx2crd(idx, shape[-1]))
    return tuple(out)


def is_coordinate(crd: IntTuple, shape: IntTuple) -> bool:
    """True when ``crd`` can index ``shape``: where ``crd`` is a tuple, ``shape`` is a tuple of the same
    rank, mode by mode; every int of ``crd`` is non-negative (it may exceed its sub-shape's size).

    >>> is_coordinate((1, 9), (4, (2, 3))), is_coordinate((1, -1), (4, 8)), is_coordinate((1, 2, 3), (4, 8))
    (True, False, False)
    """
    if isinstance(crd, tuple):
        return isinstance(shape, tuple) and len(crd) == len(shape) and all(
            is_coordinate(c, s) for c, s in zip(crd, shape))
    return is_int(crd) and crd >= 0
