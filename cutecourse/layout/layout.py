"""The :class:`Layout` type: a pair of congruent int-tuples ``shape:stride``.

A layout maps a coordinate in ``shape`` to an index ``sum(c_i * d_i)``.  This
module holds the class, its constructors and the structural operations that
only rearrange modes (append, group, select, slice); the algebra lives in
:mod:`cutecourse.layout.algebra`.

>>> L = make_layout((4, 8), stride=(8, 1))
>>> L, L(1, 2), L.size(), L.cosize()
((4,8):(8,1), 10, 32, 32)
"""

from __future__ import annotations

from typing import Any, Iterable, Optional, Union

from . import inttuple as it
from .inttuple import IntTuple, to_str

__all__ = [
    "Layout", "make_layout", "make_ordered_layout", "make_layout_row_major", "make_layout_col_major",
    "size", "cosize", "rank", "depth", "get", "append", "prepend", "group_modes", "flatten", "select",
    "slice_", "slice_and_offset", "crd2idx", "idx2crd", "is_layout_like",
]


def _check_inttuple(x: Any, what: str, fn: str, positive: bool) -> IntTuple:
    """Validate and normalise (lists -> tuples) an int-tuple; O(#leaves)."""
    x = _normalise(x, what, fn, 0)
    if positive:
        bad = [v for v in it.leaves(x) if v <= 0]
        if bad:
            raise ValueError(f"{fn}: every extent in {what} must be a positive int (zero or negative "
                             f"extents are not shapes), got {what} {to_str(x)} with {bad}")
    return x


def _normalise(x: Any, what: str, fn: str, d: int) -> IntTuple:
    if it.is_int(x):
        return int(x)
    if isinstance(x, (tuple, list)) and d < it.MAX_DEPTH:
        return tuple(_normalise(a, what, fn, d + 1) for a in x)
    if d >= it.MAX_DEPTH:
        raise ValueError(f"{fn}: {what} is nested deeper than {it.MAX_DEPTH} levels")
    raise ValueError(f"{fn}: {what} must be an int or a nested tuple of ints (non-integer values "
                     f"are not allowed), got {x!r}")


def unchecked_layout(shape: IntTuple, stride: IntTuple) -> "Layout":
    """The Layout ``shape:stride`` without validation: for results of operations whose inputs were validated.

    A helper of :mod:`.algebra` (not re-exported by ``cutecourse.layout``); everyone else calls :func:`make_layout`.
    """
    lay = object.__new__(Layout)
    lay.shape = shape
    lay.stride = stride
    return lay


