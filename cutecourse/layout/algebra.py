"""CuTe layout algebra: coalesce, composition, complement, inverses, divides, products.

Where the CuTe DSL returns a layout, an operation here returns the same one,
also outside the textbook preconditions where the DSL computes a result
anyway (``complement`` with strides that are no multiple of the previous
extent).  It raises ``ValueError`` naming the condition, the argument and the
offending values where the DSL raises, and where the DSL's result means
nothing: an extent-0 mode, a divide whose last tile runs past its target, a
composition, inverse or recast whose divisibility conditions fail.  The
``*_error`` functions return those messages for tests.

>>> A = make_layout((4, 8), stride=(8, 1))
>>> print(composition(A, make_layout(8, stride=4)), complement(make_layout(4, stride=2), 24))
8:1 (2,3):(1,8)
"""

from __future__ import annotations

from math import gcd
from typing import Any, Optional, Union

from . import inttuple as it
from .inttuple import IntTuple, to_str
from .layout import Layout, append, make_layout, size, top_modes, unchecked_layout

__all__ = [
    "coalesce", "filter", "filter_zeros", "composition", "complement", "right_inverse", "left_inverse",
    "logical_divide", "zipped_divide", "tiled_divide", "flat_divide",
    "logical_product", "zipped_product", "tiled_product", "flat_product", "blocked_product", "raked_product",
    "make_layout_tv", "recast_layout",
    "composition_error", "complement_error", "left_inverse_error", "divide_error", "product_error",
    "recast_error", "is_injective",
]

Tiler = Union[None, int, Layout, tuple]


def _is_composed(x: Any) -> bool:
    return hasattr(x, "outer") and hasattr(x, "inner")


def _as_layout(x: Any, fn: str, arg: str) -> Layout:
    if isinstance(x, Layout):
        return x
    if type(x) is int and x > 0:  # the common tiler case, skip the generic validation
        return unchecked_layout(x, 1 if x != 1 else 0)
    if it.is_int(x) or isinstance(x, tuple):
        try:
            return make_layout(x)
        except ValueError as e:
            raise ValueError(f"{fn}: {arg} {x!r} is not a valid shape: {e}") from None
    raise ValueError(f"{fn}: {arg} must be a Layout, an int or a tuple of ints, got {type(x).__name__}")


def _from_modes(shapes: list, strides: list) -> Layout:
    # CuTe's convention: no modes -> 1:0, one mode -> unwrapped, else a tuple.
    if not shapes:
        return unchecked_layout(1, 0)
    if len(shapes) == 1:
        return unchecked_layout(shapes[0], strides[0])
    return unchecked_layout(tuple(shapes), tuple(strides))


# --- coalesce / filter -------------------------------------------------------------

def _coalesce_flat(shape: IntTuple, stride: IntTuple) -> Layout:
    rs: list = []
    rd: list = []
    for s, d in zip(it.leaves(shape), it.leaves(stride)):
        if s == 1:
            continue
        if rs and rs[-1] * rd[-1] == d:
            rs[-1] *= s
        else:
            rs.append(s)
            rd.append(d)
    return _from_modes(rs, rd)


def _coalesce_profile(shape: IntTuple, stride: IntTuple, prof: IntTuple) -> Layout:
    if not isinstance(prof, tuple):
        return _coalesce_flat(shape, stride)
    if not isinstance(shape, tuple):
        shape, stride = (shape,), (stride,)
    if len(prof) > len(shape):
        raise ValueError(f"coalesce: target_profile {to_str(prof)} has more modes than the layout's shape "
                         f"{to_str(shape)} (rank(target_profile) <= rank(input) is required)")
    modes = [_coalesce_profile(s, d, p) for s, d, p in zip(shape, stride, prof)]
    return unchecked_layout(tuple(m.shape for m in modes) + shape[len(prof):],
                            tuple(m.stride for m in modes) + stride[len(prof):])


def coalesce(input: Any, target_profile: Optional[IntTuple] = None) -> Any:
    """Simplest layout with the same function on ``[0, size)``.

    Definition: flatten, drop size-1 modes, merge neighbours with
    ``s0*d0 == d1``; no modes left gives ``1:0``, one mode is unwrapped.
    With a tuple ``target_profile`` each of its modes is coalesced separately
    (recursively) and the remaining modes are kept.
    Preconditions: none for a plain coalesce; a tuple ``target_profile`` must
    not have more modes than the (sub-)layout it applies to.

    >>> print(coalesce(make_layout((2, (1, 6)), stride=(1, (6, 2)))), coalesce(make_layout((1, 1))))
    12:1 1:0
    >>> print(coalesce(make_layout((2, (1, 4)), stride=(1, (3, 2))), target_profile=(1, 1)))
    (2,4):(1,2)
    """
    if _is_composed(input):
        return type(input)(input.inner, input.offset, coalesce(input.outer, target_profile))
    input = _as_layout(input, "coalesce", "input")
    if target_profile is None or not isinstance(target_profile, tuple):
        return _coalesce_flat(input.shape, input.stride)
    return _coalesce_profile(input.shape, input.stride, target_profile)


