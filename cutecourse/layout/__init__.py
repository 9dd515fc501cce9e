"""Eager, pure-Python CuTe layout algebra (no torch, no DSL needed).

Names and argument order follow ``cutlass.cute``, and ``str()`` prints exactly
what the DSL prints, so a cell can be checked eagerly here and then run in a
``@cute.jit`` kernel unchanged.  Invalid inputs raise ``ValueError`` naming the
violated precondition instead of returning a meaningless layout.

Modules: :mod:`.inttuple` (int-tuple helpers), :mod:`.layout` (the Layout
type, construction, mode surgery), :mod:`.algebra` (coalesce,
composition, complement, inverses, divides, products, TV layouts, recast),
:mod:`.swizzle` (Swizzle, ComposedLayout), :mod:`.parse` (the DSL's print form
read back).

>>> from cutecourse.layout import make_layout, logical_divide
>>> print(logical_divide(make_layout((16, 8)), (4, 2)))
((4,4),(2,4)):((1,4),(16,32))
"""

from . import algebra, inttuple, layout, parse, swizzle
from .algebra import *  # noqa: F403
from .inttuple import *  # noqa: F403
from .layout import *  # noqa: F403
from .parse import *  # noqa: F403
from .swizzle import *  # noqa: F403

__all__ = [*inttuple.__all__, *layout.__all__, *algebra.__all__, *swizzle.__all__, *parse.__all__]