class Layout:
    """A CuTe layout ``shape:stride``.

    ``Layout(shape, stride=None)`` validates its arguments: ``shape`` is a
    (nested) tuple of positive ints, ``stride`` a congruent tuple of ints
    (default: compact column-major, size-1 modes get stride 0 like CuTe).

    Calling a layout maps a coordinate to an index: an int (1-D coordinate), a
    hierarchical coordinate or a natural (congruent) one; a coordinate with
    ``None`` wildcards returns the slice, like ``layout[...]``.

    >>> L = Layout((4, (2, 3)), (8, (1, 2)))
    >>> L(5), L((1, 4)), L((1, (1, 2))), L[1], L[(None, 3)]
    (9, 12, 13, (2,3):(1,2), (4):(8))
    """

    __slots__ = ("shape", "stride")

    def __init__(self, shape: IntTuple, stride: Optional[IntTuple] = None) -> None:
        shape = _check_inttuple(shape, "shape", "Layout", positive=True)
        if stride is None:
            stride = it.compact_left_strides(shape)
        else:
            stride = _check_inttuple(stride, "stride", "Layout", positive=False)
            if not it.congruent(shape, stride):
                raise ValueError(f"Layout: shape and stride must be congruent, got shape {to_str(shape)} "
                                 f"and stride {to_str(stride)}")
        self.shape = shape
        self.stride = stride

    # --- printing, equality -------------------------------------------------
    def __str__(self) -> str:
        return to_str(self.shape) + ":" + to_str(self.stride)

    __repr__ = __str__

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Layout) and self.shape == other.shape and self.stride == other.stride

    def __hash__(self) -> int:
        return hash((self.shape, self.stride))

    # --- queries ------------------------------------------------------------
    def size(self) -> int:
        """Number of coordinates: product of the shape."""
        return it.product(self.shape)

    def cosize(self) -> int:
        """One past the largest index: ``1 + sum((s-1)*|d|)`` (``L(size-1)+1`` for d >= 0)."""
        return _cosize(self.shape, self.stride)

    @property
    def rank(self) -> int:
        """Number of top-level modes (an int shape has rank 1)."""
        return it.rank(self.shape)

    @property
    def depth(self) -> int:
        """Nesting depth of the shape (0 for an int shape)."""
        return it.depth(self.shape)

    def __len__(self) -> int:
        return it.rank(self.shape)

    def __iter__(self):
        if isinstance(self.shape, tuple):
            for s, d in zip(self.shape, self.stride):
                yield unchecked_layout(s, d)
        else:
            yield self

    # --- evaluation ---------------------------------------------------------
    def __call__(self, *crd: Any) -> Any:
        c = crd[0] if len(crd) == 1 else crd
        if _has_none(c):
            return slice_(self, c)
        return crd2idx(c, self)

    def __getitem__(self, key: Any) -> "Layout":
        if isinstance(key, tuple) or key is None:
            return slice_(self, key)
        if not it.is_int(key):
            raise ValueError(f"Layout[]: mode index must be an int or a coordinate with None, got {key!r}")
        if not isinstance(self.shape, tuple):
            if key in (0, -1):
                return self
            raise ValueError(f"Layout[]: mode {key} is out of range for rank-1 layout {self}")
        if not -len(self.shape) <= key < len(self.shape):
            raise ValueError(f"Layout[]: mode {key} is out of range for rank-{len(self.shape)} layout {self}")
        return unchecked_layout(self.shape[key], self.stride[key])

    def idx2crd(self, idx: int) -> IntTuple:
        """Natural coordinate of the ``idx``-th element (colexicographic)."""
        return idx2crd(idx, self.shape)


def _cosize(shape: IntTuple, stride: IntTuple) -> int:
    if isinstance(shape, tuple):
        return 1 + sum(_cosize(s, d) - 1 for s, d in zip(shape, stride))
    return 1 + (shape - 1) * abs(stride)


def _has_none(c: Any) -> bool:
    if c is None:
        return True
    return isinstance(c, tuple) and any(_has_none(a) for a in c)


def is_layout_like(x: Any) -> bool:
    """True for a :class:`Layout` (or a ComposedLayout, which quacks alike)."""
    return isinstance(x, Layout) or hasattr(x, "outer")


# --- construction --------------------------------------------------------------

def make_layout(shape: Union[IntTuple, Iterable[Layout]], stride: Optional[IntTuple] = None) -> Layout:
    """Layout from a shape and stride (default compact column-major / LayoutLeft).

    Definition: ``L(c) = sum(c_i * d_i)``; default strides are the exclusive
    prefix product of the shape, with stride 0 for size-1 modes.
    A tuple of Layouts concatenates them as modes.
    Preconditions: shape leaves are positive ints; stride is congruent to shape.

    >>> print(make_layout((4, 8), stride=(8, 1)), make_layout((1, 4)), make_layout((2, (1, 3))))
    (4,8):(8,1) (1,4):(0,1) (2,(1,3)):(1,(0,2))
    >>> print(make_layout((make_layout(2), make_layout((3, 4)))))
    (2,(3,4)):(1,(1,3))
    """
    if isinstance(shape, Layout) and stride is None:
        return shape
    if isinstance(shape, (tuple, list)) and shape and all(isinstance(x, Layout) for x in shape):
        if stride is not None:
            raise ValueError("make_layout: stride must be None when shape is a tuple of Layouts")
        return unchecked_layout(tuple(x.shape for x in shape), tuple(x.stride for x in shape))
    shape = _check_inttuple(shape, "shape", "make_layout", positive=True)
    if stride is None:
        return unchecked_layout(shape, it.compact_left_strides(shape))
    stride = _check_inttuple(stride, "stride", "make_layout", positive=False)
    if not it.congruent(shape, stride):
        raise ValueError(f"make_layout: shape and stride must be congruent, got shape {to_str(shape)} "
                         f"and stride {to_str(stride)}")
    return unchecked_layout(shape, stride)


