"""The fragment explorer shows what cutecourse.fragments says: a lane's bright cells and its registers are that lane's
values, a picked cell names the lane and the register that hold it, for every instruction, lane and cell; and it
redraws on every change and turns bad input into a message."""

from __future__ import annotations

import dataclasses
import doctest
import html
import re
import xml.etree.ElementTree as ET

import pytest

from cutecourse import fragments as F
from cutecourse.viz import fragment_explorer as FE  # its tables and pictures need no ipywidgets

from .needs import widgets

NS = "{http://www.w3.org/2000/svg}"


def expected_cells(name: str) -> list[list[tuple[int, int]]]:
    """Per lane, the picture cell of each value, in register order, from cutecourse.fragments' own tables (not the
    explorer's re-indexed layouts): A (m, k), B drawn (k, n), C (m, n); a copy's element of matrix j, row r, column
    c at row 8 j + r."""
    if name.startswith("mma.sync"):
        k, operand = name.split()[1:]
        table = F.mma_fragments(F.mma_atom(int(k[6:])))[operand].tolist()
        return [[(b, a) if operand == "B" else (a, b) for a, b in lane] for lane in table]
    if name.startswith("wgmma"):
        return [[tuple(x) for x in lane] for lane in F.coords(F.wgmma_atom(16).layout_c, (64, 16)).tolist()]
    op, x, *trans = name.split(".")
    atom = (F.ldmatrix if op == "ldmatrix" else F.stmatrix)(int(x[1:]), bool(trans))
    return [[(8 * j + r, c) for reg in lane for j, r, c in reg] for lane in F.register_elements(atom).tolist()]


def cells_of(svg: str) -> dict[tuple[int, int], dict[str, str]]:
    """Each drawn cell's attributes by its (row, column)."""
    out = {}
    for g in ET.fromstring(svg).iter(f"{NS}g"):
        if "cell" in g.get("class", "").split():
            out[tuple(int(x) for x in g.get("data-crd")[1:-1].split(","))] = dict(g.attrib)
    return out


def bright(svg: str) -> set[tuple[int, int]]:
    return {crd for crd, a in cells_of(svg).items() if "opacity" not in a}


def named_cells(line: str) -> list[tuple[int, int]]:
    """The cells a readout line names, in order: A[9][2] is (9, 2), M1[2][3] is (8 + 2, 3)."""
    out = []
    for matrix, r, c in re.findall(r"\b(?:[ABC]|M(\d))\[(\d+)\]\[(\d+)\]", line):
        out.append((8 * int(matrix) + int(r) if matrix else int(r), int(c)))
    return out


@widgets
def test_docstring_examples_run():
    result = doctest.testmod(FE, optionflags=doctest.ELLIPSIS)
    assert result.failed == 0 and result.attempted > 0


def test_the_menu_has_every_instruction_the_lesson_names():
    names = set(FE.INSTRUCTIONS)
    for op in ("ldmatrix", "stmatrix"):
        assert {f"{op}.x{x}{t}" for x in (1, 2, 4) for t in ("", ".trans")} <= names
    assert {f"mma.sync m16n8k{k} {o}" for k in (8, 16) for o in "ABC"} <= names and "wgmma m64n16k16 C" in names


