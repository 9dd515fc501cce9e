"""Interactive explorers (ipywidgets): change a layout, a tiler or a swizzle and watch the picture redraw.

Each explorer is an :class:`Explorer` (a ``VBox``): ``.controls`` names its input widgets, ``.picture`` holds the
SVG, ``.message`` a short note when the input is wrong (a parse error, a layout over ``viz.MAX_CELLS`` cells):
the explorer never shows a traceback. Text boxes redraw when you press Enter or leave the box.

>>> ex = layout_explorer("(4,8)", "(8,1)")
>>> ex.controls["shape"].value = "(2,3)"
>>> ex.picture.value.count('class="cell"'), ex.message.value
(6, '')
"""

from __future__ import annotations

import ast
from html import escape
from typing import TYPE_CHECKING, Any, Callable, Mapping, Optional, Sequence, Union

try:
    import ipywidgets as W  # 7.7 (Colab's) or 8: the explorers use only what both have
except ModuleNotFoundError as e:  # ipywidgets is in the `lab` extra, not a hard dependency (Colab keeps its own)
    raise ModuleNotFoundError("cutecourse.viz.widgets needs ipywidgets: pip install 'ipywidgets>=7.7' "
                              "(or, in a checkout, make lab)", name="ipywidgets") from e

from cutecourse.hw.banks import ELEMENT_BITS, LDMATRIX_8x8, WARP_128BIT_STORE, Access, wavefronts
from cutecourse.hw.roofline import attainable_tflops, gemm_intensity
from cutecourse.hw.tile import as_layout
from cutecourse.layout import (
    ComposedLayout, Layout, blocked_product, composition, logical_divide, logical_product, make_layout,
    make_composed_layout, make_swizzle, raked_product, zipped_divide,
)
from cutecourse.layout.inttuple import product, to_str

from .banks import bank_map
from .layout import layout

if TYPE_CHECKING:
    from .plots import Point

__all__ = ["Explorer", "layout_explorer", "composition_explorer", "divide_product_explorer", "swizzle_explorer",
           "roofline_explorer"]

_MAX_TEXT = 200  # longer input is refused before parsing, so a pasted blob cannot stall the kernel


class Explorer(W.VBox):
    """Controls above a picture; ``redraw()`` runs on every change and turns any error into ``.message``."""

    def __init__(self, name: str, controls: Mapping[str, W.Widget], draw: Callable[["Explorer"], str],
                 pictures: int = 1, readout: bool = False) -> None:
        self.controls = dict(controls)
        self.message = W.HTML("").add_class("cc-message")
        self.readout = W.HTML("").add_class("cc-readout")
        # A picture wider than the output area scrolls instead of being cut; side-by-side pictures wrap.
        self.pictures = [W.HTML("", layout=W.Layout(max_width="100%", overflow="auto")).add_class("cc-picture")
                         for _ in range(pictures)]
        self.picture = self.pictures[0]
        self._draw = draw
        for w in self.controls.values():  # each control keeps its width (a squeezed slider's track is a few px)
            w.layout.flex = "0 0 auto"
            w.style.description_width = "initial"
        rows = [W.HBox(list(self.controls.values()), layout=W.Layout(flex_flow="row wrap")).add_class("cc-controls"),
                self.message]
        rows += [self.readout] if readout else []
        rows += [W.HBox(self.pictures, layout=W.Layout(flex_flow="row wrap"))] if pictures > 1 else [self.picture]
        super().__init__(rows)
        self.add_class("cc-explorer").add_class(f"cc-{name}-explorer")
        for w in self.controls.values():
            w.observe(lambda _change: self.redraw(), names="value")
        self.redraw()

    def redraw(self) -> None:
        try:
            svg = self._draw(self)
        except Exception as e:  # any failure of the learner's input becomes a one-line note, never a traceback
            text = str(e) if isinstance(e, ValueError) else f"{type(e).__name__}: {e}"
            text = text if len(text) <= 400 else text[:400] + "…"
            self.message.value = f'<span style="color:#b00020">⚠ {escape(text)}</span>'
            for p in self.pictures:
                p.value = ""
            return
        self.message.value = ""
        self.picture.value = svg


