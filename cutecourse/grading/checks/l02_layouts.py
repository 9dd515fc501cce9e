"""Checks of lesson 2 (CuTe layouts): crd2idx, coalesce, composition, and predicting divide and product.

The learner's functions work on plain int tuples: a layout is a pair ``(shape, stride)`` of ints or nested tuples
of ints. Expected values come from the eager algebra (:mod:`cutecourse.layout`), which prints what the DSL prints;
the hidden tests (tests/hidden/test_02_layouts.py) draw their random inputs with the generators below.
"""

from __future__ import annotations

import random
from typing import Any

import cutecourse.layout as eager
from cutecourse.grading.checks import Check
from cutecourse.layout.inttuple import to_str as fmt  # an int tuple as CuTe prints it: 4, (4,8), (4,(2,3))

# --------------------------------------------------------------------------- helpers shared with the hidden tests


def layout_of(shape: Any, stride: Any) -> eager.Layout:
    return eager.make_layout(shape, stride=stride)


def values(shape: Any, stride: Any) -> list[int]:
    """The layout's function on its 1-D domain [0, size)."""
    lay = layout_of(shape, stride)
    return [lay(i) for i in range(lay.size())]


def _well_formed(value: Any) -> bool:
    if isinstance(value, bool):
        return False
    if isinstance(value, int):
        return True
    return isinstance(value, tuple) and len(value) > 0 and all(_well_formed(v) for v in value)


def _as_pair(value: Any) -> str | None:
    """None when value is a (shape, stride) pair of congruent int tuples, else what is wrong with it."""
    if not isinstance(value, tuple) or len(value) != 2:
        return f"expected a (shape, stride) pair, got {value!r}"
    shape, stride = value
    if not (_well_formed(shape) and _well_formed(stride)):
        return f"shape and stride must be ints or (nested) tuples of ints, got {value!r}"
    if not eager.congruent(shape, stride):
        return f"shape {fmt(shape)} and stride {fmt(stride)} must have the same nesting"
    if any(s < 1 for s in eager.inttuple.leaves(shape)):
        return f"every extent of the shape must be >= 1, got {fmt(shape)}"
    return None


def random_shape(rng: random.Random, depth: int = 2, lo: int = 1, hi: int = 6) -> Any:
    """A random (possibly nested) shape of rank 1-3 with extents in [lo, hi]."""
    if depth == 0 or rng.random() < 0.45:
        return rng.randint(lo, hi)
    return tuple(random_shape(rng, depth - 1, lo, hi) for _ in range(rng.randint(1, 3)))


def random_strides(rng: random.Random, shape: Any) -> Any:
    if isinstance(shape, tuple):
        return tuple(random_strides(rng, s) for s in shape)
    return rng.choice([0, 1, 1, 2, 3, 4, 6, 8, 12, 16, 24, 32])


def compact_strides(rng: random.Random, shape: Any) -> Any:
    """Strides of a compact layout of `shape` whose modes are visited in a random order (so coalesce has work)."""
    leaves = list(eager.inttuple.leaves(shape))
    order = list(range(len(leaves)))
    if rng.random() < 0.5:
        rng.shuffle(order)
    flat, step = [0] * len(leaves), 1
    for i in order:
        flat[i] = step * (rng.choice([1, 1, 1, 2]) if rng.random() < 0.2 else 1)
        step *= leaves[i]

    it = iter(flat)

    def rebuild(s: Any) -> Any:
        return tuple(rebuild(x) for x in s) if isinstance(s, tuple) else next(it)

    return rebuild(shape)


def is_coalesced(shape: Any, stride: Any) -> bool:
    """Whether `shape:stride` is already as coalesce returns it: the left-hand side of exercises 2.3 and 2.4."""
    simplest = eager.coalesce(layout_of(shape, stride))
    return (simplest.shape, simplest.stride) == (shape, stride)


def random_flat_lhs(rng: random.Random) -> tuple[Any, Any]:
    """A flat layout (int or tuple) without size-1 modes: the left-hand side of exercise 2.5 (and, where it is
    coalesced, of 2.3 and 2.4)."""
    n = rng.randint(1, 3)
    shape = tuple(rng.choice([2, 2, 3, 4, 4, 6, 8]) for _ in range(n))
    if rng.random() < 0.5:
        stride = compact_strides(rng, shape)
    else:
        stride = tuple(rng.choice([1, 2, 3, 4, 8, 16, 24, 32]) for _ in shape)
    if n == 1 and rng.random() < 0.5:
        return shape[0], stride[0]
    return shape, stride