def _filter_zeros(s: IntTuple, d: IntTuple) -> IntTuple:
    if isinstance(s, tuple):
        return tuple(_filter_zeros(a, b) for a, b in zip(s, d))
    return 1 if d == 0 else s


def filter_zeros(input: Layout, target_profile: Optional[IntTuple] = None) -> Layout:
    """Replace the shape of every stride-0 mode by 1 (keeps the structure).

    Precondition: none (``target_profile`` is accepted for DSL compatibility;
    with integer strides it does not change the result).

    >>> print(filter_zeros(make_layout((2, (1, 4)), stride=(0, (3, 0)))))
    (1,(1,1)):(0,(3,0))
    """
    input = _as_layout(input, "filter_zeros", "input")
    return unchecked_layout(_filter_zeros(input.shape, input.stride), input.stride)


def filter(input: Layout) -> Layout:
    """``coalesce(filter_zeros(input))``: the layout's distinct image, compacted.

    Precondition: none.

    >>> print(filter(make_layout((2, 1, 3), stride=(1, 4, 0))))
    2:1
    """
    if _is_composed(input):
        return type(input)(input.inner, input.offset, filter(input.outer))
    input = _as_layout(input, "filter", "input")
    return _coalesce_flat(_filter_zeros(input.shape, input.stride), input.stride)


# --- composition ---------------------------------------------------------------------

def _compose_leaf(N: tuple, D: tuple, s: int, d: int, lhs: Layout, rhs: Any) -> tuple:
    """(shape, stride) of ``(N:D) o (s:d)`` for coalesced lhs leaves N:D."""
    if d == 0:
        return s, 0
    if d < 0:
        raise ValueError(f"composition: rhs strides must be non-negative, got stride {d} in rhs {rhs}")
    if len(N) == 1:
        return s, d * D[0]
    rs: list = []
    rd: list = []
    rest_s, rest_d = s, d
    for n, dl in zip(N[:-1], D[:-1]):
        if n % rest_d and rest_d % n:
            raise ValueError(
                f"composition: stride divisibility condition violated: rhs mode {s}:{d} steps by {rest_d} "
                f"across lhs mode of extent {n} (neither divides the other) in {lhs} o {rhs}")
        n2 = n // rest_d or 1
        if rest_s > n2 and rest_s % n2:
            raise ValueError(
                f"composition: shape divisibility condition violated: rhs mode {s}:{d} needs {rest_s} "
                f"elements but lhs mode {n}:{dl} provides {n2} (not a divisor) in {lhs} o {rhs}")
        new = rest_s if rest_s < n2 else n2
        if new != 1:
            rs.append(new)
            rd.append(rest_d * dl)
        rest_s //= new
        rest_d = rest_d // n or 1
    if rest_s != 1 or not rs:
        rs.append(rest_s)
        rd.append(rest_d * D[-1])
    if len(rs) == 1:
        return rs[0], rd[0]
    return tuple(rs), tuple(rd)


def _coalesce_keep_last(shape: IntTuple, stride: IntTuple) -> tuple:
    """Coalesce right to left, always keeping the last mode (even of size 1).

    The last mode of the lhs absorbs whatever the rhs asks beyond the other
    modes, so its stride matters even when its extent is 1; this is how the
    DSL (and CuTe's ``bw_coalesce``) prepares the lhs of a composition.
    """
    fs, fd = it.leaves(shape), it.leaves(stride)
    ns, nd = [fs[-1]], [fd[-1]]
    for i in range(len(fs) - 2, -1, -1):
        s, d = fs[i], fd[i]
        if s == 1:
            continue
        if s * d == nd[-1]:
            ns[-1] *= s
            nd[-1] = d
        else:
            ns.append(s)
            nd.append(d)
    ns.reverse()
    nd.reverse()
    return tuple(ns), tuple(nd)


def _compose_tree(N: tuple, D: tuple, s: IntTuple, d: IntTuple, lhs: Layout, rhs: Any) -> tuple:
    if isinstance(s, tuple):
        parts = [_compose_tree(N, D, a, b, lhs, rhs) for a, b in zip(s, d)]
        return tuple(p[0] for p in parts), tuple(p[1] for p in parts)
    return _compose_leaf(N, D, s, d, lhs, rhs)