@pytest.mark.parametrize("name", FE.INSTRUCTIONS)
def test_every_cell_is_labelled_with_its_owner_and_a_lane_lights_its_own(name):
    frag = FE.fragment(name)
    want = expected_cells(name)
    owner = {cell: (lane, v) for lane, cells in enumerate(want) for v, cell in enumerate(cells)}
    drawn = cells_of(FE.fragment_picture(frag).svg)
    assert frag.threads == len(want) and len(drawn) == frag.shape[0] * frag.shape[1] == len(owner)
    assert {crd: (int(a["data-t"]), int(a["data-v"])) for crd, a in drawn.items()} == owner
    assert bright(FE.fragment_picture(frag).svg) == set(owner)  # no lane picked: nothing fades
    for lane in sorted({0, 5, frag.threads // 2 + 3, frag.threads - 1}):  # each picture draws every cell: a few
        assert bright(FE.fragment_picture(frag, lane).svg) == set(want[lane]), (name, lane)


@pytest.mark.parametrize("name", FE.INSTRUCTIONS)
def test_every_lane_lists_its_values_in_register_order(name):
    frag = FE.fragment(name)
    for lane, cells in enumerate(expected_cells(name)):
        head, held = FE.describe(frag, lane)
        assert named_cells(held) == cells, (name, lane, held)
        assert held.count(" = ") == len(cells) // frag.per_register, held


@pytest.mark.parametrize("name", FE.INSTRUCTIONS)
def test_every_cell_names_the_lane_and_register_that_hold_it(name):
    frag = FE.fragment(name)
    want = expected_cells(name)
    owner = {cell: (lane, v) for lane, cells in enumerate(want) for v, cell in enumerate(cells)}
    rows, cols = frag.shape
    for cell in [(r, c) for r in range(rows) for c in range(cols)]:
        lane, v = owner[cell]
        line = FE.describe(frag, 0, cell)[2]
        who = f"thread {lane} (warp {lane // 32}, lane {lane % 32})" if frag.threads > 32 else f"lane {lane}"
        assert named_cells(line) == [cell] and who in line, (name, cell, line)
        value = (f"d{v // 2}, {'low' if v % 2 == 0 else 'high'} half" if frag.copy else
                 f"{frag.prefix}{v} (register {v // 2}, {'low' if v % 2 == 0 else 'high'} half)"
                 if frag.per_register == 2 else f"as {frag.prefix}{v}")
        assert value in line, (name, cell, line)
    for cell in [(0, 0), (rows - 1, cols - 1), (rows // 2 + 1, cols // 3)]:  # each picture draws every cell: a few
        marked = [crd for crd, a in cells_of(FE.fragment_picture(frag, 0, cell).svg).items() if "strong" in a["class"]]
        assert marked == [cell]


@pytest.mark.parametrize("name", [n for n in FE.INSTRUCTIONS if "matrix" in n])
def test_a_copy_names_whose_address_each_row_comes_from(name):
    frag = FE.fragment(name)
    lanes = F.address_lanes(frag.copy)
    for lane in range(32):
        head = FE.describe(frag, lane)[0]
        if lane < 8 * frag.copy.num_matrices:
            assert f"address of M{lane // 8}'s row {lane % 8}" in head, head
        else:
            assert "address is not read" in head, head
    for row in range(frag.shape[0]):
        line = FE.describe(frag, 0, (row, 5))[2]
        assert f"lane {lanes[row // 8, row % 8]}'s address" in line, line


def test_the_comparison_catches_a_fragment_drawn_the_wrong_way():
    """B drawn as CuTe stores it, (n, k), instead of (k, n): the tests above would fail."""
    frag = FE.fragment("mma.sync m16n8k16 B")
    wrong = dataclasses.replace(frag, layout_tv=F.mma_atom(16).layout_b, tile=(8, (8, 2)))
    want = expected_cells(frag.name)
    assert bright(FE.fragment_picture(wrong, 5).svg) != set(want[5])
    assert named_cells(FE.describe(wrong, 5)[1]) != want[5]


@widgets
def test_the_seeds_thread_5_reads_off_the_explorer():
    """Seed 000: thread 5's d0-d3 of ldmatrix.x4 feeding mma.m16n8k16's A are A[1][2..3], A[9][2..3], A[1][10..11],
    A[9][10..11]."""
    ex = FE.fragment_explorer("mma.sync m16n8k16 A", lane=5)
    held = ex.readout.value.split("<br>")[1]
    assert named_cells(held) == [(1, 2), (1, 3), (9, 2), (9, 3), (1, 10), (1, 11), (9, 10), (9, 11)]


@widgets
def test_selecting_a_lane_or_a_cell_redraws():
    ex = FE.fragment_explorer("ldmatrix.x4", lane=0)
    first, said = ex.picture.value, ex.readout.value
    ex.controls["lane"].value = 9
    assert ex.picture.value != first and ex.readout.value != said and ex.readout.value.startswith("lane 9: ")
    assert bright(ex.picture.value) == set(expected_cells("ldmatrix.x4")[9])
    ex.controls["cell"].value = "(10,3)"
    assert ex.readout.value.split("<br>")[2] == "M1[2][3] comes from lane 10's address, into lane 9's d1, high half"
    ex.controls["instruction"].value = "stmatrix.x4"
    assert ex.readout.value.split("<br>")[2] == ("M1[2][3] comes from lane 9's d1, high half, stored at lane 10's "
                                                 "address")


@widgets
def test_changing_the_instruction_fits_the_lane_slider_to_its_threads():
    ex = FE.fragment_explorer("wgmma m64n16k16 C", lane=100)
    slider = ex.controls["lane"]
    assert (slider.max, slider.description) == (127, "Thread:") and ex.readout.value.startswith("thread 100 (warp 3")
    ex.controls["instruction"].value = "mma.sync m16n8k8 C"
    assert (slider.value, slider.max, slider.description) == (31, 31, "Lane:") and ex.message.value == ""
    assert ex.readout.value.startswith("lane 31 (groupID 7, threadID_in_group 3) holds C in 4 fp32 accumulators")
    assert bright(ex.picture.value) == set(expected_cells("mma.sync m16n8k8 C")[31])


@widgets
@pytest.mark.parametrize("text, message", [
    ("(16,0)", "outside mma.sync m16n8k16 A's 16x16 tile: rows 0-15, columns 0-15"),
    ("(1,2", "does not parse"),
    ("7", "must be (row, column), e.g. (9,2)"),
    ("(1,2,3)", "must be (row, column)"),
    ("(" * 5000, "limit is 200"),
])
def test_a_bad_cell_shows_a_short_message_not_a_traceback(text, message):
    ex = FE.fragment_explorer()
    ex.controls["cell"].value = text
    assert message in html.unescape(ex.message.value) and "Traceback" not in ex.message.value
    assert len(ex.message.value) < 600
    assert ex.picture.value == "" and ex.readout.value == ""
    ex.controls["cell"].value = "(9,2)"
    assert ex.message.value == ""
    assert ex.readout.value.endswith("A[9][2] is held by lane 5 as a2 (register 1, low half)")


@widgets
@pytest.mark.parametrize("kwargs, message", [
    ({"instruction": "mma.sync m16n8k32 A"},
     "instruction='mma.sync m16n8k32 A' is not one the explorer knows; use one"),
    ({"lane": 32}, "lane=32 is not a thread of mma.sync m16n8k16 A; use 0-31"),
    ({"instruction": "wgmma m64n16k16 C", "lane": 128}, "use 0-127"),
    ({"lane": True}, "lane=True"),
    ({"cell": (16, 0)}, "cell (16, 0) is outside"),
    ({"cell": [1, 2]}, "cell=[1, 2] must be (row, column) or its text such as '(9,2)'"),
])
def test_bad_arguments_raise_naming_the_argument_and_the_fix(kwargs, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        FE.fragment_explorer(**kwargs)
