"""Unit tests for the eager layout algebra (cutecourse.layout).

Expected strings were checked against the CuTe DSL (nvidia-cutlass-dsl 4.8.1).
Every precondition is tested both ways: a valid input is accepted, an invalid
one raises ValueError naming the condition.
"""

import doctest
import subprocess
import sys

import pytest

import cutecourse.layout as cl
from cutecourse.layout import (
    ComposedLayout, Layout, Swizzle, append, blocked_product, coalesce, complement, composition, cosize,
    crd2idx, depth, filter, filter_zeros, flat_divide, flat_product, flatten, get, group_modes, idx2crd,
    left_inverse, logical_divide, logical_product, make_composed_layout, make_layout, make_layout_tv,
    make_ordered_layout, make_swizzle, parse_layout, prepend, raked_product, rank, recast_layout, right_inverse,
    select, size, slice_, slice_and_offset, tiled_divide, tiled_product, zipped_divide, zipped_product,
)
from cutecourse.layout import algebra, inttuple, layout as layout_mod, swizzle


def L(shape, stride=None):
    return make_layout(shape, stride=stride)


# --- doctests: every public docstring example runs --------------------------------

@pytest.mark.parametrize("mod", [cl, inttuple, layout_mod, algebra, swizzle], ids=lambda m: m.__name__)
def test_docstring_examples(mod):
    res = doctest.testmod(mod, optionflags=doctest.ELLIPSIS)
    assert res.failed == 0
    assert res.attempted > 0