def text_box(value: str, description: str, placeholder: str = "") -> W.Text:
    return W.Text(value=value, description=description, placeholder=placeholder, continuous_update=False,
                  layout=W.Layout(width="260px")).add_class(f"cc-{description.strip(':').lower()}")


def parse_literal(text: str, what: str) -> Any:
    """An int or a tuple of ints from text such as ``(4,(2,2))``; ValueError says what is wrong."""
    if len(text) > _MAX_TEXT:
        raise ValueError(f"{what} is {len(text)} characters long; the limit is {_MAX_TEXT}")
    try:
        return ast.literal_eval(text.strip())
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        raise ValueError(f"{what} {text!r} does not parse; write ints and tuples, e.g. (4,8) or ((2,2),4)") from None


def parse_shape_stride(shape: str, stride: str) -> Union[Layout, ComposedLayout]:
    """The layout the explorer's boxes describe: ``shape`` and ``stride``, or a whole layout typed as ``shape``.

    >>> parse_shape_stride("(4,8)", ""), parse_shape_stride("(4,8)", "(8,1)"), parse_shape_stride("8:2", "")
    ((4,8):(1,4), (4,8):(8,1), 8:2)
    """
    if ":" in shape:
        return as_layout(shape[: _MAX_TEXT + 1], "layout", "shape")
    s = parse_literal(shape, "shape")
    d = parse_literal(stride, "stride") if stride.strip() else None
    return make_layout(s, stride=d)


def _lookup(L: Union[Layout, ComposedLayout], text: str) -> tuple[list, str]:
    """``(cells to highlight, readout)`` for an index ``9`` or a coordinate ``(1,2)``."""
    if not text.strip():
        return [], "type an index (9) or a coordinate ((1,2); (5,) for rank 1) to find it"
    q = parse_literal(text, "lookup")
    rank1 = L.rank == 1
    rows, cols = (1, L.size()) if rank1 else (product(L.shape[0]), product(L.shape[1]))
    cells = [k if rank1 else (r, k) for r in range(rows) for k in range(cols)]
    if isinstance(q, int) and not isinstance(q, bool):
        hits = [c for c in cells if L(c) == q]
        found = ", ".join(to_str(c) for c in hits[:8]) + (" …" if len(hits) > 8 else "")
        return hits, f"index {q} ← coordinate {found}" if hits else f"no coordinate maps to index {q}"
    crd = q[0] if rank1 and isinstance(q, tuple) and len(q) == 1 else q
    if crd not in cells:
        raise ValueError(f"coordinate {text.strip()} is outside the layout's {rows}x{cols} grid"
                         if not rank1 else f"coordinate {text.strip()} is outside 0..{cols - 1}")
    return [crd], f"coordinate {to_str(crd)} → index {L(crd)}"


def layout_explorer(shape: str = "(4,8)", stride: str = "(8,1)") -> Explorer:
    """Type a shape and a stride (or a whole layout such as ``(4,8):(8,1)``), see the layout redraw.

    Hover a cell for ``coordinate → index``; the lookup box maps an index to its coordinates and a coordinate
    to its index, and outlines them. An empty stride means compact column-major, as in ``make_layout``.

    >>> ex = layout_explorer()
    >>> ex.controls["lookup"].value = "9"
    >>> ex.readout.value
    'index 9 ← coordinate (1,1)'
    """
    def draw(ex: Explorer) -> str:
        c = ex.controls
        L = parse_shape_stride(c["shape"].value, c["stride"].value)
        marked, ex.readout.value = _lookup(L, c["lookup"].value)
        return layout(L, highlight=marked).svg

    return Explorer("layout", {"shape": text_box(shape, "Shape:"), "stride": text_box(stride, "Stride:"),
                               "lookup": text_box("", "Lookup:", "index 9 or coordinate (1,2)")}, draw, readout=True)