# --------------------------------------------------------------------------- 2.1 crd2idx


def _crd2idx_cases() -> list[tuple[Any, ...]]:
    return [
        ((2, 5), (4, 8), (8, 1)),             # the seed's row-major 4x8: 2*8 + 5
        (9, (4, 8), (8, 1)),                  # a 1-D coordinate is unfolded colexicographically
        ((3, 7), (4, 8), (1, 4)),             # column-major
        ((1, (1, 2)), (4, (2, 3)), (8, (1, 2))),  # natural (hierarchical) coordinate
        ((1, 4), (4, (2, 3)), (8, (1, 2))),   # an int where the shape has a tuple
        (13, (4, (2, 3)), (8, (1, 2))),       # 1-D over a nested shape
        (3, 5, 7),                            # rank-0 layout: just coord * stride
        ((0, 2), (3, 4), (0, 3)),             # a stride-0 (broadcast) mode
    ]


def _judge_crd2idx(case: tuple[Any, ...], value: Any, outputs: list[Any]) -> str | None:
    coord, shape, stride = case
    if isinstance(value, bool) or not isinstance(value, int):
        return f"expected an int index, got {value!r}"
    if value == eager.crd2idx(coord, layout_of(shape, stride)):
        return None
    if isinstance(coord, int) and isinstance(shape, tuple):
        return (f"got {value}; an int coordinate of a tuple shape is first unfolded into one coordinate per mode, "
                "first mode fastest (colexicographic order), then dotted with the strides")
    if isinstance(coord, tuple) and any(isinstance(c, int) and isinstance(s, tuple) for c, s in zip(coord, shape)):
        return (f"got {value}; where the coordinate has an int and the shape a tuple, that int is unfolded "
                "colexicographically within that mode's sub-shape")
    return f"got {value}; the index is the sum over the leaves of coordinate * stride"


my_crd2idx = Check("my_crd2idx", "my_crd2idx", _crd2idx_cases, _judge_crd2idx)


def random_crd2idx_case(rng: random.Random) -> tuple[Any, Any, Any]:
    """(coord, shape, stride): the coordinate is natural, 1-D, or partly folded."""
    shape = random_shape(rng, depth=3)
    stride = random_strides(rng, shape)
    idx = rng.randrange(eager.product(shape))
    natural = eager.idx2crd(idx, shape)

    def fold(c: Any, s: Any) -> Any:  # replace random sub-coordinates by their 1-D index
        if isinstance(s, tuple) and rng.random() < 0.4:
            return eager.crd2idx(c, eager.make_layout(s))
        return tuple(fold(a, b) for a, b in zip(c, s)) if isinstance(s, tuple) else c

    coord = rng.choice([natural, idx, fold(natural, shape)])
    return coord, shape, stride


# --------------------------------------------------------------------------- 2.2 coalesce


def _coalesce_cases() -> list[tuple[Any, ...]]:
    return [
        ((2, (1, 6)), (1, (6, 2))),           # the DSL notebook's example: 12:1
        (((2, (3, 4)), (3, 2), 1), ((4, (8, 24)), (2, 6), 12)),  # (24,6):(4,2)
        ((4, 8), (8, 1)),                     # row-major: nothing merges
        ((1, 1), (3, 5)),                     # only size-1 modes
        (8, 2),                               # already simplest
        ((2, 2, 2), (1, 2, 8)),               # merge the first two, keep the third
    ]