def composition(lhs: Any, rhs: Tiler) -> Any:
    """Functional composition ``(A o B)(c) = A(B(c))``, shaped like ``B``.

    ``rhs`` may be a Layout, an int ``n`` (meaning ``n:1``), ``None`` (identity)
    or a tuple tiler applied mode by mode (``(B0, B1, ...)`` composes mode i of
    ``A`` with ``Bi``; the result has exactly ``len(rhs)`` modes: extra modes of
    ``A`` are dropped, as in the DSL, while the divides keep them).
    Preconditions (CuTe's, checked against the coalesced ``A`` = ``N:D`` for each
    leaf ``s:d`` of B with ``d != 0``): ``d >= 0``; stride divisibility: walking
    the modes ``N_0..N_{k-2}`` the remaining stride and each ``N_i`` divide one
    another; shape divisibility: where ``s`` spills past a mode, that mode's
    remaining extent divides the remaining ``s``.  A tuple tiler needs
    ``len(tiler) <= rank(A)``.  See :func:`composition_error`.

    >>> A = make_layout((4, 8), stride=(8, 1))
    >>> print(composition(A, make_layout(8, stride=4)), composition(A, (2, 4)), composition(A, 2))
    8:1 (2,4):(8,1) 2:8
    >>> print(composition(make_layout((6, 2), stride=(8, 2)), make_layout((4, 3), stride=(3, 1))))
    ((2,2),3):((24,2),8)
    >>> print(composition(make_layout((4, 8)), (2,)), composition(make_layout((4, 8)), (2, None)))
    (2):(1) (2,8):(1,4)
    """
    if rhs is None:
        return lhs
    if _is_composed(lhs):
        return type(lhs)(lhs.inner, lhs.offset, composition(lhs.outer, rhs))
    if not isinstance(lhs, Layout):
        raise ValueError(f"composition: lhs must be a Layout or ComposedLayout, got {type(lhs).__name__}")
    if isinstance(rhs, tuple):
        return _by_mode(lhs, rhs, composition, "composition", keep_rest=False)
    if it.is_int(rhs):
        rhs = _as_layout(rhs, "composition", "rhs")
    if not isinstance(rhs, Layout):
        raise ValueError(f"composition: rhs must be a Layout, an int, None or a tuple tiler, got {rhs!r}")
    N, D = _coalesce_keep_last(lhs.shape, lhs.stride)
    s, d = _compose_tree(N, D, rhs.shape, rhs.stride, lhs, rhs)
    return unchecked_layout(s, d)


def _by_mode(target: Layout, tiler: tuple, op: Any, fn: str, keep_rest: bool = True) -> Layout:
    """Apply ``op`` to mode i of ``target`` and ``tiler[i]``.

    The modes past ``len(tiler)`` follow when ``keep_rest`` (the divides and
    products, whose tuple tilers pad with ``None``); composition drops them,
    as the DSL does (its result has the tiler's rank).
    """
    s, d = top_modes(target)
    if len(tiler) > len(s):
        raise ValueError(f"{fn}: tiler {tiler!r} has more modes ({len(tiler)}) than the layout "
                         f"{target} (rank {len(s)}); rank(tiler) <= rank(layout) is required")
    parts = [op(unchecked_layout(a, b), t) for a, b, t in zip(s, d, tiler)]
    n = len(s) if keep_rest else len(tiler)
    shapes = tuple(p.shape for p in parts) + s[len(tiler):n]
    strides = tuple(p.stride for p in parts) + d[len(tiler):n]
    return unchecked_layout(shapes, strides)


def composition_error(lhs: Layout, rhs: Tiler) -> Optional[str]:
    """The ValueError message :func:`composition` would raise, or None when valid."""
    return _error_of(composition, lhs, rhs)


def _error_of(fn: Any, *args: Any) -> Optional[str]:
    try:
        fn(*args)
    except ValueError as e:
        return str(e)
    return None


# --- complement ----------------------------------------------------------------------

def _sorted_modes(layout: Layout) -> list:
    """CuTe's ``filter`` then sort: the (stride, shape) leaves with shape > 1 and stride != 0, by stride.

    Checked not to interleave (each stride at least the previous ``shape*stride``): where one does, CuTe's
    complement divides the stride by that extent and gets an extent-0 mode.
    """
    pairs = []
    for s, d in zip(it.leaves(layout.shape), it.leaves(layout.stride)):
        if s == 1 or d == 0:
            continue
        if d < 0:
            raise ValueError(f"complement: strides of modes of size > 1 must be non-negative, got mode {s}:{d} "
                             f"in {layout} (the DSL returns negative extents or 1:0 here)")
        pairs.append((d, s))
    pairs.sort()
    cur = 1
    for d, s in pairs:
        if d < cur:
            raise ValueError(f"complement: sorted by stride, each mode must start where the smaller-stride modes "
                             f"end or later, but mode {s}:{d} starts at {d}, inside them (they reach {cur}), "
                             f"in {layout} (the DSL returns an extent-0 mode here)")
        cur = s * d
    return pairs


def is_injective(layout: Layout) -> bool:
    """True when ``layout`` maps distinct coordinates to distinct indices.

    Sorted by ``|stride|``, if every stride exceeds the largest index reachable
    by the smaller-stride modes, the layout is injective (O(rank log rank));
    otherwise the image is enumerated (only up to 2**20 elements).

    >>> is_injective(make_layout((2, 3), stride=(1, 3))), is_injective(make_layout((2, 2), stride=(1, 1)))
    (True, False)
    """
    pairs = sorted((abs(d), s) for s, d in zip(it.leaves(layout.shape), it.leaves(layout.stride)) if s != 1)
    reach = 0
    for d, s in pairs:
        if d == 0:
            return False
        if d <= reach:
            break
        reach += (s - 1) * d
    else:
        return True
    n = layout.size()
    if n > 1 << 20:
        raise ValueError(f"is_injective: layout {layout} is too large ({n} elements) to check by enumeration")
    return len({layout(i) for i in range(n)}) == n