def composition_explorer(a: str = "(6,2):(8,2)", b: str = "(4,3):(3,1)") -> Explorer:
    """Layouts A and B, and their composition ``A ∘ B`` (``(A∘B)(c) = A(B(c))``), side by side.

    >>> ex = composition_explorer()
    >>> ex.pictures[2].value.count('class="cell"')
    12
    """
    def draw(ex: Explorer) -> str:
        A = as_layout(ex.controls["a"].value[: _MAX_TEXT + 1], "composition", "A")
        B = as_layout(ex.controls["b"].value[: _MAX_TEXT + 1], "composition", "B")
        R = composition(A, B)
        ex.pictures[1].value = layout(B, title=f"B = {B}").svg
        ex.pictures[2].value = layout(R, title=f"A ∘ B = {R}").svg
        return layout(A, title=f"A = {A}").svg

    return Explorer("composition", {"a": text_box(a, "A:"), "b": text_box(b, "B:")}, draw, pictures=3)


_OPS: dict[str, Callable[[Any, Any], Any]] = {
    "logical_divide": logical_divide, "zipped_divide": zipped_divide, "logical_product": logical_product,
    "blocked_product": blocked_product, "raked_product": raked_product,
}


def _tiler(text: str, op: str) -> Any:
    """A tiler from text: a layout ``4:2``, or ints/tuples (a by-mode tiler; a shape for blocked/raked)."""
    if ":" in text:
        return as_layout(text[: _MAX_TEXT + 1], op, "tiler")
    t = parse_literal(text, "tiler")
    return make_layout(t) if op in ("blocked_product", "raked_product") else t


def divide_product_explorer(layout_text: str = "(8,8):(1,8)", tiler: str = "(2,4)",
                            op: str = "logical_divide") -> Explorer:
    """A layout, a tiler and one of CuTe's divides or products; shows the input and the result.

    ``tiler`` is a layout (``4:2``) or a tuple of per-mode tilers (``(2,4)``); for blocked/raked products a
    tuple is a shape (``make_layout((2,4))``).

    >>> ex = divide_product_explorer()
    >>> ex.controls["op"].value = "blocked_product"
    >>> ex.pictures[1].value.count('class="cell"')
    512
    """
    if op not in _OPS:
        raise ValueError(f"divide_product_explorer: op={op!r} is not one of {sorted(_OPS)}")

    def draw(ex: Explorer) -> str:
        c = ex.controls
        L = as_layout(c["layout"].value[: _MAX_TEXT + 1], c["op"].value, "layout")
        T = _tiler(c["tiler"].value, c["op"].value)
        R = _OPS[c["op"].value](L, T)
        ex.pictures[1].value = layout(R, title=f"{c['op'].value}(L, {to_str(T) if isinstance(T, tuple) else T})"
                                               f" = {R}").svg
        return layout(L, title=f"L = {L}").svg

    controls = {"layout": text_box(layout_text, "Layout:"), "tiler": text_box(tiler, "Tiler:"),
                "op": W.Dropdown(options=list(_OPS), value=op, description="Op:")}
    return Explorer("divide-product", controls, draw, pictures=2)


_ACCESSES: dict[str, Optional[Access]] = {
    "ldmatrix 8x8": LDMATRIX_8x8, "warp 128-bit stores": WARP_128BIT_STORE, "none": None}


