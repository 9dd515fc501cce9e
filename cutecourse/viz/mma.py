"""Pictures of an MMA atom: the A, B and C register fragments laid around the product, like ``print_latex_mma``.

A (M x K) sits left, B (drawn K x N) on top, C (M x N) bottom right, so each C cell lines up with the A row and
the B column it is the dot product of. Each cell reads ``T<t> V<v>``: lane ``t`` holds it in register value ``v``.
The layouts are CuTe's ``MMA_Traits`` (``mma_traits_sm80.hpp``): ``(thread, value) -> m + k*M`` for A,
``n + k*N`` for B and ``m + n*M`` for C.

>>> p = mma_atom("SM80_16x8x16_F16")
>>> p.svg.count('class="cell"')  # 16*16 A + 8*16 B + 16*8 C
512
"""

from __future__ import annotations

from cutecourse.fragments.atoms import MmaAtom
from cutecourse.fragments.atoms import mma_atom as fragment_atom

from .layout import draw_tv
from .svg import Canvas, Picture

__all__ = ["MMA_ATOMS", "mma_atom"]

_K16, _K8 = fragment_atom(16), fragment_atom(8)
# The C layout is the same whether the accumulator is F16 or F32, so the aliases share one atom (the atom's own
# name is the f32-accumulator one; a picture's title is the name asked for).
MMA_ATOMS: dict[str, MmaAtom] = {
    "SM80_16x8x16_F16": _K16, "SM80_16x8x16_BF16": _K16, "SM80_16x8x16_F32F16F16F32_TN": _K16,
    "SM80_16x8x16_F16F16F16F16_TN": _K16, "SM80_16x8x16_F32BF16BF16F32_TN": _K16,
    "SM80_16x8x8_F16": _K8, "SM80_16x8x8_F16F16F16F16_TN": _K8, "SM80_16x8x8_F32F16F16F32_TN": _K8}
"""The atoms :func:`mma_atom` can draw (:func:`cutecourse.fragments.mma_atom`'s), by name (short names and CuTe's
full ``..._TN`` names)."""


def mma_atom(atom: str = "SM80_16x8x16_F16", title: str | None = None) -> "Picture":
    """Draw an MMA atom: A (M x K) left, B (K x N) above, C (M x N) below B, each cell ``T<t> V<v>``.

    ``atom`` is a name from :data:`MMA_ATOMS`, e.g. ``"SM80_16x8x16_F16"`` (``mma.sync.m16n8k16``).

    >>> mma_atom("SM80_16x8x8_F16").title
    'SM80_16x8x8_F16'
    """
    if atom not in MMA_ATOMS:
        raise ValueError(f"viz.mma_atom: atom={atom!r} is not known; use one of {sorted(MMA_ATOMS)}")
    a = MMA_ATOMS[atom]
    M, N, K = a.shape_mnk
    cw = 46.0
    ch = 22.0
    gap = 34.0
    top = 40.0
    ax, by = 30.0, top + 16
    cx, cy = ax + K * cw + gap, by + K * ch + gap
    c = Canvas(cx + N * cw + 12, cy + M * ch + 30)
    c.text(ax, 14, title if title is not None else f"{atom}: C[{M}x{N}] += A[{M}x{K}] · B[{K}x{N}]", size=13,
           anchor="start", cls="title", weight="bold")
    for label, x, y in (("A (M×K)", ax, cy - 26), ("B (K×N)", cx, by - 26), ("C (M×N)", cx, cy + M * ch + 14)):
        c.text(x, y, label, size=12, anchor="start", cls="fragment-label", weight="bold")
    c.raw('<g class="fragment" data-name="A">')
    draw_tv(c, ax, cy, a.layout_a, (M, K), cw, ch, "viz.mma_atom")
    c.raw('</g><g class="fragment" data-name="B">')
    draw_tv(c, cx, by, a.layout_b, (N, K), cw, ch, "viz.mma_atom", transpose=True)
    c.raw('</g><g class="fragment" data-name="C">')
    draw_tv(c, cx, cy, a.layout_c, (M, N), cw, ch, "viz.mma_atom")
    c.raw("</g>")
    return Picture(c.finish(), atom)