def make_ordered_layout(shape: IntTuple, order: IntTuple) -> Layout:
    """Compact layout whose modes are laid out in increasing ``order``.

    Definition: the mode with the smallest order value gets stride 1, the next
    gets the product of the shapes before it, ...; size-1 modes get stride 0.
    Preconditions: ``order`` is congruent to ``shape`` and its leaves are
    distinct non-negative ints.

    >>> print(make_ordered_layout((4, 8, 2), order=(2, 0, 1)), make_ordered_layout((4, (2, 3), 2), (2, (0, 3), 1)))
    (4,8,2):(16,1,8) (4,(2,3),2):(4,(1,16),2)
    """
    shape = _check_inttuple(shape, "shape", "make_ordered_layout", positive=True)
    order = _check_inttuple(order, "order", "make_ordered_layout", positive=False)
    if not it.congruent(shape, order):
        raise ValueError(f"make_ordered_layout: order must be congruent to shape, got shape {to_str(shape)} "
                         f"and order {to_str(order)}")
    fo = it.leaves(order)
    if len(set(fo)) != len(fo) or min(fo) < 0:
        raise ValueError(f"make_ordered_layout: order leaves must be distinct non-negative ints, got "
                         f"order {to_str(order)}")
    fs = it.leaves(shape)
    strides = [0] * len(fs)
    cur = 1
    for i in sorted(range(len(fs)), key=fo.__getitem__):
        if fs[i] != 1:
            strides[i] = cur
            cur *= fs[i]
    return unchecked_layout(shape, _unflatten(strides, shape))


def _unflatten(flat: list, profile: IntTuple) -> IntTuple:
    pos = [0]

    def rec(p):
        if isinstance(p, tuple):
            return tuple(rec(a) for a in p)
        v = flat[pos[0]]
        pos[0] += 1
        return v
    return rec(profile)


def make_layout_col_major(shape: IntTuple) -> Layout:
    """Compact column-major (LayoutLeft) layout: first leaf fastest.

    >>> print(make_layout_col_major((4, 8)))
    (4,8):(1,4)
    """
    return make_layout(shape)


def make_layout_row_major(shape: IntTuple) -> Layout:
    """Compact row-major (LayoutRight) layout: last leaf fastest; size-1 modes get stride 0.

    >>> print(make_layout_row_major((4, (2, 8))))
    (4,(2,8)):(16,(8,1))
    """
    shape = _check_inttuple(shape, "shape", "make_layout_row_major", positive=True)
    n = len(it.leaves(shape))
    return make_ordered_layout(shape, _unflatten(list(range(n - 1, -1, -1)), shape))


# --- queries as functions (DSL names) --------------------------------------------

def _as_tuple_obj(obj: Any) -> tuple:
    if isinstance(obj, Layout):
        return obj.shape, obj.stride
    return obj, None


