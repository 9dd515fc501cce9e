"""The SVG pictures parse as XML, hold one cell per element, and carry the right labels, colours and counts."""

from __future__ import annotations

import doctest
import functools
import importlib
import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from cutecourse import viz
from cutecourse.hw.banks import LDMATRIX_8x8
from cutecourse.layout import make_layout, make_layout_tv, parse_layout
from cutecourse.viz import banks, gemm_hierarchy, grid, mma, svg

viz_layout = importlib.import_module("cutecourse.viz.layout")  # the package's `layout` is the function

NS = "{http://www.w3.org/2000/svg}"


def cells(picture) -> list[ET.Element]:
    root = ET.fromstring(picture.svg)
    return [g for g in root.iter(f"{NS}g") if "cell" in g.get("class", "").split()]


def label(g: ET.Element) -> str:
    return g.find(f"{NS}text").text


def fill(g: ET.Element) -> str:
    return g.find(f"{NS}rect").get("fill")


def by_crd(picture) -> dict[str, str]:
    return {g.get("data-crd"): label(g) for g in cells(picture)}


@pytest.mark.parametrize("module", [svg, grid, viz_layout, mma, banks, gemm_hierarchy, viz])
def test_docstring_examples_run(module):
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert result.failed == 0 and result.attempted > 0


def test_layout_has_one_cell_per_coordinate_labelled_with_its_index():
    L = make_layout((4, 8), stride=(8, 1))
    got = by_crd(viz.layout(L))
    assert len(got) == 32
    assert got == {f"({r},{c})": str(L((r, c))) for r in range(4) for c in range(8)}


def test_a_different_layout_gives_different_labels():
    row_major = by_crd(viz.layout("(4,8):(8,1)"))
    col_major = by_crd(viz.layout("(4,8):(1,4)"))
    assert row_major.keys() == col_major.keys() and row_major != col_major
    assert row_major["(1,0)"] == "8" and col_major["(1,0)"] == "1"


def test_rank1_layout_draws_one_row():
    pic = viz.layout(make_layout(8, stride=2))
    assert [label(g) for g in cells(pic)] == [str(2 * i) for i in range(8)]
    ys = {g.find(f"{NS}rect").get("y") for g in cells(pic)}
    assert len(ys) == 1


def test_hierarchical_modes_get_grouping_lines():
    root = ET.fromstring(viz.layout("((2,2),(2,4)):((1,8),(2,16))").svg)
    groups = [ln for ln in root.iter(f"{NS}line") if ln.get("class") == "group"]
    assert len(groups) == 1 + 3  # a line after row 2; after columns 2, 4, 6
    flat = ET.fromstring(viz.layout("(4,8):(1,4)").svg)
    assert not [ln for ln in flat.iter(f"{NS}line") if ln.get("class") == "group"]


def _column_edges(picture) -> list[tuple[float, float]]:
    """(left, right) of each column of cells in row 0."""
    row0 = sorted((float(g.find(f"{NS}rect").get("x")), float(g.find(f"{NS}rect").get("width")))
                  for g in cells(picture) if g.get("data-crd", "").startswith("(0,"))
    return [(x, x + w) for x, w in row0]


def test_nested_modes_stand_apart_at_100_percent_zoom():
    """Groups of a nested mode are separated by a gap of several pixels holding a 2-pixel line (an outer level: a
    wider gap, a thicker line); cells of one group touch. A line on the 0.5-pixel cell border alone was visible only
    when zoomed in."""
    cols = _column_edges(viz.layout("(2,((2,2),2)):(1,((2,4),8))"))
    gaps = [round(b[0] - a[1], 3) for a, b in zip(cols, cols[1:])]
    assert gaps == [0, 5, 0, 6, 0, 5, 0], gaps
    root = ET.fromstring(viz.layout("(2,((2,2),2)):(1,((2,4),8))").svg)
    widths = sorted(float(ln.get("stroke-width")) for ln in root.iter(f"{NS}line") if ln.get("class") == "group")
    assert widths == [2, 2, 3]
    flat = _column_edges(viz.layout("(2,8):(8,1)"))
    assert all(round(b[0] - a[1], 3) == 0 for a, b in zip(flat, flat[1:]))