def _judge_coalesce(case: tuple[Any, ...], value: Any, outputs: list[Any]) -> str | None:
    shape, stride = case
    bad = _as_pair(value)
    if bad:
        return bad
    want = eager.coalesce(layout_of(shape, stride))
    got_shape, got_stride = value
    if (got_shape, got_stride) == (want.shape, want.stride):
        return None
    if eager.product(got_shape) != want.size():
        return f"got {fmt(got_shape)}:{fmt(got_stride)}, whose size is not the input's size {want.size()}"
    if values(got_shape, got_stride) != values(shape, stride):
        return (f"got {fmt(got_shape)}:{fmt(got_stride)}, which maps some 1-D index to a different offset than "
                "the input: merge two neighbouring modes only when shape[i] * stride[i] == stride[i+1]")
    if isinstance(got_shape, tuple) and any(isinstance(s, tuple) for s in got_shape):
        return f"got {fmt(got_shape)}:{fmt(got_stride)}: the result must be flat (no nested tuples)"
    if isinstance(got_shape, tuple) and len(got_shape) == 1:
        return f"got {fmt(got_shape)}:{fmt(got_stride)}: a single mode is returned as plain ints, not 1-tuples"
    if isinstance(got_shape, tuple) and 1 in got_shape:
        return f"got {fmt(got_shape)}:{fmt(got_stride)}: size-1 modes carry no information; drop them"
    return (f"got {fmt(got_shape)}:{fmt(got_stride)}: the same function, but not the simplest form "
            "(merge every neighbouring pair you can; a layout of size 1 is 1:0)")


my_coalesce = Check("my_coalesce", "my_coalesce", _coalesce_cases, _judge_coalesce)


def random_coalesce_case(rng: random.Random) -> tuple[Any, Any]:
    shape = random_shape(rng, depth=3, hi=5)
    stride = compact_strides(rng, shape) if rng.random() < 0.7 else random_strides(rng, shape)
    return shape, stride


# --------------------------------------------------------------------------- 2.3 composition


def _composition_cases() -> list[tuple[Any, ...]]:
    return [
        ((4, 8), (8, 1), (8, 4), (4, 1)),     # the seed: (A o B)(i,j) = A(4i + j)
        ((4, 8), (8, 1), 4, 2),               # (2,2):(16,1)
        ((6, 2), (8, 2), (4, 3), (3, 1)),     # the DSL notebook: ((2,2),3):((24,2),8)
        ((10, 2), (16, 4), (5, 4), (1, 5)),   # (5,(2,2)):(16,(80,4))
        (24, 1, (4, 6), (1, 4)),              # a 1-D lhs just scales strides
        ((4, 8), (1, 8), (2, (2, 4)), (0, (1, 8))),  # a stride-0 rhs mode and a nested rhs
    ]


def _judge_composition(case: tuple[Any, ...], value: Any, outputs: list[Any]) -> str | None:
    a_shape, a_stride, b_shape, b_stride = case
    bad = _as_pair(value)
    if bad:
        return bad
    want = eager.composition(layout_of(a_shape, a_stride), layout_of(b_shape, b_stride))
    got_shape, got_stride = value
    if (got_shape, got_stride) == (want.shape, want.stride):
        return None
    if eager.product(got_shape) != want.size():
        return f"got {fmt(got_shape)}:{fmt(got_stride)}, whose size differs from size(B) = {want.size()}"
    b_vals = values(b_shape, b_stride)
    a = layout_of(a_shape, a_stride)
    try:
        same = values(got_shape, got_stride) == [a(i) if i < a.size() else None for i in b_vals]
    except ValueError:
        same = False
    if not same:
        return (f"got {fmt(got_shape)}:{fmt(got_stride)}, which is not the function i -> A(B(i)): for each leaf s:d "
                "of B, first divide the stride d out of A's modes, then take s elements from what is left")
    return (f"got {fmt(got_shape)}:{fmt(got_stride)}: the right function, in another form; the result has B's "
            "shape, each leaf of B becoming a plain int when it lands in one mode of A, a tuple when it spans "
            "several (and no size-1 modes inside)")


my_composition = Check("my_composition", "my_composition", _composition_cases, _judge_composition)


def random_composition_case(rng: random.Random) -> tuple[Any, Any, Any, Any] | None:
    """A valid (a_shape, a_stride, b_shape, b_stride), or None when this draw is not composable."""
    a_shape, a_stride = random_flat_lhs(rng)
    if not is_coalesced(a_shape, a_stride):
        return None
    a_size = eager.product(a_shape)
    b_shape = random_shape(rng, depth=2, hi=4)
    b_stride = random_strides(rng, b_shape) if rng.random() < 0.5 else compact_strides(rng, b_shape)
    a, b = layout_of(a_shape, a_stride), layout_of(b_shape, b_stride)
    if b.cosize() > a_size or eager.composition_error(a, b) is not None:
        return None
    return a_shape, a_stride, b_shape, b_stride


