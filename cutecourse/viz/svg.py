"""A tiny SVG builder and the :class:`Picture` every ``cutecourse.viz`` function returns.

No dependencies: a picture is a string of SVG text that displays inline in Jupyter and saves to a file.

>>> p = Picture(Canvas(40, 20).rect(0, 0, 40, 20, fill="#fff").finish())
>>> p.svg.startswith("<svg") and "<rect" in p.svg
True
"""

from __future__ import annotations

import unicodedata
from html import escape
from pathlib import Path
from typing import Union

__all__ = ["Canvas", "Picture", "MAX_CELLS", "check_size", "thread_colour", "index_colour", "text_width"]

MAX_CELLS = 4096
"""The most cells one picture draws; bigger layouts raise ValueError (draw a tile instead)."""

# Colour-blind-friendly, light enough for black text (after Paul Tol's "light" scheme).
_PALETTE = ("#77AADD", "#EE8866", "#EEDD88", "#FFAABB", "#99DDFF", "#44BB99", "#BBCC33", "#DDDDDD",
            "#AAAA00", "#CCBBEE", "#F4A582", "#92C5DE")

# Hovering a cell thickens its outline; `<title>` children give the browser's tooltip.
_STYLE = ("<style>.cell:hover rect{stroke:#000;stroke-width:3}"
          "text{font-family:ui-monospace,Menlo,Consolas,monospace;pointer-events:none;dominant-baseline:central}"
          "</style>")


#: Advance of one character in em: the monospace fonts of `_STYLE` (Menlo, DejaVu Sans Mono, Consolas) are
#: 0.55-0.60 em wide; wide East Asian characters (a fallback font) take a whole em.
_CHAR_EM, _WIDE_EM = 0.62, 1.0


def text_width(s: str, size: float) -> float:
    """An upper bound of the width in pixels of `s` at font size `size` in the pictures' monospace font.

    >>> text_width("(4,8):(8,1)", 10)
    68.2
    """
    return round(sum(_WIDE_EM if unicodedata.east_asian_width(ch) in "WF" else _CHAR_EM for ch in s) * size, 6)


def index_colour(i: int) -> str:
    """The default fill of the cell holding index ``i`` (cycles through 12 colours)."""
    return _PALETTE[i % len(_PALETTE)]