def get(obj: Any, mode: Union[int, Iterable[int]] = ()) -> Any:
    """Nested mode access: ``get(L, mode=[1, 0])`` is ``L[1][0]``.

    >>> print(get(make_layout((4, (2, 3))), mode=[1, 0]))
    2:4
    """
    modes = (mode,) if it.is_int(mode) else tuple(mode)
    for m in modes:
        if isinstance(obj, Layout):
            obj = obj[m]
        elif isinstance(obj, tuple):
            if not -len(obj) <= m < len(obj):
                raise ValueError(f"get: mode {m} out of range for {to_str(obj)}")
            obj = obj[m]
        elif m in (0, -1):
            pass
        else:
            raise ValueError(f"get: mode {m} out of range for {obj!r}")
    return obj


def size(obj: Any, mode: Union[int, Iterable[int]] = ()) -> int:
    """Number of elements of a Layout (or product of an int-tuple), optionally of a sub-mode.

    >>> size(make_layout((4, (2, 3)))), size(make_layout((4, (2, 3))), mode=[1])
    (24, 6)
    """
    obj = get(obj, mode)
    if hasattr(obj, "size") and callable(obj.size):
        return obj.size()
    return it.product(obj)


def cosize(obj: Any, mode: Union[int, Iterable[int]] = ()) -> int:
    """Codomain size of a layout: ``L(size-1) + 1`` for non-negative strides.

    >>> cosize(make_layout((4, (2, 3)), stride=(8, (1, 2))))
    30
    """
    return get(obj, mode).cosize()


def rank(obj: Any, mode: Union[int, Iterable[int]] = ()) -> int:
    """Number of top-level modes (1 for an int shape).

    >>> rank(make_layout((4, (2, 3)))), rank(make_layout(8))
    (2, 1)
    """
    obj = get(obj, mode)
    return obj.rank if is_layout_like(obj) else it.rank(obj)


def depth(obj: Any) -> int:
    """Nesting depth of the shape (0 for an int).

    >>> depth(make_layout((4, (2, 3)))), depth(make_layout(8))
    (2, 0)
    """
    return obj.depth if is_layout_like(obj) else it.depth(obj)


def crd2idx(coord: IntTuple, layout: Any) -> int:
    """Index of a coordinate (1-D int, hierarchical or natural) in a layout.

    Definition: an int is unfolded colexicographically into one coordinate per
    mode, then the leaves are dotted with the strides.  Like CuTe, an int past
    its (sub-)shape's size is unfolded too: the last mode takes the overflow,
    so ``make_layout(4)(6) == 6`` and ``(2,3):(3,1)`` at 7 is at ``(1,3)``, 6.
    Precondition: the coordinate's ints are non-negative (CuTe divides a
    negative one the C way, which means nothing) and a tuple coordinate has
    the profile of the shape where it is a tuple.

    >>> crd2idx((1, 4), make_layout((4, (2, 3)), stride=(8, (1, 2))))
    12
    >>> crd2idx(6, make_layout(4)), crd2idx(7, make_layout((2, 3), stride=(3, 1)))
    (6, 6)
    """
    if not isinstance(layout, Layout):
        if hasattr(layout, "outer"):
            return layout(coord)
        layout = make_layout(layout)
    shape = layout.shape
    if not it.is_coordinate(coord, shape):
        raise ValueError(f"crd2idx: coordinate {coord!r} cannot index layout {layout}: use non-negative ints, "
                         f"as a tuple only where the shape {to_str(shape)} has a tuple of the same rank")
    return it.crd2idx(coord, shape, layout.stride)


def idx2crd(idx: int, shape: Any) -> IntTuple:
    """Natural (colexicographic) coordinate of ``idx`` in ``shape``.

    Past ``size(shape)`` the last mode takes the overflow, as in CuTe.
    Precondition: ``idx`` is a non-negative int.

    >>> idx2crd(13, (4, (2, 3))), idx2crd(7, (2, 3))
    ((1, (1, 1)), (1, 3))
    """
    if isinstance(shape, Layout):
        shape = shape.shape
    if not it.is_int(idx) or idx < 0:
        raise ValueError(f"idx2crd: index {idx!r} must be a non-negative int (shape {to_str(shape)})")
    return it.idx2crd(idx, shape)


