"""Swizzles and composed layouts: ``S<B,M,S> o offset o layout``.

A :class:`Swizzle` permutes indices by XOR-ing ``B`` bits taken ``S`` bits
above the ``M`` lowest bits into those bits; shared-memory layouts use it to
avoid bank conflicts.  A :class:`ComposedLayout` applies ``inner(offset +
outer(c))``.

>>> sw = make_swizzle(3, 3, 3)
>>> sw, sw(0b001_000_000), make_composed_layout(sw, 0, make_layout((8, 64), stride=(64, 1)))
(S<3,3,3>, 72, S<3,3,3> o 0 o (8,64):(64,1))
"""

from __future__ import annotations

from typing import Any, Union

from . import inttuple as it
from .layout import Layout, make_layout

__all__ = ["Swizzle", "ComposedLayout", "make_swizzle", "make_composed_layout"]


class Swizzle:
    """``Swizzle(B, M, S)``: ``x ^ ((x & yyy_mask) >> S)`` (``<< -S`` for negative S).

    ``yyy_mask`` is ``B`` ones shifted left by ``M + max(0, S)``; the bits they
    land on are ``zzz_mask`` = ``B`` ones shifted by ``M - min(0, S)``.
    Preconditions: ``B >= 0``, ``M >= 0``, ``|S| >= B`` (the two masks must not
    overlap), all ints.  With ``B == 0`` it is the identity, stored (and
    printed) as the DSL's canonical ``S<0,4,3>`` whatever ``M`` and ``S`` were.

    >>> Swizzle(2, 0, 3)(0b11000), Swizzle(2, 0, -3)(0b11), Swizzle(0, 1, 1)
    (27, 27, S<0,4,3>)
    """

    __slots__ = ("bits", "base", "shift", "_yyy")

    def __init__(self, bits: int, base: int, shift: int) -> None:
        if not all(it.is_int(v) for v in (bits, base, shift)):
            raise ValueError(f"Swizzle: B, M, S must be ints, got {bits!r}, {base!r}, {shift!r}")
        if bits < 0 or base < 0:
            raise ValueError(f"Swizzle: B and M must be non-negative, got B={bits}, M={base}")
        if abs(shift) < bits:
            raise ValueError(f"Swizzle: |S| must be at least B so the masks do not overlap, got B={bits}, S={shift}")
        if bits == 0:  # every b=0 swizzle is the identity: keep the DSL's one form, so all compare equal
            base, shift = 4, 3
        self.bits = bits
        self.base = base
        self.shift = shift
        self._yyy = ((1 << bits) - 1) << (base + max(0, shift))

    @property
    def yyy_mask(self) -> int:
        return self._yyy

    @property
    def zzz_mask(self) -> int:
        return ((1 << self.bits) - 1) << (self.base - min(0, self.shift))

    def __call__(self, offset: int) -> int:
        if not it.is_int(offset):
            raise ValueError(f"Swizzle: offset must be an int, got {offset!r}")
        y = offset & self._yyy
        return offset ^ (y >> self.shift if self.shift >= 0 else y << -self.shift)

    def __str__(self) -> str:
        return f"S<{self.bits},{self.base},{self.shift}>"

    __repr__ = __str__

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Swizzle):
            return False
        return (self.bits, self.base, self.shift) == (other.bits, other.base, other.shift)

    def __hash__(self) -> int:
        return hash(("Swizzle", self.bits, self.base, self.shift))


class ComposedLayout:
    """``inner o offset o outer``: ``c -> inner(offset + outer(c))``.

    ``inner`` is a :class:`Swizzle` or a :class:`Layout`; ``offset`` an int.
    Shape queries (size, rank, modes) are those of ``outer``.

    >>> C = make_composed_layout(make_swizzle(1, 0, 1), 0, make_layout(4))
    >>> C, [C(i) for i in range(4)], C.size()
    (S<1,0,1> o 0 o 4:1, [0, 1, 3, 2], 4)
    """

    __slots__ = ("inner", "offset", "outer")

    def __init__(self, inner: Union[Swizzle, Layout], offset: int, outer: Layout) -> None:
        if not isinstance(inner, (Swizzle, Layout)):
            raise ValueError(f"ComposedLayout: inner must be a Swizzle or a Layout, got {type(inner).__name__}")
        if not it.is_int(offset):
            raise ValueError(f"ComposedLayout: offset must be an int, got {offset!r}")
        if not isinstance(outer, Layout):
            raise ValueError(f"ComposedLayout: outer must be a Layout, got {type(outer).__name__}")
        self.inner = inner
        self.offset = offset
        self.outer = outer

    def __str__(self) -> str:
        return f"{self.inner} o {self.offset} o {self.outer}"

    __repr__ = __str__

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, ComposedLayout) and self.inner == other.inner and self.offset == other.offset
                and self.outer == other.outer)

    def __hash__(self) -> int:
        return hash((self.inner, self.offset, self.outer))

    def __call__(self, *crd: Any) -> Any:
        c = crd[0] if len(crd) == 1 else crd
        i = self.outer(c)
        if isinstance(i, Layout):  # a slice: keep composing
            raise ValueError("ComposedLayout: slicing with None is not supported; slice the outer layout")
        return self.inner(self.offset + i)

    @property
    def shape(self) -> Any:
        return self.outer.shape

    @property
    def rank(self) -> int:
        return self.outer.rank

    @property
    def depth(self) -> int:
        return self.outer.depth

    def size(self) -> int:
        return self.outer.size()

    def cosize(self) -> int:
        """``cosize(outer)`` (a swizzle permutes indices within aligned blocks)."""
        return self.outer.cosize()

    def __getitem__(self, i: int) -> "ComposedLayout":
        return ComposedLayout(self.inner, self.offset, self.outer[i])


def make_swizzle(b: int, m: int, s: int) -> Swizzle:
    """``S<b,m,s>``: XOR ``b`` bits at ``m+s`` into the bits at ``m``.

    Preconditions: ``b >= 0``, ``m >= 0``, ``|s| >= b``.  ``b == 0`` (the
    identity) is canonicalised to ``S<0,4,3>``, as the DSL does.

    >>> make_swizzle(3, 3, 3), make_swizzle(0, 1, 1)
    (S<3,3,3>, S<0,4,3>)
    """
    return Swizzle(b, m, s)


def make_composed_layout(inner: Union[Swizzle, Layout], offset: int, outer: Layout) -> ComposedLayout:
    """``inner o offset o outer``: coordinate -> ``inner(offset + outer(c))``.

    Preconditions: ``inner`` is a Swizzle or Layout, ``offset`` an int, ``outer`` a Layout.

    >>> print(make_composed_layout(make_swizzle(3, 3, 3), 0, make_layout((8, 64), stride=(64, 1))))
    S<3,3,3> o 0 o (8,64):(64,1)
    """
    if not isinstance(outer, Layout):
        outer = make_layout(outer)
    return ComposedLayout(inner, offset, outer)
