"""The explorers redraw in-process when a control changes, and turn bad input into a short message."""

from __future__ import annotations

import doctest
import os
import xml.etree.ElementTree as ET

import pytest

try:
    from cutecourse.viz import plots, widgets
except ModuleNotFoundError as missing:  # the GPU test host has no ipywidgets and no jupyter: `make test-gpu` runs there
    if os.environ.get("CI"):
        raise
    pytest.skip(f"{missing.name} is not installed here; install the course's dependencies: pip install -e .",
                allow_module_level=True)

NS = "{http://www.w3.org/2000/svg}"


def labels(svg_text: str) -> list[str]:
    root = ET.fromstring(svg_text)
    return [g.find(f"{NS}text").text for g in root.iter(f"{NS}g") if "cell" in g.get("class", "").split()]


@pytest.mark.parametrize("module", [widgets, plots])
def test_docstring_examples_run(module):
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert result.failed == 0 and result.attempted > 0


def test_layout_explorer_redraws_when_shape_or_stride_changes():
    ex = widgets.layout_explorer("(4,8)", "(8,1)")
    first = ex.picture.value
    assert len(labels(first)) == 32
    ex.controls["shape"].value = "(2,3)"
    assert ex.picture.value != first and labels(ex.picture.value) == ["0", "1", "2", "8", "9", "10"]
    ex.controls["stride"].value = ""
    assert labels(ex.picture.value) == ["0", "2", "4", "1", "3", "5"]


def test_layout_explorer_lookup_maps_both_ways_and_outlines_the_cells():
    ex = widgets.layout_explorer("(4,8)", "(8,1)")
    ex.controls["lookup"].value = "(1,2)"
    assert ex.readout.value == "coordinate (1,2) → index 10"
    assert ex.picture.value.count('class="cell strong"') == 1
    ex.controls["lookup"].value = "10"
    assert ex.readout.value == "index 10 ← coordinate (1,2)"


@pytest.mark.parametrize("control, value, message", [
    ("shape", "(4,8", "does not parse"),
    ("shape", "(64,128)", "more than the drawing limit of 4096"),
    ("stride", "(1,2,3)", "congruent"),
    ("shape", "(" * 5000, "limit is 200"),
    ("lookup", "(9,9)", "outside"),
])
def test_bad_input_shows_a_short_message_not_a_traceback(control, value, message):
    ex = widgets.layout_explorer()
    ex.controls[control].value = value
    assert message in ex.message.value
    assert "Traceback" not in ex.message.value and len(ex.message.value) < 600
    assert ex.picture.value == ""
    ex.controls[control].value = {"shape": "(4,8)", "stride": "(8,1)", "lookup": ""}[control]
    assert ex.message.value == "" and len(labels(ex.picture.value)) == 32


def test_composition_explorer_shows_a_b_and_their_composition():
    ex = widgets.composition_explorer("(6,2):(8,2)", "(4,3):(3,1)")
    a, b, ab = (p.value for p in ex.pictures)
    assert len(labels(a)) == 12 and len(labels(b)) == 12 and "A ∘ B = " in ab
    ex.controls["b"].value = "4:3"
    assert ex.pictures[2].value != ab and len(labels(ex.pictures[2].value)) == 4
    ex.controls["b"].value = "(4,3):(1,"
    assert "does not parse" in ex.message.value


def test_divide_product_explorer_redraws_for_each_op():
    ex = widgets.divide_product_explorer("(8,8):(1,8)", "(2,4)", "logical_divide")
    seen = set()
    for op in ("logical_divide", "zipped_divide", "logical_product", "blocked_product", "raked_product"):
        ex.controls["op"].value = op
        assert ex.message.value == "", op
        seen.add(ex.pictures[1].value)
    assert len(seen) == 5
    ex.controls["op"].value = "logical_divide"
    ex.controls["tiler"].value = "3:1"
    assert "divisible" in ex.message.value


def test_swizzle_explorer_updates_bank_map_and_wavefront_count():
    ex = widgets.swizzle_explorer(b=0)
    plain = ex.picture.value
    assert "8 wavefronts" in ex.readout.value
    ex.controls["B"].value = 3
    assert ex.picture.value != plain and "1 wavefronts" in ex.readout.value
    ex.controls["bits"].value = 32
    assert "S<3,3,3>" in ex.readout.value and ex.message.value == ""
    ex.controls["S"].value = 1
    assert "|S| must be at least B" in ex.message.value


def test_roofline_explorer_moves_the_gemm_point():
    ex = widgets.roofline_explorer({"FP16 Tensor Core": 989.0, "FP32": 67.0}, 4.8, points=[("copy", 0.25)])
    big = ex.picture.value
    assert "compute-bound" in ex.readout.value
    ET.fromstring(big)
    ex.controls["log2 K"].value = 4
    assert ex.picture.value != big and "memory-bound" in ex.readout.value
    with pytest.raises(ValueError, match="bandwidth_tbs must be a positive"):
        widgets.roofline_explorer({"FP16": 989.0}, 0)


def test_plots_build_figures():
    fig = plots.roofline({"FP16": 989.0}, 4.8, [("mine", 300.0, 500.0)])
    assert fig.axes[0].get_yscale() == "log"
    chart = plots.bench_chart([{"name": "a", "value": 1.0, "baseline": 2.0}, {"name": "b", "value": 3.0}])
    texts = [t.get_text() for t in chart.axes[0].texts]
    assert "1  (0.50x baseline)" in texts and "3" in texts
    with pytest.raises(ValueError, match="needs keys 'name' and 'value'"):
        plots.bench_chart([{"label": "a"}])