# --- mode surgery -----------------------------------------------------------------

def top_modes(layout: Layout) -> tuple:
    """(shapes, strides) as tuples of top-level modes, also for rank-1 int shapes (a helper of :mod:`.algebra`).

    >>> top_modes(make_layout((4, (2, 3)))), top_modes(make_layout(8))
    (((4, (2, 3)), (1, (4, 8))), ((8,), (1,)))
    """
    if isinstance(layout.shape, tuple):
        return layout.shape, layout.stride
    return (layout.shape,), (layout.stride,)


def _as_mode(elem: Any, fn: str) -> Layout:
    if isinstance(elem, Layout):
        return elem
    if it.is_int(elem):
        return make_layout(elem)
    raise ValueError(f"{fn}: elem must be a Layout or an int, got {elem!r}")


def append(input: Layout, elem: Any, up_to_rank: Optional[int] = None) -> Layout:
    """Append ``elem`` as a new last mode (or pad with copies of it up to ``up_to_rank``).

    Precondition: ``up_to_rank``, when given, is an int.

    >>> print(append(make_layout((2, 3)), make_layout(4, stride=9)))
    (2,3,4):(1,2,9)
    >>> print(append(make_layout(2), make_layout(1), up_to_rank=3))
    (2,1,1):(1,0,0)
    """
    return _pad(input, elem, up_to_rank, "append")


def prepend(input: Layout, elem: Any, up_to_rank: Optional[int] = None) -> Layout:
    """Prepend ``elem`` as a new first mode (or pad in front up to ``up_to_rank``).

    >>> print(prepend(make_layout((2, 3)), make_layout(4, stride=9)))
    (4,2,3):(9,1,2)
    """
    return _pad(input, elem, up_to_rank, "prepend")


def _pad(input: Layout, elem: Any, up_to_rank: Optional[int], fn: str) -> Layout:
    """`append` or `prepend` (`fn`): one copy of `elem`, or as many as bring `input` up to `up_to_rank` modes."""
    e = _as_mode(elem, fn)
    s, d = top_modes(input)
    if up_to_rank is not None and not it.is_int(up_to_rank):
        raise ValueError(f"{fn}: up_to_rank must be an int, got {up_to_rank!r}")
    n = 1 if up_to_rank is None else up_to_rank - len(s)
    if n <= 0:
        return input
    if fn == "append":
        return unchecked_layout(s + (e.shape,) * n, d + (e.stride,) * n)
    return unchecked_layout((e.shape,) * n + s, (e.stride,) * n + d)


def group_modes(input: Layout, begin: int, end: Optional[int] = None) -> Layout:
    """Group modes ``[begin, end)`` into one nested mode (``end`` None: to the end; negative counts from the end).

    Precondition: ``0 <= begin <= end <= rank`` after normalising.

    >>> print(group_modes(make_layout((2, 3, 4, 5)), 1, 3))
    (2,(3,4),5):(1,(2,6),24)
    """
    s, d = top_modes(input)
    r = len(s)
    e = r if end is None else (end + r if end < 0 else end)
    b = begin + r if begin < 0 else begin
    if not (it.is_int(b) and it.is_int(e) and 0 <= b <= e <= r):
        raise ValueError(f"group_modes: need 0 <= begin <= end <= rank={r}, got begin={begin}, end={end}")
    if not isinstance(input.shape, tuple):
        return unchecked_layout(s[b:e], d[b:e])  # the DSL turns 8:1 into (8):(1), not ((8)):((1))
    return unchecked_layout(s[:b] + (s[b:e],) + s[e:], d[:b] + (d[b:e],) + d[e:])


