"""Eager, pure-Python CuTe layout algebra (no torch, no DSL needed).

Names and argument order follow ``cutlass.cute``, and ``str()`` prints exactly
what the DSL prints, so a cell can be checked eagerly here and then run in a
``@cute.jit`` kernel unchanged.  Invalid inputs raise ``ValueError`` naming the
violated precondition instead of returning a meaningless layout.

Modules: :mod:`.inttuple` (int-tuple helpers), :mod:`.layout` (the Layout
type, construction, mode surgery, parsing), :mod:`.algebra` (coalesce,
composition, complement, inverses, divides, products, TV layouts, recast),
:mod:`.swizzle` (Swizzle, ComposedLayout).

>>> from cutecourse.layout import make_layout, logical_divide
>>> print(logical_divide(make_layout((16, 8)), (4, 2)))
((4,4),(2,4)):((1,4),(16,32))
"""

from .inttuple import IntTuple, congruent, compatible, product, product_each, prefix_product, inner_product
from .layout import (
    Layout, make_layout, make_ordered_layout, make_layout_row_major, make_layout_col_major,
    size, cosize, rank, depth, get, append, prepend, group_modes, flatten, select,
    slice_, slice_and_offset, crd2idx, idx2crd, parse_layout,
)
from .algebra import (
    coalesce, filter, filter_zeros, composition, complement, right_inverse, left_inverse,
    logical_divide, zipped_divide, tiled_divide, flat_divide,
    logical_product, zipped_product, tiled_product, flat_product, blocked_product, raked_product,
    make_layout_tv, recast_layout,
    composition_error, complement_error, left_inverse_error, divide_error, product_error, recast_error,
    is_injective,
)
from .swizzle import Swizzle, ComposedLayout, make_swizzle, make_composed_layout

__all__ = [
    "IntTuple", "congruent", "compatible", "product", "product_each", "prefix_product", "inner_product",
    "Layout", "make_layout", "make_ordered_layout", "make_layout_row_major", "make_layout_col_major",
    "size", "cosize", "rank", "depth", "get", "append", "prepend", "group_modes", "flatten", "select",
    "slice_", "slice_and_offset", "crd2idx", "idx2crd", "parse_layout",
    "coalesce", "filter", "filter_zeros", "composition", "complement", "right_inverse", "left_inverse",
    "logical_divide", "zipped_divide", "tiled_divide", "flat_divide",
    "logical_product", "zipped_product", "tiled_product", "flat_product", "blocked_product", "raked_product",
    "make_layout_tv", "recast_layout",
    "composition_error", "complement_error", "left_inverse_error", "divide_error", "product_error",
    "recast_error", "is_injective",
    "Swizzle", "ComposedLayout", "make_swizzle", "make_composed_layout",
]