def _cotarget_leaves(cotarget: Any) -> list:
    if isinstance(cotarget, Layout):
        return it.leaves(cotarget.shape)  # a Layout cotarget stands for its shape
    return it.leaves(_as_layout(cotarget, "complement", "cotarget").shape)


def _rest_shape(cotarget: list, cur: int) -> list:
    """CuTe's ``ceil_div(cotarget, cur)`` on the cotarget's leaves: a left fold, each
    leaf ``c`` becomes ``ceil(c / r)`` and ``r`` becomes ``ceil(r / c)`` (starting at ``cur``).

    Not ``ceil(size(cotarget) / cur)``: ``(10,2)`` over 12 gives ``(1,1)``, not 2.
    """
    out = []
    for c in cotarget:
        out.append(-(-c // cur))
        cur = -(-cur // c)
    return out


def complement(input: Layout, cotarget: Union[int, tuple, Layout] = 1) -> Layout:
    """The layout ``A*`` of the "rest": ``(A, A*)`` enumerates ``[0, cotarget)``, ``A*`` sorted by stride.

    Definition (CuTe's): with ``A``'s leaves of size > 1 and stride != 0 sorted by stride and ``e = s_k d_k``,
    ``A* = coalesce((d_0/1, d_1/(s_0 d_0), ..., R) : (1, s_0 d_0, ..., e))``, each quotient rounded down, where
    the rest ``R = ceil_div(cotarget, e)`` is laid out compactly from stride ``e``.
    For an int cotarget ``R = ceil(cotarget/e)``; for a shape, CuTe's
    ``ceil_div`` folds over its leaves (``c -> ceil(c/r)``, ``r -> ceil(r/c)``),
    so ``(10,2)`` over ``e = 12`` leaves nothing, unlike ``ceil(20/12) = 2``.
    The textbook precondition is that each stride is a multiple of the previous
    ``shape*stride``; only then do ``A`` and ``A*`` tile ``[0, cotarget)``
    exactly.  CuTe (and so this function) computes a result anyway: where the
    stride is no multiple the quotient rounds down, and the holes it leaves
    are part of neither (``(4,2):(1,10)`` over 40 gives ``(2,2):(4,20)``,
    which skips 8, 9, 18, 19, ...).
    Preconditions: strides of modes of size > 1 are >= 0; sorted by stride, the modes do not interleave
    (each stride is at least the previous ``shape*stride``; stride-0 and
    size-1 modes are ignored); ``cotarget`` is a positive int, a shape of
    positive ints or a Layout (its shape is used).

    >>> print(complement(make_layout(4, stride=2), 24), complement(make_layout((4, 6), stride=(1, 8)), 64))
    (2,3):(1,8) (2,2):(4,48)
    >>> print(complement(make_layout(4, stride=3), (10, 2)), complement(make_layout(4, stride=3), (30, 2)))
    3:1 (3,6):(1,12)
    >>> print(complement(make_layout((4, 6), stride=(1, 6)), 1), complement(make_layout((4, 10), stride=(1, 10)), 1))
    1:0 2:4
    >>> print(complement(make_layout((4, 6), stride=(1, 6)), 48), complement(make_layout((4, 2), stride=(1, 10)), 40))
    2:36 (2,2):(4,20)
    """
    input = _as_layout(input, "complement", "input")
    cot = _cotarget_leaves(cotarget)
    rs, rd = [], []
    cur = 1
    for d, s in _sorted_modes(input):
        rs.append(d // cur)
        rd.append(cur)
        cur = s * d
    for r in _rest_shape(cot, cur):  # compact, column-major from the extent cur
        rs.append(r)
        rd.append(cur)
        cur *= r
    return _coalesce_flat(tuple(rs), tuple(rd))


def complement_error(input: Layout, cotarget: Any = 1) -> Optional[str]:
    """The ValueError message :func:`complement` would raise, or None when valid."""
    return _error_of(complement, input, cotarget)


# --- inverses ---------------------------------------------------------------------------

def right_inverse(input: Layout) -> Layout:
    """Largest ``R`` with ``A(R(i)) == i`` for ``i < size(R)``.

    Definition: starting from index 1, repeatedly take the mode whose stride
    equals the current index (its inverse stride is its colexicographic
    position), then coalesce; stops at the first gap.
    Precondition: strides >= 0 (defined for every such layout, possibly ``1:0``).

    >>> print(right_inverse(make_layout((4, 8), stride=(8, 1))), right_inverse(make_layout(4, stride=2)))
    (8,4):(4,1) 1:0
    """
    input = _as_layout(input, "right_inverse", "input")
    fs, fd = it.leaves(input.shape), it.leaves(input.stride)
    bad = [d for d in fd if d < 0]
    if bad:
        raise ValueError(f"right_inverse: strides must be non-negative, got {bad} in {input}")
    pre = it.leaves(it.prefix_product(fs))
    by_stride = sorted((d, i) for i, (s, d) in enumerate(zip(fs, fd)) if s != 1 and d != 0)
    rs, rd = [], []
    cur = 1
    for d, i in by_stride:
        if d != cur:
            if d < cur:
                continue  # a duplicate stride: that image is already covered
            break
        rs.append(fs[i])
        rd.append(pre[i])
        cur = fs[i] * d
    return _coalesce_flat(tuple(rs), tuple(rd))


def left_inverse(input: Layout) -> Layout:
    """``L`` with ``L(A(i)) == i`` for every ``i < size(A)``.

    Definition: with ``A``'s non-trivial leaves sorted by stride
    ``d_0 < d_1 < ...`` (colexicographic positions ``r_i``),
    ``L = coalesce((d_0, d_1/d_0, ..., d_k/d_{k-1}, s_k) : (0, r_0, ..., r_{k-1}, r_k))``.
    Preconditions: strides >= 0 and ``A`` injective with a divisibility chain:
    no stride-0 mode of size > 1, and each stride a multiple of the previous
    stride and at least the previous ``shape*stride``.

    >>> print(left_inverse(make_layout((4, 8), stride=(8, 1))), left_inverse(make_layout(4, stride=2)))
    (8,4):(4,1) (2,4):(0,1)
    """
    input = _as_layout(input, "left_inverse", "input")
    fs, fd = it.leaves(input.shape), it.leaves(input.stride)
    pre = it.leaves(it.prefix_product(fs))
    items = []
    for s, d, r in zip(fs, fd, pre):
        if d < 0:
            raise ValueError(f"left_inverse: strides must be non-negative, got stride {d} in {input}")
        if s == 1:
            continue
        if d == 0:
            raise ValueError(f"left_inverse: layout must be injective, but mode {s}:0 maps {s} coordinates "
                             f"to one index in {input}")
        items.append((d, s, r))
    items.sort()
    if not items:
        return unchecked_layout(1, 0)
    rs, rd = [items[0][0]], [0]
    for (d, s, r), (d2, s2, _) in zip(items, items[1:]):
        if d2 < s * d:
            raise ValueError(f"left_inverse: layout must be injective, but mode {s2}:{d2} overlaps mode "
                             f"{s}:{d} in {input}")
        if d2 % d:
            raise ValueError(f"left_inverse: stride divisibility: stride {d2} must be a multiple of the "
                             f"previous stride {d} in {input}")
        rs.append(d2 // d)
        rd.append(r)
    rs.append(items[-1][1])
    rd.append(items[-1][2])
    return _coalesce_flat(tuple(rs), tuple(rd))


def left_inverse_error(input: Layout) -> Optional[str]:
    """The ValueError message :func:`left_inverse` would raise, or None when valid."""
    return _error_of(left_inverse, input)


# --- divides ------------------------------------------------------------------------------

def _extent(tiler: Layout) -> int:
    """Span ``max(s*d)`` of the tiler's non-trivial modes: the complement starts there."""
    return max((s * d for s, d in zip(it.leaves(tiler.shape), it.leaves(tiler.stride)) if s != 1 and d != 0),
               default=1)


def logical_divide(target: Any, tiler: Tiler) -> Any:
    """``A / B = A o (B, B*)`` with ``B* = complement(B, size(A))``: mode 0 is the tile, mode 1 the tiles.

    ``tiler`` may be a Layout, an int ``n`` (``n:1``), ``None`` (no-op) or a
    tuple applying one tiler per mode (recursively).
    Preconditions: ``complement(B, size(A))`` is valid; ``size(A)`` is a
    multiple of the tiler's extent ``max(s*d)`` (no partial tiles); the
    composition is valid (stride/shape divisibility); a tuple tiler has at
    most ``rank(A)`` modes.  A tiler whose strides are no multiple of the
    previous extent is accepted, as in the DSL; its tiles then skip the
    complement's holes (``40:1`` by ``(4,2):(1,10)`` keeps 32 of 40 elements).

    >>> print(logical_divide(make_layout(1024), (128,)), logical_divide(make_layout(1024), make_layout(128)))
    ((128,8)):((1,128)) (128,8):(1,128)
    >>> print(logical_divide(make_layout(24), make_layout(4, stride=2)))
    (4,(2,3)):(2,(1,8))
    >>> print(logical_divide(make_layout(40), make_layout((4, 2), stride=(1, 10))))
    ((4,2),(2,2)):((1,10),(4,20))
    """
    if tiler is None:
        return target
    if isinstance(tiler, tuple):
        if _is_composed(target):
            raise ValueError("logical_divide: a tuple tiler on a ComposedLayout is not supported; "
                             "use a Layout tiler")
        target = _as_layout(target, "logical_divide", "target")
        return _by_mode(target, tiler, logical_divide, "logical_divide")
    tiler = _as_layout(tiler, "logical_divide", "tiler")
    n = size(target)
    ext = _extent(tiler)
    if n % ext:
        raise ValueError(f"logical_divide: size of target ({n}) must be divisible by the tiler's extent "
                         f"{ext} (tiler {tiler} on target {target}): partial tiles are not allowed")
    try:
        rest = complement(tiler, n)
    except ValueError as e:
        raise ValueError(f"logical_divide: tiler {tiler} has no complement: {e}") from None
    return composition(target, unchecked_layout((tiler.shape, rest.shape), (tiler.stride, rest.stride)))


def divide_error(target: Layout, tiler: Tiler) -> Optional[str]:
    """The ValueError message :func:`logical_divide` would raise, or None when valid."""
    return _error_of(logical_divide, target, tiler)


def _zip2_by(t: IntTuple, guide: Any) -> tuple:
    # Split each divided/multiplied mode (tile_i, rest_i) following the tiler's profile.
    if isinstance(guide, tuple):
        firsts, seconds = [], []
        for i, g in enumerate(guide):
            a, b = _zip2_by(t[i], g)
            firsts.append(a)
            seconds.append(b)
        return tuple(firsts), tuple(seconds) + tuple(t[len(guide):])
    if guide is None:
        return t, ()  # an untouched mode: all of it is "tile"
    return t[0], t[1]


def _has_none_mode(tiler: Any) -> bool:
    return isinstance(tiler, tuple) and any(t is None or _has_none_mode(t) for t in tiler)


def _no_none(tiler: Any, fn: str) -> Any:
    if _has_none_mode(tiler):
        raise ValueError(f"{fn}: tiler {tiler!r} has a None mode; zipped/tiled/flat divides need a tile "
                         f"for every mode they split (use logical_divide to leave modes untouched)")
    return tiler


def _unzip(layout: Layout, tiler: Any) -> Layout:
    if not isinstance(tiler, tuple):
        return layout
    s0, s1 = _zip2_by(layout.shape, tiler)
    d0, d1 = _zip2_by(layout.stride, tiler)
    return unchecked_layout((s0, s1), (d0, d1))


def _split_modes(x: IntTuple) -> tuple:
    return x if isinstance(x, tuple) else (x,)


def _tiled(z: Layout) -> Layout:
    return unchecked_layout((z.shape[0],) + _split_modes(z.shape[1]), (z.stride[0],) + _split_modes(z.stride[1]))


def _flat(z: Layout) -> Layout:
    return unchecked_layout(_split_modes(z.shape[0]) + _split_modes(z.shape[1]),
                            _split_modes(z.stride[0]) + _split_modes(z.stride[1]))


def zipped_divide(target: Layout, tiler: Tiler) -> Layout:
    """``logical_divide`` regrouped as ``((tile modes...), (rest modes...))``.

    Preconditions: those of :func:`logical_divide`; no ``None`` in a tuple tiler.

    >>> print(zipped_divide(make_layout((16, 8, 3)), (4, 2)))
    ((4,2),(4,4,3)):((1,16),(4,32,128))
    """
    return _unzip(logical_divide(target, tiler), _no_none(tiler, "zipped_divide"))


def tiled_divide(target: Layout, tiler: Tiler) -> Layout:
    """``zipped_divide`` with the rest modes unpacked: ``((tile...), r0, r1, ...)``.

    Preconditions: those of :func:`zipped_divide`.

    >>> print(tiled_divide(make_layout((16, 8, 3)), (4, 2)))
    ((4,2),4,4,3):((1,16),4,32,128)
    """
    return _tiled(zipped_divide(target, tiler))


def flat_divide(target: Layout, tiler: Tiler) -> Layout:
    """``zipped_divide`` with both groups unpacked: ``(t0, t1, ..., r0, r1, ...)``.

    Preconditions: those of :func:`zipped_divide`.

    >>> print(flat_divide(make_layout((16, 8, 3)), (4, 2)))
    (4,2,4,4,3):(1,16,4,32,128)
    """
    return _flat(zipped_divide(target, tiler))


# --- products --------------------------------------------------------------------------------

def logical_product(block: Layout, tiler: Tiler) -> Layout:
    """``A x B = (A, A* o B)`` with ``A* = complement(A, size(A)*cosize(B))``: B copies of A.

    ``tiler`` may be a Layout, an int ``n`` (``n:1``), ``None`` or a tuple
    (one tiler per mode).
    Preconditions: ``complement(A, size(A)*cosize(B))`` is valid and the
    composition ``A* o B`` is valid (stride/shape divisibility); a tuple tiler
    has at most ``rank(A)`` modes.

    >>> print(logical_product(make_layout((2, 2)), make_layout(3)), logical_product(make_layout((2, 2)), 3))
    ((2,2),3):((1,2),4) ((2,2),3):((1,2),4)
    """
    if tiler is None:
        return block
    block = _as_layout(block, "logical_product", "block")
    if isinstance(tiler, tuple):
        return _by_mode(block, tiler, logical_product, "logical_product")
    tiler = _as_layout(tiler, "logical_product", "tiler")
    try:
        rest = complement(block, block.size() * tiler.cosize())
        rest = composition(rest, tiler)
    except ValueError as e:
        raise ValueError(f"logical_product: cannot compute {block} x {tiler}: {e}") from None
    return unchecked_layout((block.shape, rest.shape), (block.stride, rest.stride))


def product_error(block: Layout, tiler: Tiler) -> Optional[str]:
    """The ValueError message :func:`logical_product` would raise, or None when valid."""
    return _error_of(logical_product, block, tiler)


def zipped_product(block: Layout, tiler: Tiler) -> Layout:
    """``logical_product`` regrouped as ``((block modes...), (tiler modes...))``.

    Preconditions: those of :func:`logical_product`.

    >>> print(zipped_product(make_layout((2, 2)), make_layout((2, 3))))
    ((2,2),(2,3)):((1,2),(4,8))
    """
    return _unzip(logical_product(block, tiler), tiler)


def tiled_product(block: Layout, tiler: Tiler) -> Layout:
    """``zipped_product`` with the tiler modes unpacked: ``((block...), t0, t1, ...)``.

    Preconditions: those of :func:`logical_product`.

    >>> print(tiled_product(make_layout((2, 2)), make_layout((2, 3))))
    ((2,2),2,3):((1,2),4,8)
    """
    return _tiled(zipped_product(block, tiler))


def flat_product(block: Layout, tiler: Tiler) -> Layout:
    """``zipped_product`` with both groups unpacked: ``(b0, b1, ..., t0, t1, ...)``.

    Preconditions: those of :func:`logical_product`.

    >>> print(flat_product(make_layout((2, 2)), make_layout((2, 3))))
    (2,2,2,3):(1,2,4,8)
    """
    return _flat(zipped_product(block, tiler))


def _product_modes(block: Any, tiler: Any, fn: str) -> tuple:
    """(first-of-each-mode, second-of-each-mode) of ``logical_product(append<R>(A), append<R>(B))``."""
    block = _as_layout(block, fn, "block")
    tiler = _as_layout(tiler, fn, "tiler")
    r = max(block.rank, tiler.rank)
    one = unchecked_layout(1, 0)
    p = logical_product(append(block, one, up_to_rank=r), append(tiler, one, up_to_rank=r))
    return unchecked_layout(p.shape[0], p.stride[0]), unchecked_layout(p.shape[1], p.stride[1])


def _zip(a: Layout, b: Layout, fn: str) -> Layout:
    # An int-shaped first layout pairs with the whole second one (rank 1); a
    # tuple-shaped one pairs mode by mode, which needs a tuple-shaped second.
    if not isinstance(a.shape, tuple):
        return unchecked_layout(((a.shape, b.shape),), ((a.stride, b.stride),))
    if not isinstance(b.shape, tuple) or len(b.shape) != len(a.shape):
        raise ValueError(f"{fn}: cannot pair the modes of {a} with those of {b}: a rank-1 block and tiler "
                         f"must both be int-shaped or both tuple-shaped (the DSL refuses this too)")
    return unchecked_layout(tuple(zip(a.shape, b.shape)), tuple(zip(a.stride, b.stride)))


def blocked_product(block: Layout, tiler: Layout) -> Layout:
    """``zip(A, A* o B)`` after padding both to equal rank: mode i is ``(A_i, B_i)``, A's block contiguous.

    Definition: ``R = max(rank A, rank B)``; ``P = logical_product(append<R>(A), append<R>(B))``;
    result mode i is ``(P0_i, P1_i)``.
    Preconditions: those of :func:`logical_product` on the padded layouts;
    when the rank is 1, an int-shaped block may go with any tiler, but a
    tuple-shaped block needs a tuple-shaped tiler (zip pairs modes).

    >>> print(blocked_product(make_layout((2, 2)), make_layout((2, 3))))
    ((2,2),(2,3)):((1,4),(2,8))
    """
    a, b = _product_modes(block, tiler, "blocked_product")
    return _zip(a, b, "blocked_product")


def raked_product(block: Layout, tiler: Layout) -> Layout:
    """Like :func:`blocked_product` with each mode ``(B_i, A_i)``: A's elements are interleaved (raked).

    Definition: ``coalesce(zip(P1, P0), target_profile=(1,)*R)`` (each mode
    coalesced, as CuTe and the DSL do; blocked_product is not coalesced).
    Preconditions: those of :func:`blocked_product`.

    >>> print(raked_product(make_layout((2, 2)), make_layout((2, 3))))
    ((2,2),(3,2)):((4,1),(8,2))
    """
    a, b = _product_modes(block, tiler, "raked_product")
    z = _zip(b, a, "raked_product")
    return _coalesce_profile(z.shape, z.stride, (1,) * len(z.shape))


def make_layout_tv(thr_layout: Layout, val_layout: Layout) -> tuple:
    """``(tiler_mn, layout_tv)``: a thread-value layout for ``raked_product(thr, val)``.

    Definition: ``mn = raked_product(thr, val)``; ``tiler_mn = product_each(mn.shape)``;
    ``layout_tv = right_inverse(mn) o make_layout((size(thr), size(val)))``, mapping
    ``(thread, value) -> offset`` in the ``tiler_mn`` tile.
    Preconditions: the raked product is valid and is a bijection onto
    ``[0, size(mn))`` (compact ``thr`` and ``val``), so its right inverse has
    full size.

    >>> make_layout_tv(make_layout((4, 8), stride=(8, 1)), make_layout((1, 4)))
    ((4, 32), ((8,4),4):((16,1),4))
    """
    thr_layout = _as_layout(thr_layout, "make_layout_tv", "thr_layout")
    val_layout = _as_layout(val_layout, "make_layout_tv", "val_layout")
    mn = raked_product(thr_layout, val_layout)
    inv = right_inverse(mn)
    if inv.size() != mn.size():
        raise ValueError(f"make_layout_tv: raked_product(thr_layout, val_layout) = {mn} must be a bijection onto "
                         f"[0, {mn.size()}) (thr_layout {thr_layout} and val_layout {val_layout} must be compact)")
    tv = composition(inv, make_layout((thr_layout.size(), val_layout.size())))
    return it.product_each(mn.shape), tv


# --- recast ------------------------------------------------------------------------------------

def _shape_div(a: int, b: int) -> int:
    """CuTe's ``shape_div`` of positive ints that divide one way or the other: ``a/b``, at least 1."""
    return a // b or 1


def _upcast(s: IntTuple, d: IntTuple, n: int, src: Layout) -> tuple:
    # CuTe's upcast<n>: s:d -> shape_div(s, shape_div(n, |d|)) : sign(d) * shape_div(|d|, n).
    if isinstance(s, tuple):
        parts = [_upcast(a, b, n, src) for a, b in zip(s, d)]
        return tuple(p[0] for p in parts), tuple(p[1] for p in parts)
    if d == 0 or n == 1:
        return s, d
    a = abs(d)
    if a % n and n % a:
        raise ValueError(f"recast_layout: mode {s}:{d} of {src} cannot be grouped by {n}: stride divisibility "
                         f"needs |stride| {a} and {n} to divide one another")
    q = _shape_div(n, a)  # consecutive elements of this mode that make one new element
    if s % q and q % s:
        raise ValueError(f"recast_layout: mode {s}:{d} of {src} cannot be grouped by {n}: shape divisibility "
                         f"needs shape {s} and {q} (= {n}/|stride|) to divide one another")
    return _shape_div(s, q), _shape_div(a, n) * (1 if d > 0 else -1)


def _downcast(s: IntTuple, d: IntTuple, n: int) -> tuple:
    if isinstance(s, tuple):
        parts = [_downcast(a, b, n) for a, b in zip(s, d)]
        return tuple(p[0] for p in parts), tuple(p[1] for p in parts)
    if d in (1, -1):
        return s * n, d
    return s, d * n


def recast_layout(new_type_bits: int, old_type_bits: int, src_layout: Layout) -> Layout:
    """Reinterpret a layout of ``old_type_bits``-wide elements as ``new_type_bits``-wide ones.

    Definition: with ``new/old = u/v`` in lowest terms, upcast by ``u`` then
    downcast by ``v``, as CuTe does.  Upcast maps each leaf ``s:d`` with
    ``d != 0`` to ``shape_div(s, q) : sign(d)*shape_div(|d|, u)`` with
    ``q = shape_div(u, |d|)``, where ``shape_div(a, b) = max(1, a // b)``
    (so ``d -> d/u`` when ``u | d``, and a stride dividing ``u`` shrinks
    its shape, down to 1); downcast grows unit-stride shapes by ``v`` and
    scales other strides by ``v``.
    Preconditions: both widths are positive ints; for every leaf with
    ``d != 0``, ``|d|`` and ``u`` divide one another, and so do ``s`` and ``q``
    (the DSL rounds up otherwise; we refuse).

    >>> row_major = make_layout((4, 8), stride=(8, 1))
    >>> print(recast_layout(32, 16, row_major), recast_layout(16, 32, row_major))
    (4,4):(4,1) (4,16):(16,1)
    >>> print(recast_layout(32, 8, make_layout((1, 8), stride=(1, 1))), recast_layout(16, 4, make_layout((2, 12))))
    (1,2):(1,1) (1,6):(1,1)
    """
    for name, v in (("new_type_bits", new_type_bits), ("old_type_bits", old_type_bits)):
        if not it.is_int(v) or v <= 0:
            raise ValueError(f"recast_layout: {name} must be a positive int, got {v!r}")
    if _is_composed(src_layout):
        raise ValueError("recast_layout: ComposedLayout is not supported by the eager implementation")
    src_layout = _as_layout(src_layout, "recast_layout", "src_layout")
    g = gcd(new_type_bits, old_type_bits)
    u, v = new_type_bits // g, old_type_bits // g
    s, d = _upcast(src_layout.shape, src_layout.stride, u, src_layout)
    if v != 1:
        s, d = _downcast(s, d, v)
    return unchecked_layout(s, d)


def recast_error(new_type_bits: int, old_type_bits: int, src_layout: Layout) -> Optional[str]:
    """The ValueError message :func:`recast_layout` would raise, or None when valid."""
    return _error_of(recast_layout, new_type_bits, old_type_bits, src_layout)