def flatten(input: Any) -> Any:
    """Flatten the hierarchy of a layout (or int-tuple) into its leaves.

    >>> print(flatten(make_layout((2, (3, 4)))), flatten(make_layout(8)))
    (2,3,4):(1,2,6) 8:1
    """
    if isinstance(input, Layout):
        return unchecked_layout(it.flatten(input.shape), it.flatten(input.stride))
    return it.flatten(input)


def select(input: Layout, mode: Union[int, Iterable[int]]) -> Layout:
    """Layout made of the chosen top-level modes, in the given order.

    Precondition: every mode index is in ``[0, rank)``.

    >>> print(select(make_layout((2, 3, 4, 5)), mode=(3, 0)), select(make_layout((2, 3, 4)), 2))
    (5,2):(24,1) (4):(6)
    """
    s, d = top_modes(input)
    modes = (mode,) if it.is_int(mode) else tuple(mode)
    bad = [m for m in modes if not it.is_int(m) or not 0 <= m < len(s)]
    if bad:
        raise ValueError(f"select: mode indices must be in [0, {len(s)}), got {bad} for layout {input}")
    return unchecked_layout(tuple(s[m] for m in modes), tuple(d[m] for m in modes))


def _slice(c: Any, s: IntTuple, fn: str) -> tuple:
    if c is None:
        return (s,)
    if isinstance(c, tuple):
        if not isinstance(s, tuple):
            if len(c) != 1:
                raise ValueError(f"{fn}: coordinate {c!r} does not match shape {to_str(s)}")
            s = (s,)
        if len(c) != len(s):
            raise ValueError(f"{fn}: coordinate {c!r} does not match shape {to_str(s)} (rank {len(c)} vs {len(s)})")
        out: tuple = ()
        for a, b in zip(c, s):
            out += _slice(a, b, fn)
        return out
    if not it.is_int(c) or c < 0:
        raise ValueError(f"{fn}: coordinate {c!r} must be a non-negative int or None (shape {to_str(s)})")
    return ()


def _offset(c: Any, s: IntTuple, d: IntTuple) -> int:
    if c is None:
        return 0
    if isinstance(c, tuple):
        if not isinstance(s, tuple):
            s, d = (s,), (d,)
        return sum(_offset(a, b, e) for a, b, e in zip(c, s, d))
    return it.crd2idx(c, s, d)


def slice_(src: Layout, coord: Any) -> Layout:
    """Sub-layout of the modes where ``coord`` is ``None`` (the DSL's ``_``).

    Definition: modes with an int coordinate are dropped, ``None`` modes are
    kept, nested coordinates are sliced recursively and concatenated
    (``slice_`` drops the offset, see :func:`slice_and_offset`).
    Preconditions: ``coord`` matches the shape's profile; ints are non-negative.

    >>> L = make_layout((4, (2, 3)), stride=(8, (1, 2)))
    >>> print(slice_(L, (None, 0)), slice_(L, (None, (None, 1))), slice_(L, (1, 2)), slice_(L, None))
    (4):(8) (4,2):(8,1) ():() (4,(2,3)):(8,(1,2))
    """
    if coord is None:
        return src
    return unchecked_layout(_slice(coord, src.shape, "slice_"), _slice_stride(coord, src.shape, src.stride))


def _slice_stride(c: Any, s: IntTuple, d: IntTuple) -> tuple:
    if c is None:
        return (d,)
    if isinstance(c, tuple):
        if not isinstance(s, tuple):
            s, d = (s,), (d,)
        out: tuple = ()
        for a, b, e in zip(c, s, d):
            out += _slice_stride(a, b, e)
        return out
    return ()


def slice_and_offset(src: Layout, coord: Any) -> tuple:
    """``(slice_(src, coord), offset)`` where offset is ``src`` at ``coord`` with ``None`` -> 0.

    >>> slice_and_offset(make_layout((4, 8), stride=(8, 1)), (None, 3))
    ((4):(8), 3)
    """
    lay = slice_(src, coord)
    return lay, (0 if coord is None else _offset(coord, src.shape, src.stride))
