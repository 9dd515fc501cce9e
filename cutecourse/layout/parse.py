"""Parsing the DSL's print form back into a Layout or a ComposedLayout: above both, so neither imports the other."""

from __future__ import annotations

import re
from typing import Any

from .layout import Layout, make_layout
from .swizzle import ComposedLayout, Swizzle

__all__ = ["parse_layout"]


def _parse_inttuple(text: str, pos: int) -> tuple:
    text_len = len(text)
    while pos < text_len and text[pos].isspace():
        pos += 1
    if pos < text_len and text[pos] == "(":
        pos += 1
        items = []
        while True:
            while pos < text_len and text[pos].isspace():
                pos += 1
            if pos < text_len and text[pos] == ")" and not items:
                return (), pos + 1
            v, pos = _parse_inttuple(text, pos)
            items.append(v)
            while pos < text_len and text[pos].isspace():
                pos += 1
            if pos < text_len and text[pos] == ",":
                pos += 1
            elif pos < text_len and text[pos] == ")":
                return tuple(items), pos + 1
            else:
                raise ValueError(f"parse_layout: expected ',' or ')' at position {pos} in {text!r}")
    m = re.compile(r"-?\d+").match(text, pos)
    if not m:
        raise ValueError(f"parse_layout: expected an int or '(' at position {pos} in {text!r}")
    return int(m.group()), m.end()


def _parse_plain(text: str, pos: int) -> tuple:
    shape, pos = _parse_inttuple(text, pos)
    while pos < len(text) and text[pos].isspace():
        pos += 1
    if pos >= len(text) or text[pos] != ":":
        raise ValueError(f"parse_layout: expected ':' between shape and stride at position {pos} in {text!r}")
    stride, pos = _parse_inttuple(text, pos + 1)
    try:
        return make_layout(shape, stride=stride), pos
    except ValueError as e:
        raise ValueError(f"parse_layout: {text!r} is not a valid layout: {e}") from None


def parse_layout(text: str) -> Any:
    """Parse the DSL's print form back into a Layout or ComposedLayout.

    Grammar: ``shape:stride`` | ``S<B,M,S> o offset o shape:stride`` |
    ``shape:stride o offset o shape:stride``.  Raises ValueError saying what
    was expected where the text does not parse.

    >>> parse_layout("(4,8):(8,1)"), parse_layout("S<3,3,3> o 0 o (8,64):(64,1)")
    ((4,8):(8,1), S<3,3,3> o 0 o (8,64):(64,1))
    """
    if not isinstance(text, str):
        raise ValueError(f"parse_layout: expected a str, got {type(text).__name__}")
    if len(text) > 100_000:
        raise ValueError("parse_layout: text longer than 100000 characters")
    parts = [p.strip() for p in re.split(r"\s+o\s+", text.strip())]
    if len(parts) == 1:
        lay, pos = _parse_plain(parts[0], 0)
        if pos != len(parts[0]):
            raise ValueError(f"parse_layout: expected end of text at position {pos} in {text!r}")
        return lay
    if len(parts) != 3:
        raise ValueError(f"parse_layout: expected 'inner o offset o outer', got {text!r}")
    inner_txt, off_txt, outer_txt = parts
    m = re.fullmatch(r"S<\s*(-?\d+)\s*,\s*(-?\d+)\s*,\s*(-?\d+)\s*>?", inner_txt)
    if m:
        inner: Any = Swizzle(int(m.group(1)), int(m.group(2)), int(m.group(3)))
    else:
        inner = parse_layout(inner_txt)
    if not re.fullmatch(r"-?\d+", off_txt):
        raise ValueError(f"parse_layout: expected an int offset between ' o ', got {off_txt!r}")
    outer = parse_layout(outer_txt)
    if not isinstance(outer, Layout):
        raise ValueError(f"parse_layout: expected a plain shape:stride outer layout, got {outer_txt!r}")
    return ComposedLayout(inner, int(off_txt), outer)