# --------------------------------------------------------------------------- 2.4 / 2.5 predict divide and product


def _divide_cases() -> list[tuple[Any, ...]]:
    return [
        (1024, 1, 128),                       # the seed's example: (element_in_tile, tile_id)
        (24, 1, 4),
        ((4, 6), (1, 8), 8),                  # a tile that spans two modes
        ((4, 8), (8, 1), 8),                  # row-major rows ... or are they?
        (8, 3, 8),                            # one tile: the tile-id mode is 1:0
    ]


def _judge_predict(op: str):
    def judge(case: tuple[Any, ...], value: Any, outputs: list[Any]) -> str | None:
        shape, stride, n = case
        if not isinstance(value, str):
            return f"expected the layout as a string such as '(4,2):(1,4)', got {value!r}"
        want = str(getattr(eager, op)(layout_of(shape, stride), eager.make_layout(n)))
        got = value.replace(" ", "")
        if got == want:
            return None
        try:
            parsed = eager.parse_layout(got)
        except Exception:  # noqa: BLE001 - anything unparsable
            return f"got {value!r}, which is not a layout string shape:stride"
        expected = eager.parse_layout(want)
        if parsed.size() != expected.size():
            return f"got {value!r}, whose size is not {expected.size()}"
        if eager.rank(parsed) != 2:
            return f"got {value!r}: the result has two modes, (tile, rest)"
        divide = op == "logical_divide"
        if str(parsed[0]) != str(expected[0]):
            return (f"got {value!r}: mode 0 is wrong (it is "
                    f"{'the tile: the first n elements of A, in 1-D order' if divide else 'A itself, unchanged'})")
        if divide:
            rest = "the rest of A, which steps from tile to tile"
        else:
            rest = "the first n offsets of the complement of A"
        return f"got {value!r}: mode 1 is wrong (it is {rest})"

    return judge


predict_logical_divide = Check("predict_logical_divide", "predict_logical_divide", _divide_cases,
                               _judge_predict("logical_divide"))


def _product_cases() -> list[tuple[Any, ...]]:
    return [
        ((4, 8), (8, 1), 2),                  # the seed: ((4,8),2):((8,1),32)
        (128, 1, 8),                          # (128,8):(1,128)
        ((2, 2), (1, 2), 3),                  # ((2,2),3):((1,2),4)
        (4, 2, 2),                            # the complement fills the holes first: (4,2):(2,1)
        ((2, 3), (3, 1), 2),
    ]


predict_logical_product = Check("predict_logical_product", "predict_logical_product", _product_cases,
                                 _judge_predict("logical_product"))


def random_divide_case(rng: random.Random) -> tuple[Any, Any, int] | None:
    shape, stride = random_flat_lhs(rng)
    if not is_coalesced(shape, stride):
        return None
    size = eager.product(shape)
    divisors = [d for d in range(2, size + 1) if size % d == 0]
    n = rng.choice(divisors)
    if eager.divide_error(layout_of(shape, stride), eager.make_layout(n)) is not None:
        return None
    return shape, stride, n


def tiles_with_its_complement(shape: Any, stride: Any, n: int) -> bool:
    """Whether A and ``complement(A, size(A) * n)`` together enumerate their range exactly once: complement's
    textbook precondition (sorted by stride, each stride a multiple of the extent of the modes below it), which
    exercise 2.5 assumes. CuTe computes a complement without it too (lesson 2, section 6), rounding down."""
    a = layout_of(shape, stride)
    pair = eager.make_layout((a, eager.complement(a, a.size() * n)))
    return pair.cosize() == pair.size() and eager.is_injective(pair)


def random_product_case(rng: random.Random) -> tuple[Any, Any, int] | None:
    shape, stride = random_flat_lhs(rng)
    n = rng.randint(2, 6)
    if eager.product_error(layout_of(shape, stride), eager.make_layout(n)) is not None:
        return None
    if not tiles_with_its_complement(shape, stride, n):
        return None
    return shape, stride, n