def test_cells_are_coloured_by_index_or_by_a_colour_function():
    default = cells(viz.layout("(2,2):(1,2)"))
    assert [fill(g) for g in default] == [svg.index_colour(int(label(g))) for g in default]
    custom = cells(viz.layout("(2,2):(1,2)", color=lambda i: "red" if i % 2 else "blue"))
    assert {label(g): fill(g) for g in custom} == {"0": "blue", "1": "red", "2": "blue", "3": "red"}


def test_hover_text_maps_coordinate_to_index():
    g = next(g for g in cells(viz.layout("(4,8):(8,1)")) if g.get("data-crd") == "(1,2)")
    assert g.find(f"{NS}title").text == "(1,2) → 10"


def test_swizzled_layout_draws_swizzled_indices():
    L = parse_layout("S<1,0,1> o 0 o 4:1")
    assert [label(g) for g in cells(viz.layout(L))] == ["0", "1", "3", "2"]


def test_picture_saves_and_displays_inline(tmp_path):
    pic = viz.layout("(2,2):(2,1)")
    path = pic.save(tmp_path / "l.svg")
    assert path.read_text() == pic.svg == pic._repr_svg_()
    assert pic.svg in pic._repr_html_()
    ET.fromstring(pic._repr_html_())


def test_too_large_or_high_rank_layouts_are_refused_with_the_fix():
    with pytest.raises(ValueError, match=r"8192 cells, more than the drawing limit of 4096"):
        viz.layout(make_layout((64, 128)))
    with pytest.raises(ValueError, match="group_modes"):
        viz.layout(make_layout((2, 2, 2)))
    with pytest.raises(ValueError, match="does not parse"):
        viz.layout("(4,8:(8,1)")


def test_tv_layout_labels_each_tile_cell_with_thread_and_value():
    tiler_mn, tv = make_layout_tv(make_layout((4, 8), stride=(8, 1)), make_layout((1, 4)))
    pic = viz.tv_layout(tv, tiler_mn)
    got = cells(pic)
    assert len(got) == 4 * 32
    M = tiler_mn[0]
    for t in range(32):
        for v in range(4):
            i = tv((t, v))
            g = next(g for g in got if g.get("data-crd") == f"({i % M},{i // M})")
            assert label(g) == f"T{t} V{v}" and fill(g) == svg.thread_colour(t)
    assert viz.tv_layout(*make_layout_tv(make_layout((4, 8), stride=(8, 1)), make_layout((1, 4)))[::-1]).svg == pic.svg


def test_tv_layout_explains_a_swapped_argument_order():
    tiler_mn, tv = make_layout_tv(make_layout((4, 8)), make_layout((1, 4)))
    with pytest.raises(ValueError, match=r"tv_layout\(layout_tv, tiler_mn\)"):
        viz.tv_layout(tiler_mn, tv)


def test_mma_atom_places_a_b_c_fragments_with_ptx_ownership():
    root = ET.fromstring(viz.mma_atom("SM80_16x8x16_F16").svg)
    frags = {f.get("data-name"): [g for g in f.iter(f"{NS}g") if g.get("class") == "cell"]
             for f in root.iter(f"{NS}g") if f.get("class") == "fragment"}
    assert {k: len(v) for k, v in frags.items()} == {"A": 256, "B": 128, "C": 128}
    # PTX m16n8k16: lane l holds A[l/4][2(l%4)], B[k=2(l%4)][n=l/4], C[l/4][2(l%4)] as its first value.
    for lane in (0, 5, 31):
        r, c = lane // 4, 2 * (lane % 4)
        a = {g.get("data-crd"): label(g) for g in frags["A"]}
        b = {g.get("data-crd"): label(g) for g in frags["B"]}
        cc = {g.get("data-crd"): label(g) for g in frags["C"]}
        assert a[f"({r},{c})"] == cc[f"({r},{c})"] == f"T{lane} V0"
        assert b[f"({r},{c})"] == f"T{lane} V0"  # B's (n, k)
    # A is left of C, B above it.
    def first_rect(name):
        rect = frags[name][0].find(f"{NS}rect")
        return float(rect.get("x")), float(rect.get("y"))
    assert first_rect("A")[0] < first_rect("C")[0] and first_rect("B")[1] < first_rect("C")[1]
    with pytest.raises(ValueError, match="SM80_16x8x16_F16"):
        viz.mma_atom("SM90_64x8x16")