def thread_colour(t: int) -> str:
    """The fill of thread ``t``'s cells: 8 hues like CuTe's ``print_latex``, lighter for each next 8 threads."""
    hue = (t % 8) * 45
    light = 72 + 6 * ((t // 8) % 4)
    return f"hsl({hue},70%,{light}%)"


def check_size(cells: int, what: str, fn: str) -> None:
    """Raise ValueError when a picture would need more than :data:`MAX_CELLS` cells."""
    if cells > MAX_CELLS:
        raise ValueError(f"{fn}: {what} has {cells} cells, more than the drawing limit of {MAX_CELLS}; "
                         f"draw one tile of it instead (e.g. a slice, or a smaller shape)")


class Canvas:
    """Collects SVG elements; :meth:`finish` returns the document.

    Coordinates are pixels, y down. Every method returns the canvas, so calls chain. The document is at least
    ``width`` x ``height`` and grows to hold everything drawn on it (text by :func:`text_width`), so a long title
    or label is never cut at the edge. Elements added with :meth:`raw` must lie inside what the others span.
    """

    MARGIN = 8  # kept free right of and below the drawing

    def __init__(self, width: float, height: float) -> None:
        self.width, self.height = width, height
        self._parts: list[str] = []
        self._right = self._bottom = 0.0

    def _extend(self, right: float, bottom: float) -> None:
        self._right, self._bottom = max(self._right, right), max(self._bottom, bottom)

    def rect(self, x: float, y: float, w: float, h: float, fill: str = "none", stroke: str = "#000",
             stroke_width: float = 1, cls: str = "") -> "Canvas":
        c = f' class="{cls}"' if cls else ""
        self._parts.append(f'<rect{c} x="{x:g}" y="{y:g}" width="{w:g}" height="{h:g}" fill="{fill}" '
                           f'stroke="{stroke}" stroke-width="{stroke_width:g}"/>')
        self._extend(x + w + stroke_width / 2, y + h + stroke_width / 2)
        return self

    def line(self, x1: float, y1: float, x2: float, y2: float, width: float = 1, cls: str = "group",
             colour: str = "#000") -> "Canvas":
        self._parts.append(f'<line class="{cls}" x1="{x1:g}" y1="{y1:g}" x2="{x2:g}" y2="{y2:g}" '
                           f'stroke="{colour}" stroke-width="{width:g}"/>')
        self._extend(max(x1, x2) + width / 2, max(y1, y2) + width / 2)
        return self

    def text(self, x: float, y: float, s: str, size: float = 12, anchor: str = "middle", cls: str = "",
             weight: str = "normal") -> "Canvas":
        # Only what differs from SVG's defaults (anchor start, weight normal) and the style's central baseline is
        # written: a picture is hundreds of these, and notebooks store each picture twice.
        attrs = (f' class="{cls}"' if cls else "") + (f' text-anchor="{anchor}"' if anchor != "start" else "")
        attrs += f' font-weight="{weight}"' if weight != "normal" else ""
        self._parts.append(f'<text{attrs} x="{x:g}" y="{y:g}" font-size="{size:g}">{escape(s)}</text>')
        width = text_width(s, size)
        self._extend(x + {"start": width, "middle": width / 2, "end": 0.0}[anchor], y + size / 2)
        return self

    def cell(self, x: float, y: float, w: float, h: float, label: str, fill: str, tooltip: str,
             data: dict[str, str], size: float = 11, stroke_width: float = 0.5, cls: str = "cell",
             opacity: float = 1.0) -> "Canvas":
        """One labelled box in a ``<g class="cell">`` whose ``<title>`` is the hover text."""
        attrs = "".join(f' data-{k}="{escape(v)}"' for k, v in data.items())
        op = f' opacity="{opacity:g}"' if opacity != 1.0 else ""
        self._parts.append(f'<g class="{cls}"{attrs}{op}><title>{escape(tooltip)}</title>')
        self.rect(x, y, w, h, fill=fill, stroke_width=stroke_width)
        self.text(x + w / 2, y + h / 2, label, size=size)
        self._parts.append("</g>")
        return self

    def raw(self, svg: str) -> "Canvas":
        """Append already-built SVG (a nested picture, for side-by-side figures)."""
        self._parts.append(svg)
        return self

    def finish(self) -> str:
        width = round(max(self.width, self._right + self.MARGIN), 1)
        height = round(max(self.height, self._bottom + self.MARGIN), 1)
        return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{width:g}" height="{height:g}" '
                f'viewBox="0 0 {width:g} {height:g}">{_STYLE}'
                f'<rect width="100%" height="100%" fill="#fff"/>' + "".join(self._parts) + "</svg>")


class Picture:
    """SVG text that Jupyter draws inline; ``.svg`` is the text, ``.save(path)`` writes it.

    Jupyter gets both ``image/svg+xml`` and ``text/html``: JupyterLab shows SVG outputs as images, where hover
    tooltips do not work, so the HTML form (the same SVG, inline) is what keeps ``coordinate → index`` on hover.

    >>> Picture("<svg/>").save  # doctest: +ELLIPSIS
    <bound method Picture.save of <Picture ...>>
    """

    def __init__(self, svg: str, title: str = "") -> None:
        self.svg = svg
        self.title = title

    def save(self, path: Union[str, Path]) -> Path:
        """Write the SVG to ``path`` (conventionally ``*.svg``) and return the path."""
        path = Path(path)
        path.write_text(self.svg, encoding="utf-8")
        return path

    def _repr_svg_(self) -> str:
        return self.svg

    def _repr_html_(self) -> str:
        return f'<div class="cutecourse-viz">{self.svg}</div>'

    def __repr__(self) -> str:
        return f"<Picture {self.title or 'untitled'}: {len(self.svg)} characters of SVG>"