def test_import_without_torch_or_cutlass():
    code = ("import sys; sys.modules['torch'] = None; sys.modules['cutlass'] = None; sys.modules['numpy'] = None\n"
            "import cutecourse.layout as cl; print(cl.make_layout((4, 8)))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "(4,8):(1,4)"


# --- printing matches the DSL ----------------------------------------------------------

DSL_CASES = [
    (lambda: L((4, 8), (8, 1)), "(4,8):(8,1)"),
    (lambda: L((1, 4)), "(1,4):(0,1)"),
    (lambda: L((4, 1)), "(4,1):(1,0)"),
    (lambda: L(1), "1:0"),
    (lambda: L((2, (1, 3))), "(2,(1,3)):(1,(0,2))"),
    (lambda: composition(L((4, 8), (8, 1)), L(8, 4)), "8:1"),
    (lambda: composition(L((4, 8), (8, 1)), L(1, 4)), "1:1"),
    (lambda: composition(L((4, 8), (8, 1)), L((1, 2), (4, 1))), "(1,2):(1,8)"),
    (lambda: composition(L((4, 8), (8, 1)), L((2, 2), (0, 1))), "(2,2):(0,8)"),
    (lambda: composition(L((4, 8), (8, 1)), (L(2, 2), L(4, 2))), "(2,4):(16,2)"),
    (lambda: composition(L((4, 8), (8, 1)), 1), "1:0"),
    (lambda: composition(L((2, 4, 1)), L(1, 8)), "1:0"),
    (lambda: composition(L((1, 1), (5, 3)), L(4)), "4:3"),
    (lambda: composition(L((2, 1), (3, 5)), L(4)), "(2,2):(3,5)"),
    (lambda: composition(L((2, 4, 1), (1, 2, 9)), L(16)), "(8,2):(1,9)"),
    (lambda: composition(L((4, 8), (1, 5)), L(3)), "3:1"),
    (lambda: logical_divide(L(1024), (128,)), "((128,8)):((1,128))"),
    (lambda: logical_divide(L(1024), L(128)), "(128,8):(1,128)"),
    (lambda: logical_divide(L(1024), 128), "(128,8):(1,128)"),
    (lambda: logical_divide(L((16, 8)), (L(4, 2), None)), "((4,(2,2)),8):((2,(1,8)),16)"),
    (lambda: logical_divide(L(((4, 2), 8)), ((2, 2), 4)), "(((2,2),(2,1)),(4,2)):(((1,2),(4,0)),(8,32))"),
    (lambda: logical_divide(L(8), L(8)), "(8,1):(1,0)"),
    (lambda: logical_divide(L(8), L(1)), "(1,8):(0,1)"),
    (lambda: zipped_divide(L((16, 8)), (L((2, 2), (1, 4)), 2)), "(((2,2),2),((2,2),4)):(((1,4),16),((2,8),32))"),
    (lambda: tiled_divide(L(((4, 2), 8)), ((2, 2), 4)), "(((2,2),4),(2,1),2):(((1,4),8),(2,0),32)"),
    (lambda: flat_divide(L(16), L((2, 2))), "(2,2,4):(1,2,4)"),
    (lambda: logical_product(L((2, 2)), L(3)), "((2,2),3):((1,2),4)"),
    (lambda: logical_product(L((2, 2)), L(1)), "((2,2),1):((1,2),0)"),
    (lambda: logical_product(L((2, 2), (0, 1)), L(3)), "((2,2),3):((0,1),2)"),
    (lambda: tiled_product(L((2, 2)), L(((2, 2), 3))), "((2,2),(2,2),3):((1,2),(4,8),16)"),
    (lambda: flat_product(L((2, 2)), L((2, 3))), "(2,2,2,3):(1,2,4,8)"),
    (lambda: zipped_product(L(4), L(3)), "(4,3):(1,4)"),
    (lambda: blocked_product(L((2, 2)), L((2, 3))), "((2,2),(2,3)):((1,4),(2,8))"),
    (lambda: blocked_product(L(4), L((2, 3))), "((4,2),(1,3)):((1,4),(0,8))"),
    (lambda: blocked_product(L(4), L(3)), "((4,3)):((1,4))"),
    (lambda: blocked_product(L(4), L((3,))), "((4,(3))):((1,(4)))"),
    (lambda: raked_product(L((2, 2)), L((2, 3))), "((2,2),(3,2)):((4,1),(8,2))"),
    (lambda: raked_product(L(2, 2), L(2)), "(4):(1)"),
    (lambda: raked_product(L(2), L((2, (2,), (4, 4)))), "((2,2),2,16):((2,1),4,8)"),
    (lambda: complement(L(4, 2), 24), "(2,3):(1,8)"),
    (lambda: complement(L(4, 1), 4), "1:0"),
    (lambda: complement(L((2, 2), (0, 1)), 8), "4:2"),
    (lambda: complement(L(4, 2), (4, 8)), "(2,4):(1,8)"),
    (lambda: complement(L(4, 2), L((4, 8), (1, 8))), "(2,4):(1,8)"),
    (lambda: complement(L(4, 2), 20), "(2,3):(1,8)"),
    (lambda: right_inverse(L((4, 8), (8, 1))), "(8,4):(4,1)"),
    (lambda: right_inverse(L((2, 2), (0, 1))), "2:2"),
    (lambda: right_inverse(L(4, 2)), "1:0"),
    (lambda: left_inverse(L((4, 8), (8, 1))), "(8,4):(4,1)"),
    (lambda: left_inverse(L(4, 2)), "(2,4):(0,1)"),
    (lambda: left_inverse(L((2, 4), (8, 1))), "(8,2):(2,1)"),
    (lambda: left_inverse(L((2, 3), (1, 3))), "(3,3):(1,2)"),
    (lambda: left_inverse(L(1, 3)), "1:0"),
    (lambda: coalesce(L((2, (1, 6)), (1, (6, 2)))), "12:1"),
    (lambda: coalesce(L((2, 4), (0, 0))), "8:0"),
    (lambda: coalesce(L((2, 4), (-1, -2))), "8:-1"),
    (lambda: coalesce(L(((2, 2), (1, 1)), ((1, 2), (3, 4))), target_profile=(1, 1)), "(4,1):(1,0)"),
    (lambda: coalesce(L((2, 4), (1, 2)), target_profile=(1,)), "(2,4):(1,2)"),
    (lambda: filter(L((2, 4), (0, 0))), "1:0"),
    (lambda: filter_zeros(L((2, 1, 3), (1, 4, 0))), "(2,1,1):(1,4,0)"),
    (lambda: make_ordered_layout((4, 1, 2), order=(2, 0, 1)), "(4,1,2):(2,0,1)"),
    (lambda: recast_layout(32, 16, L((4, 8), (8, 1))), "(4,4):(4,1)"),
    (lambda: recast_layout(32, 16, L((4, 8), (0, 1))), "(4,4):(0,1)"),
    (lambda: recast_layout(32, 8, L((4, 8), (2, 8))), "(2,8):(1,2)"),
    (lambda: recast_layout(8, 32, L((4, 8), (0, 1))), "(4,32):(0,1)"),
    (lambda: recast_layout(16, 24, L((4, 8), (8, 1))), "(4,12):(12,1)"),
    (lambda: make_layout_tv(L((4, 8), (8, 1)), L((1, 4))), "((4, 32), ((8,4),4):((16,1),4))"),
    (lambda: make_composed_layout(make_swizzle(3, 3, 3), 0, L((8, 64), (64, 1))), "S<3,3,3> o 0 o (8,64):(64,1)"),
    (lambda: make_composed_layout(L(8, 2), 0, L((8, 64), (64, 1))), "8:2 o 0 o (8,64):(64,1)"),
    (lambda: composition(make_composed_layout(make_swizzle(3, 3, 3), 0, L((8, 64), (64, 1))), L(4, 2)),
     "S<3,3,3> o 0 o 4:128"),
    (lambda: slice_(L((4, 8), (8, 1)), (None, 0)), "(4):(8)"),
    (lambda: slice_(L((4, 8), (8, 1)), 3), "():()"),
    (lambda: slice_(L((4, (2, 3)), (8, (1, 2))), (2, (None, None))), "(2,3):(1,2)"),
    (lambda: group_modes(L((2, 3, 4, 5)), 0, 1), "((2),3,4,5):((1),2,6,24)"),
    (lambda: group_modes(L((2, 3, 4, 5)), 1, -1), "(2,(3,4),5):(1,(2,6),24)"),
    (lambda: group_modes(L(8), 0, 1), "(8):(1)"),
    (lambda: select(L((2, 3, 4, 5)), mode=[2]), "(4):(6)"),
    (lambda: append(L((2, 3)), L((4, 5), (9, 7))), "(2,3,(4,5)):(1,2,(9,7))"),
    (lambda: prepend(L(2), L(1, 0), up_to_rank=3), "(1,1,2):(0,0,1)"),
    (lambda: flatten(L(((8,),))), "(8):(1)"),
]


@pytest.mark.parametrize("case", range(len(DSL_CASES)))
def test_prints_like_dsl(case):
    fn, expected = DSL_CASES[case]
    assert str(fn()) == expected


# --- Layout API -----------------------------------------------------------------------

def test_layout_api():
    A = Layout((4, (2, 3)), (8, (1, 2)))
    assert A.shape == (4, (2, 3)) and A.stride == (8, (1, 2))
    assert (A(5), A((1, 4)), A((1, (1, 2))), A(1, (1, 2))) == (9, 12, 13, 13)
    assert crd2idx((1, 4), A) == 12 and idx2crd(13, (4, (2, 3))) == (1, (1, 1))
    assert A.idx2crd(13) == (1, (1, 1))
    assert (size(A), cosize(A), rank(A), depth(A)) == (24, 30, 2, 2)
    assert (A.size(), A.cosize(), A.rank, A.depth, len(A)) == (24, 30, 2, 2, 2)
    assert size(A, mode=[1]) == 6 and str(get(A, mode=[1, 0])) == "2:1"
    assert str(A[1]) == "(2,3):(1,2)" and str(A[-1]) == "(2,3):(1,2)"
    assert str(A[(None, (None, 1))]) == "(4,2):(8,1)" and str(A(None, 1)) == "(4):(8)"
    assert str(L(8)[0]) == "8:1"
    assert A == Layout((4, (2, 3)), (8, (1, 2))) and hash(A) == hash(Layout((4, (2, 3)), (8, (1, 2))))
    assert A != Layout((4, (2, 3))) and repr(A) == str(A)
    assert [str(m) for m in A] == ["4:8", "(2,3):(1,2)"]
    assert slice_and_offset(L((4, 8), (8, 1)), (None, 3)) == (Layout((4,), (8,)), 3)
    assert str(make_layout([2, [3, 4]])) == "(2,(3,4)):(1,(2,6))"
    assert str(cl.make_layout_row_major((4, 1, 2))) == "(4,1,2):(2,0,1)"
    assert str(make_layout((L(2), L((3, 4))))) == "(2,(3,4)):(1,(1,3))"
    assert str(make_layout(())) == "():()" and size(make_layout(())) == 1


def test_parse_layout_roundtrip():
    for text in ["(4,8):(8,1)", "8:1", "((128,8)):((1,128))", "():()", "(2,(1,3)):(1,(0,2))", "8:-1",
                 "S<3,3,3> o 0 o (8,64):(64,1)", "S<2,3,-3> o 4 o 8:1", "8:2 o 0 o (8,64):(64,1)"]:
        assert str(parse_layout(text)) == text
    assert isinstance(parse_layout("S<3,3,3> o 0 o (8,64):(64,1)"), ComposedLayout)
    assert parse_layout(" ( 4 , 8 ) : ( 8 , 1 ) ") == L((4, 8), (8, 1))


@pytest.mark.parametrize("text,match", [
    ("(4,8)", "expected ':'"), ("(4,8:(8,1)", "expected ',' or '\\)'"), ("(4,8):(8,1) x", "expected end"),
    ("(4,8):(8,1,2)", "congruent"), ("(4,0):(1,4)", "positive"), ("a:b", "expected an int"),
    ("S<3,3> o 0 o 8:1", "expected an int"), ("S<3,3,3> o x o 8:1", "offset"), ("8:1 o 0", "inner o offset o outer"),
    ("", "expected an int"),
])
def test_parse_layout_rejects(text, match):
    with pytest.raises(ValueError, match=match):
        parse_layout(text)


# --- preconditions: accepted and rejected -------------------------------------------

def test_layout_construction_preconditions():
    assert str(L((4, 8), (1, 4))) == "(4,8):(1,4)"
    with pytest.raises(ValueError, match="congruent.*shape \\(4,8\\).*stride \\(1,2,3\\)"):
        L((4, 8), (1, 2, 3))
    with pytest.raises(ValueError, match="congruent"):
        Layout((4, 8), 2)
    with pytest.raises(ValueError, match="positive.*\\[0\\]"):
        L((4, 0))
    with pytest.raises(ValueError, match="positive.*\\[-2\\]"):
        Layout((4, -2))
    with pytest.raises(ValueError, match="non-integer"):
        L((4, 2.0))
    with pytest.raises(ValueError, match="non-integer"):
        L(True)
    with pytest.raises(ValueError, match="non-integer"):
        L((4, 8), ("a", 1))
    deep = 1
    for _ in range(100):
        deep = (deep,)
    with pytest.raises(ValueError, match="deeper"):
        L(deep)


def test_coordinate_preconditions():
    A = L((4, (2, 3)), (8, (1, 2)))
    assert A(23) == 3 * 8 + 1 + 2 * 2
    for bad in (-1, (-1, 0), (0, (2, -1)), (0, 1, 2), ((0, 1), 2)):
        with pytest.raises(ValueError, match="cannot index layout .*non-negative ints"):
            A(bad)
    with pytest.raises(ValueError, match="index -1 must be a non-negative int"):
        idx2crd(-1, (4, (2, 3)))
    with pytest.raises(ValueError, match="coordinate -1 must be a non-negative int or None"):
        slice_(A, (-1, None))
    with pytest.raises(ValueError, match="does not match"):
        slice_(A, (None, None, None))
    with pytest.raises(ValueError, match="out of range"):
        A[2]
    with pytest.raises(ValueError, match="mode indices"):
        select(A, (0, 2))
    with pytest.raises(ValueError, match="begin <= end"):
        group_modes(A, 2, 1)


def test_ordered_layout_preconditions():
    assert str(make_ordered_layout((4, 8, 2), order=(2, 0, 1))) == "(4,8,2):(16,1,8)"
    with pytest.raises(ValueError, match="distinct.*\\(1,1\\)"):
        make_ordered_layout((4, 8), (1, 1))
    with pytest.raises(ValueError, match="congruent"):
        make_ordered_layout((4, 8), (0, 1, 2))
    with pytest.raises(ValueError, match="distinct non-negative"):
        make_ordered_layout((4, 8), (-1, 0))


def test_composition_preconditions():
    A = L((4, 8), (1, 5))
    assert str(composition(A, L(2, 16))) == "2:20"
    assert str(composition(A, L(64))) == "(4,16):(1,5)"
    with pytest.raises(ValueError, match="shape divisibility.*6:1"):
        composition(A, L(6))
    with pytest.raises(ValueError, match="shape divisibility.*3:2"):
        composition(A, L(3, 2))
    with pytest.raises(ValueError, match="stride divisibility.*4:3"):
        composition(A, L(4, 3))
    with pytest.raises(ValueError, match="non-negative"):
        composition(A, L(2, -1))
    with pytest.raises(ValueError, match="more modes"):
        composition(A, (2, 2, 2))
    assert algebra.composition_error(A, L(6)) is not None and algebra.composition_error(A, L(2)) is None


def test_by_mode_composition_drops_untiled_modes():
    # The DSL's result has the tiler's rank; the divides and products keep the untiled modes.
    assert str(composition(L((4, 8), (1, 4)), (2,))) == "(2):(1)"
    assert str(composition(L(((4, 3, 16), 2), ((9, 6, 1), 23)), (L(2, 12),))) == "(2):(1)"
    assert str(composition(L((4, 8, 3), (1, 4, 32)), (L(2), L(4, 2)))) == "(2,4):(1,8)"
    assert str(composition(L(((4, 8), 3), ((1, 4), 32)), ((2,),))) == "((2)):((1))"
    assert str(composition(L((4, 8), (1, 4)), (2, None))) == "(2,8):(1,4)"  # None keeps a mode
    assert str(composition(L((4, 8), (1, 4)), ())) == "():()"
    C = make_composed_layout(make_swizzle(1, 2, 3), 0, L((4, 8), (1, 4)))
    assert str(composition(C, (2,))) == "S<1,2,3> o 0 o (2):(1)"
    assert str(logical_divide(L((4, 8), (1, 4)), (2,))) == "((2,2),8):((1,2),4)"
    assert str(logical_product(L((4, 8), (1, 4)), (2,))) == "((4,2),8):((1,4),4)"
    assert str(zipped_divide(L((4, 8), (1, 4)), (2,))) == "((2),(2,8)):((1),(2,4))"
    with pytest.raises(ValueError, match="composition: shape divisibility.*6:1"):
        composition(L(((4, 2), 8), ((1, 8), 16)), (6,))  # each tiled mode keeps its preconditions


def test_evaluation_past_the_size_unfolds_into_the_last_mode_like_the_dsl():
    # what the DSL 4.8.1 prints for each (tests/unit/test_layout_vs_dsl.py checks them against it)
    assert make_layout(4)(6) == 6
    assert crd2idx(6, L(4, 1)) == 6
    assert L((2, 3), (3, 1))(7) == 6  # 7 -> (1,3): the last mode takes the overflow
    assert L((2, 3), (3, 1))(10) == 5  # 10 -> (0,5)
    assert idx2crd(7, (2, 3)) == (1, 3)
    assert L((2, 3), (3, 1))((3, 1)) == 10  # a natural coordinate past its mode: plain dot product
    assert L((2, (3, 2)), (3, (1, 10)))(13) == 23  # 13 -> (1,6) -> (1,(0,2))
    assert L((2, (3, 2)), (3, (1, 10)))((1, 7)) == 24  # 7 in (3,2) -> (1,2)
    assert L((4, 1), (1, 0))(6) == 2  # the overflow lands in a size-1, stride-0 last mode


def test_complement_follows_cute_where_strides_are_no_multiple_of_the_previous_extent():
    # the textbook precondition fails (6 and 10 are no multiple of 4); the DSL 4.8.1 prints these
    assert str(complement(L((4, 6), (1, 6)), 1)) == "1:0"
    assert str(complement(L((4, 10), (1, 10)), 1)) == "2:4"
    assert str(complement(L((4, 6), (1, 6)), 48)) == "2:36"
    assert str(complement(L((4, 2), (1, 10)), 40)) == "(2,2):(4,20)"


def test_complement_preconditions():
    assert str(complement(L((4, 6), (1, 8)), 64)) == "(2,2):(4,48)"
    with pytest.raises(ValueError, match="mode 2:1 starts at 1, inside them \\(they reach 2\\).*extent-0"):
        complement(L((2, 2), (1, 1)), 8)  # the DSL prints (0,4):(2,2)
    with pytest.raises(ValueError, match="mode 2:5 starts at 5, inside them \\(they reach 6\\)"):
        complement(L((3, 2), (2, 5)), 30)  # injective, but interleaved: the DSL prints (2,0,3):(1,6,10)
    with pytest.raises(ValueError, match="mode 4:-1 in 4:-1"):
        complement(L(4, -1), 8)  # the DSL prints (-1,-2):(1,-4)
    assert str(complement(L((1, 4), (-3, 0)), 34)) == "34:1"  # size-1 and stride-0 modes are ignored, as in CuTe
    with pytest.raises(ValueError, match="cotarget"):
        complement(L(4), 0)
    assert algebra.complement_error(L(4, 2), 24) is None


def test_complement_tuple_cotarget_folds_ceil_div():
    # ceil_div((c0, c1, ...), e) folds over the leaves: c -> ceil(c/r), r -> ceil(r/c); not ceil(size/e).
    assert str(complement(L(4, 3), (10, 2))) == "3:1"  # (1,1), though ceil(20/12) = 2
    assert str(complement(L(4, 3), (30, 2))) == "(3,6):(1,12)"  # (3,2) laid out from 12: 6:12
    assert str(complement(L(4, 3), 60)) == "(3,5):(1,12)"  # the int of the same size differs
    assert str(complement(L(((8, 4, 16, 2),), ((256, 2, 8, 1),)), (7680, 4))) == "(2,16):(128,2048)"
    assert str(complement(L(4, 3), ((10, 2), 3))) == "(3,3):(1,12)"  # nested: the same fold over leaves
    assert str(complement(L(4, 3), (2, (10, 3)))) == "(3,6):(1,12)"
    assert str(complement(L(4, 3), L((30, 2), (1, 30)))) == "(3,6):(1,12)"  # a Layout cotarget: its shape
    assert str(complement(L((4, 2), (0, 1)), (5, 3))) == "9:2"
    assert str(complement(L(4, 0), (5, 3))) == "15:1"
    for bad in [(3, 0), (2, (3, -1))]:
        with pytest.raises(ValueError, match="cotarget .* is not a valid shape.*positive"):
            complement(L(4, 3), bad)


def test_inverse_preconditions():
    assert str(right_inverse(L((2, 2), (1, 1)))) == "2:1"  # always defined
    with pytest.raises(ValueError, match="non-negative"):
        right_inverse(L(4, -1))
    with pytest.raises(ValueError, match="injective.*2:0"):
        left_inverse(L((2, 2), (0, 1)))
    with pytest.raises(ValueError, match="injective"):
        left_inverse(L((2, 2), (1, 1)))
    with pytest.raises(ValueError, match="stride divisibility"):
        left_inverse(L((2, 2), (2, 5)))
    for lay in [L((4, 8), (8, 1)), L(4, 2), L((2, 3), (1, 3)), L((2, (3, 2)), (12, (1, 3)))]:
        inv = left_inverse(lay)
        assert all(inv(lay(i)) == i for i in range(size(lay)))
        rinv = right_inverse(lay)
        assert all(lay(rinv(i)) == i for i in range(size(rinv)))


def test_divide_preconditions():
    assert str(logical_divide(L((6, 2), (2, 1)), L(3))) == "(3,(2,2)):(2,(6,1))"
    with pytest.raises(ValueError, match="divisibility"):
        logical_divide(L((6, 2), (2, 1)), L(4))
    with pytest.raises(ValueError, match="divisible by the tiler's extent 3"):
        logical_divide(L(8), L(3))
    with pytest.raises(ValueError, match="divisible by the tiler's extent 8"):
        logical_divide(L(20), L(4, 2))
    with pytest.raises(ValueError, match="no complement.*inside them"):
        logical_divide(L(16), L((2, 2), (1, 1)))
    assert str(logical_divide(L(40), L((4, 2), (1, 10)))) == "((4,2),(2,2)):((1,10),(4,20))"  # as the DSL
    with pytest.raises(ValueError, match="more modes"):
        logical_divide(L((4, 8)), (2, 2, 2))
    with pytest.raises(ValueError, match="None mode"):
        zipped_divide(L((4, 8)), (None, 4))
    assert str(logical_divide(L((4, 8)), (None, 4))) == "(4,(4,2)):(1,(4,16))"
    assert algebra.divide_error(L(8), L(3)) and algebra.divide_error(L(8), L(4)) is None


def test_product_preconditions():
    assert str(logical_product(L((2, 2), (4, 1)), L(2))) == "((2,2),2):((4,1),2)"
    with pytest.raises(ValueError, match="logical_product.*divisibility"):
        logical_product(L((2, 2), (4, 1)), L(3))
    with pytest.raises(ValueError, match="logical_product.*divisibility"):
        logical_product(L(4, 2), L(3))
    with pytest.raises(ValueError, match="int-shaped or both tuple-shaped"):
        blocked_product(L((4,), (1,)), L(3))
    with pytest.raises(ValueError, match="int-shaped or both tuple-shaped"):
        raked_product(L(4), L((3,)))
    with pytest.raises(ValueError, match="bijection"):
        make_layout_tv(L(4, 4), L(2))
    assert algebra.product_error(L(4, 2), L(3)) and algebra.product_error(L(4), L(3)) is None


def test_recast_preconditions():
    assert str(recast_layout(32, 16, L((4, 8), (1, 4)))) == "(2,8):(1,2)"
    with pytest.raises(ValueError, match="4:3 .*cannot be grouped by 2: stride divisibility.*3 and 2"):
        recast_layout(32, 16, L((4, 8), (3, 12)))
    with pytest.raises(ValueError, match="3:1 .*cannot be grouped by 2: shape divisibility.*shape 3 and 2"):
        recast_layout(32, 16, L((3, 8), (1, 3)))
    with pytest.raises(ValueError, match="cannot be grouped by 3"):
        recast_layout(24, 16, L((4, 8), (8, 1)))
    with pytest.raises(ValueError, match="new_type_bits must be a positive int"):
        recast_layout(0, 16, L(4))
    assert algebra.recast_error(16, 32, L(4)) is None


def test_recast_upcast_follows_shape_div():
    # upcast<u>: s:d -> shape_div(s, shape_div(u, |d|)) : sign(d)*shape_div(|d|, u); shape_div(a, b) >= 1
    assert str(recast_layout(32, 8, L((1, 8), (1, 1)))) == "(1,2):(1,1)"  # a size-1 unit-stride mode stays 1
    assert str(recast_layout(16, 4, L((2, 12), (1, 2)))) == "(1,6):(1,1)"  # 2 divides 4: shrinks to 1
    assert str(recast_layout(64, 16, L((2, 8), (1, 4)))) == "(1,8):(1,1)"
    assert str(recast_layout(64, 16, L((2, 8), (-1, 2)))) == "(1,4):(-1,1)"
    assert str(recast_layout(64, 16, L((8, 2), (1, 0)))) == "(2,2):(1,0)"  # stride 0 is untouched
    assert str(recast_layout(32, 24, L((2, 8), (1, 2)))) == "(3,12):(1,1)"  # upcast 4, then downcast 3
    # where neither divides the DSL rounds up ((3,8):(1,3) -> (2,8):(1,2)); we refuse
    with pytest.raises(ValueError, match="3:1 .*grouped by 2: shape divisibility needs shape 3 and 2"):
        recast_layout(16, 8, L((3, 8), (1, 3)))
    with pytest.raises(ValueError, match="2:1 .*grouped by 3: shape divisibility needs shape 2 and 3"):
        recast_layout(48, 16, L((2, 6), (1, 2)))
    with pytest.raises(ValueError, match="1:5 .*grouped by 4: stride divisibility needs \\|stride\\| 5 and 4"):
        recast_layout(64, 16, L((1, 8), (5, 1)))  # a size-1 mode still needs a dividing stride


def test_coalesce_profile_precondition():
    assert str(coalesce(L((2, (3, 4)), (1, (2, 6))), target_profile=(1, (1, 1)))) == "(2,(3,4)):(1,(2,6))"
    with pytest.raises(ValueError, match="more modes"):
        coalesce(L((2, 4)), target_profile=(1, 1, 1))


def test_swizzle():
    sw = Swizzle(3, 3, 3)
    assert str(sw) == "S<3,3,3>" and sw == make_swizzle(3, 3, 3)
    # offset ^ ((offset & (0b111 << 6)) >> 3)
    assert all(sw(x) == x ^ ((x & (7 << 6)) >> 3) for x in range(1024))
    neg = Swizzle(2, 0, -3)
    assert all(neg(x) == x ^ ((x & 3) << 3) for x in range(64))
    assert all(sorted(sw(x) for x in range(512 * k, 512 * (k + 1))) == list(range(512 * k, 512 * (k + 1)))
               for k in range(3))
    with pytest.raises(ValueError, match="\\|S\\| must be at least B"):
        Swizzle(3, 3, 2)
    with pytest.raises(ValueError, match="non-negative"):
        Swizzle(-1, 3, 3)


def test_identity_swizzle_is_canonical():
    # Every b=0 swizzle is the identity; the DSL prints them all as S<0,4,3>.
    for m, s in [(1, 1), (0, 0), (4, 3), (2, -3), (10, 20), (1, -9)]:
        sw = make_swizzle(0, m, s)
        assert str(sw) == "S<0,4,3>" and sw == Swizzle(0, 4, 3) and hash(sw) == hash(Swizzle(0, 4, 3))
        assert all(sw(x) == x for x in range(256))
    C = make_composed_layout(make_swizzle(0, 2, 1), 3, L((4, 8), (8, 1)))
    assert str(C) == "S<0,4,3> o 3 o (4,8):(8,1)" and C((3, 5)) == 32
    assert str(parse_layout("S<0,1,1> o 0 o (4,8):(8,1)")) == "S<0,4,3> o 0 o (4,8):(8,1)"
    # the preconditions still apply to b=0 (the DSL silently maps even these to S<0,4,3>)
    with pytest.raises(ValueError, match="B and M must be non-negative, got B=0, M=-1"):
        make_swizzle(0, -1, 3)
    with pytest.raises(ValueError, match="\\|S\\| must be at least B.*B=2, S=1"):
        make_swizzle(2, 1, 1)
    C = make_composed_layout(sw, 0, L((8, 64), (64, 1)))
    assert C((1, 0)) == sw(64) and C.size() == 512 and C.cosize() == 512 and C.shape == (8, 64)
    assert C == parse_layout(str(C)) and hash(C) == hash(parse_layout(str(C)))
    with pytest.raises(ValueError, match="offset must be an int"):
        make_composed_layout(sw, (1, 2), L(8))


def test_no_input_hangs_on_big_layouts():
    # Large extents must stay O(rank): a 2**40-element layout is fine.
    big = L((1 << 20, 1 << 20))
    assert size(logical_divide(big, (128, 64))) == 1 << 40
    assert str(complement(L(1 << 20, 1 << 10), 1 << 40)) == "(1024,1024):(1,1073741824)"
    assert cl.is_injective(L((1 << 20, 4), (4, 1)))