def swizzle_explorer(base: str = "(8,64):(64,1)", b: int = 3, m: int = 3, s: int = 3,
                     element_bits: int = 16, access: str = "ldmatrix 8x8") -> Explorer:
    """Sliders for ``Swizzle<B,M,S>`` over a shared-memory layout; the bank map and wavefront count update.

    ``B = 0`` is no swizzle. The readout states the wavefronts the chosen access takes (the model:
    :mod:`cutecourse.hw.banks`).

    >>> ex = swizzle_explorer(b=0)
    >>> ex.readout.value.startswith("S<0,4,3> o 0 o (8,64):(64,1): 8 wavefronts")
    True
    """
    def draw(ex: Explorer) -> str:
        c = ex.controls
        outer = as_layout(c["base"].value[: _MAX_TEXT + 1], "swizzle explorer", "base")
        if not isinstance(outer, Layout):
            raise ValueError(f"base must be a plain shape:stride layout, got {outer}; the sliders add the swizzle")
        sw = make_composed_layout(make_swizzle(c["B"].value, c["M"].value, c["S"].value), 0, outer)
        acc = _ACCESSES[c["access"].value]
        bits = c["bits"].value
        cost = f": {wavefronts(sw, bits, acc)} wavefronts for {acc.name}" if acc else ""
        ex.readout.value = f"{sw}{cost}"
        return bank_map(sw, bits, acc).svg

    def slider(name: str, v: int) -> W.IntSlider:
        return W.IntSlider(value=v, min=0, max=6, description=name, continuous_update=False,
                           layout=W.Layout(width="220px"))

    controls = {"base": text_box(base, "Base:"), "B": slider("B", b), "M": slider("M", m), "S": slider("S", s),
                "bits": W.Dropdown(options=list(ELEMENT_BITS[:4]), value=element_bits, description="Bits:",
                                   layout=W.Layout(width="140px")),
                "access": W.Dropdown(options=list(_ACCESSES), value=access, description="Access:")}
    return Explorer("swizzle", controls, draw, readout=True)


def roofline_explorer(peak_tflops: Mapping[str, float], bandwidth_tbs: float,
                      points: Sequence[Point] = ()) -> Explorer:
    """A roofline with a GEMM you size: sliders for log2 M, N, K and the element size move "your GEMM".

    The readout gives its arithmetic intensity, the attainable TFLOP/s under the chosen roof, and whether it is
    memory- or compute-bound.

    >>> ex = roofline_explorer({"FP16 Tensor Core": 989.0}, 4.8)
    >>> "compute-bound" in ex.readout.value
    True
    """
    from . import plots  # matplotlib: only for this explorer

    plots.check_roof(peak_tflops, bandwidth_tbs)

    def draw(ex: Explorer) -> str:
        c = ex.controls
        m, n, k = (1 << c[x].value for x in ("log2 M", "log2 N", "log2 K"))
        ai = gemm_intensity(m, n, k, c["bytes"].value)  # reads A and B, writes C, once
        peak = peak_tflops[c["roof"].value]
        got = attainable_tflops(peak, bandwidth_tbs, ai)
        bound = "memory-bound" if got < peak else "compute-bound"
        ex.readout.value = (f"GEMM {m}x{n}x{k}: {ai:.1f} FLOP/B, attainable {got:.1f} of {peak:g} TFLOP/s "
                            f"({c['roof'].value}): {bound}")
        fig = plots.roofline({c["roof"].value: peak}, bandwidth_tbs, [*points, (f"GEMM {m}x{n}x{k}", ai)])
        return plots.figure_svg(fig)

    def slider(name: str) -> W.IntSlider:
        return W.IntSlider(value=12, min=4, max=15, description=name, continuous_update=False,
                           layout=W.Layout(width="260px"))

    controls = {"roof": W.Dropdown(options=list(peak_tflops), description="Roof:"),
                "log2 M": slider("log2 M"), "log2 N": slider("log2 N"), "log2 K": slider("log2 K"),
                "bytes": W.Dropdown(options=[1, 2, 4], value=2, description="Bytes:", layout=W.Layout(width="140px"))}
    return Explorer("roofline", controls, draw, readout=True)