def test_bank_map_labels_every_element_with_its_bank_and_marks_the_access():
    pic = viz.bank_map("(8,64):(64,1)", 16, LDMATRIX_8x8)
    got = cells(pic)
    assert len(got) == 512
    for g in got:
        off = int(g.get("data-idx"))
        assert label(g) == str((off * 2 // 4) % 32)
    strong = [g for g in got if "strong" in g.get("class")]
    assert sorted(g.get("data-crd") for g in strong) == sorted(f"({r},{c})" for r in range(8) for c in range(8))
    root = ET.fromstring(pic.svg)
    note = next(g for g in root.iter(f"{NS}g") if g.get("class") == "wavefronts")
    assert (note.get("data-wavefronts"), note.get("data-ideal")) == ("8", "1")
    assert "8 wavefronts" in next(t.text for t in root.iter(f"{NS}text") if t.get("class") == "wavefront-note")


def test_bank_map_differs_for_a_swizzled_layout():
    plain = by_crd(viz.bank_map("(8,64):(64,1)", 16))
    swizzled = by_crd(viz.bank_map("S<3,3,3> o 0 o (8,64):(64,1)", 16))
    assert plain["(1,0)"] == "0" and swizzled["(1,0)"] == "4"


def test_bank_map_rejects_bad_element_width_and_too_small_tiles():
    with pytest.raises(ValueError, match="element_bits must be one of"):
        viz.bank_map("(8,64):(64,1)", 12)
    with pytest.raises(ValueError, match="needs a tile of at least 8 rows"):
        viz.bank_map("(4,64):(64,1)", 16, LDMATRIX_8x8)


# --------------------------------------------------------------------------- pictures are whole

ROOT = Path(__file__).resolve().parents[2]


@functools.lru_cache(maxsize=None)
def _font(bold: bool):
    """DejaVu Sans Mono, which matplotlib ships: the monospace font Chromium on Linux draws the pictures with."""
    from matplotlib import font_manager, ft2font

    prop = font_manager.FontProperties(family="DejaVu Sans Mono", weight="bold" if bold else "normal")
    return ft2font.FT2Font(font_manager.findfont(prop, fallback_to_default=False))


def _advance(text: str, size: float, bold: bool) -> float:
    """The width of `text` in pixels, from the font's own advances (a glyph it lacks: one em, a fallback font)."""
    font = _font(bold)
    font.set_size(size, 72)  # 72 dpi: points are pixels
    width = 0.0
    for ch in text:
        width += font.load_char(ord(ch)).linearHoriAdvance / 65536 if font.get_char_index(ord(ch)) else size
    return width


def _property(element: ET.Element, name: str, default: str | None = None) -> str | None:
    """An SVG presentation attribute, or the same property in the element's style (how matplotlib writes them)."""
    if element.get(name) is not None:
        return element.get(name)
    style = {key.strip(): value.strip() for key, value in (part.split(":", 1) for part in
                                                         (element.get("style") or "").split(";") if ":" in part)}
    return style.get(name, default)


def _length(value: str) -> float:
    """A length in the picture's own units: ours are unitless, matplotlib's in pt or px (the viewBox's units)."""
    return float(re.sub(r"(pt|px)$", "", value))


def text_boxes(svg: str) -> tuple[tuple[float, float], list[tuple[str, float, float, float, float]]]:
    """The SVG's (width, height) from its viewBox, and (text, left, right, top, bottom) of every text element:
    our pictures' (centred on their y) and matplotlib's (on their baseline, some turned by 90 degrees)."""
    root = ET.fromstring(svg)
    _, _, width, height = (float(v) for v in root.get("viewBox").split())
    assert (_length(root.get("width")), _length(root.get("height"))) == (width, height), "width/height != viewBox"
    boxes = []
    for t in root.iter(f"{NS}text"):
        text, size = t.text or "", _length(_property(t, "font-size"))
        w = _advance(text, size, _property(t, "font-weight") == "bold")
        x, y = float(t.get("x")), float(t.get("y"))
        along = {"start": 0, "middle": w / 2, "end": w}[_property(t, "text-anchor", "start")]
        across = (size / 2, size / 2) if t.get("style") is None else (0.8 * size, 0.2 * size)  # above, below
        turned = re.match(r"rotate\((-?90)\b", t.get("transform") or "")
        if turned:  # read upwards: the text runs along -y from its anchor, its height along x
            boxes.append((text, x - across[0], x + across[1], y - w + along, y + along))
        else:
            boxes.append((text, x - along, x - along + w, y - across[0], y + across[1]))
    return (width, height), boxes


def cut_texts(svg: str) -> list[str]:
    (width, height), boxes = text_boxes(svg)
    return [f"{text!r} spans x {left:.1f}..{right:.1f}, y {top:.1f}..{bottom:.1f} of {width:g}x{height:g}"
            for text, left, right, top, bottom in boxes
            if left < 0 or right > width or top < 0 or bottom > height]


def notebook_pictures() -> list:
    found = []
    for path in sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb")):
        for i, cell in enumerate(json.loads(path.read_text(encoding="utf-8"))["cells"]):
            for out in cell.get("outputs", []):
                svg = out.get("data", {}).get("image/svg+xml")
                if svg:
                    found.append(pytest.param("".join(svg), id=f"{path.stem}-cell{i}"))
    return found


@pytest.mark.parametrize("svg", notebook_pictures())
def test_every_text_of_every_notebook_picture_lies_inside_the_picture(svg):
    assert cut_texts(svg) == []


def test_the_notebooks_have_pictures_to_measure():
    assert len(notebook_pictures()) >= 10


@pytest.mark.parametrize("make", [
    lambda: viz.layout("2:1", title="a title much longer than the two cells it names, " * 2),
    lambda: viz.tv_layout("((2,2),4):((8,1),2)", (4, 4), title="T" * 120),
    lambda: viz.bank_map("(2,4):(4,1)", 32, title="banks " * 30),
    lambda: viz.layout("(2,((2,2),2)):(1,((2,4),8))"),
    lambda: gemm_hierarchy.gemm_hierarchy(cta=(12345, 67890, 32)),
])
def test_a_picture_grows_to_hold_its_text(make):
    assert cut_texts(make().svg) == []


def test_the_measure_finds_a_cut_title():
    root = ET.fromstring(viz.layout("2:1", title="x" * 50).svg)
    for key, value in (("viewBox", "0 0 100 100"), ("width", "100"), ("height", "100")):
        root.set(key, value)  # the picture as it was drawn before pictures grew to fit their text
    assert [line for line in cut_texts(ET.tostring(root, encoding="unicode")) if line.startswith("'xxxx")]


def test_the_measure_reads_a_matplotlib_charts_text():
    """A chart as the notebooks store it (viz.plots.figure_svg): its texts, the turned y label too, are measured, and
    a picture cut in half is caught."""
    from matplotlib.figure import Figure

    from cutecourse.viz.plots import figure_svg

    fig = Figure(figsize=(4, 3), layout="constrained")
    ax = fig.add_subplot()
    ax.plot([1, 2, 3], [3, 1, 2], label="a line")
    ax.set(xlabel="K", ylabel="relative error")
    ax.legend()
    svg = figure_svg(fig)
    (width, height), boxes = text_boxes(svg)
    assert {"K", "relative error", "a line"} <= {text for text, *_ in boxes} and cut_texts(svg) == []
    turned = next(box for box in boxes if box[0] == "relative error")
    assert turned[4] - turned[3] > turned[2] - turned[1]  # read upwards: taller than wide
    root = ET.fromstring(svg)
    for key, value in (("viewBox", f"0 0 {width / 2} {height}"), ("width", f"{width / 2}pt")):
        root.set(key, value)
    assert cut_texts(ET.tostring(root, encoding="unicode"))
