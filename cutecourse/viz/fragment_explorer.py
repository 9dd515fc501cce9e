"""The fragment explorer: pick a Tensor Core instruction and a lane, see that lane's registers on the matrix; pick a
cell, see which lane holds it, in which register.

The instructions are ``ldmatrix`` and ``stmatrix`` (``.x1/.x2/.x4``, with and without ``.trans``), the A, B and C
fragments of ``mma.sync`` m16n8k16 and m16n8k8, and the accumulator of one warpgroup's ``wgmma`` m64n16k16. Each
is a thread-value layout of :mod:`cutecourse.fragments` (CuTe's own, derived with the eager algebra), laid over
the picture's tile, and every table the explorer shows is read off it with ``fragments.coords`` / ``owners``.
``viz.mma_atom`` draws one atom's A, B and C together; the explorer draws one operand at a time, large enough to
read a lane's registers in it.

The picture is the operand's matrix, each cell ``T<t> V<v>`` (thread ``t`` holds it as value ``v``), the chosen
lane's cells bright and the rest faded, the chosen cell outlined. The readout says the same in words: the lane's
registers and what each holds, and the chosen cell's lane and register. Like every explorer of
:mod:`cutecourse.viz.widgets`, bad input becomes a one-line ``.message``, never a traceback.

>>> ex = fragment_explorer("mma.sync m16n8k16 A", lane=5, cell="(9,2)")
>>> print(ex.readout.value.replace("<br>", "\\n"))
lane 5 (groupID 1, threadID_in_group 1) holds A in 4 registers of two 16-bit halves:
a0 a1 = A[1][2], A[1][3] · a2 a3 = A[9][2], A[9][3] · a4 a5 = A[1][10], A[1][11] · a6 a7 = A[9][10], A[9][11]
A[9][2] is held by lane 5 as a2 (register 1, low half)
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property, lru_cache
from html import escape
from typing import TYPE_CHECKING, Optional, Union

from cutecourse import fragments as F
from cutecourse.fragments.atoms import CopyAtom
from cutecourse.layout import IntTuple, Layout, composition
from cutecourse.layout.inttuple import product

from .grid import cell_size
from .layout import LEFT, PAD, TOP, draw_tv
from .svg import Canvas, Picture

if TYPE_CHECKING:
    import numpy as np

    from .widgets import Explorer

__all__ = ["Fragment", "INSTRUCTIONS", "fragment", "describe", "fragment_picture", "fragment_explorer"]

Cell = tuple[int, int]


def _copy_names(op: str) -> list[str]:
    return [f"{op}.x{x}{trans}" for trans in ("", ".trans") for x in F.LDMATRIX_COUNTS]


#: The instructions the explorer shows, in the order of its menu.
INSTRUCTIONS: tuple[str, ...] = (*_copy_names("ldmatrix"),
                                 *(f"mma.sync m16n8k{k} {op}" for k in (16, 8) for op in "ABC"),
                                 *_copy_names("stmatrix"), "wgmma m64n16k16 C")

_WGMMA_N = 16  # two repeats of mma.sync's 8 columns: the smallest N that shows how the accumulator grows with N


@dataclass(frozen=True)
class Fragment:
    """One instruction's register fragment as the explorer draws it: ``layout_tv`` maps ``(thread, value)`` to
    ``row + column * rows`` of the picture's tile (column-major, as CuTe indexes a tile), whose rows and columns are
    the shapes in ``tile`` (their groups drawn apart: the 8 x 8 matrices, a warpgroup's warps)."""

    name: str
    ptx: str
    operand: str  # "A", "B", "C" of an MMA; "M" for the stacked 8 x 8 matrices of a copy
    layout_tv: Layout
    tile: tuple[IntTuple, IntTuple]
    prefix: str  # the PTX's name of the values (a, b, c) or of the registers (d)
    per_register: int  # values per 32-bit register: 2 (16-bit halves) or 1 (an fp32 accumulator)
    copy: Optional[CopyAtom] = None  # ldmatrix / stmatrix: whose address is each row

    @property
    def shape(self) -> tuple[int, int]:
        return product(self.tile[0]), product(self.tile[1])

    @property
    def threads(self) -> int:
        return self.layout_tv[0].size()

    @cached_property
    def coords(self) -> "np.ndarray":
        """(threads, values, 2): the picture's (row, column) of each thread's each value."""
        return F.coords(self.layout_tv, self.shape)

    @cached_property
    def owners(self) -> "np.ndarray":
        """(rows, columns, 2): the (thread, value) holding each cell of the picture."""
        return F.owners(self.layout_tv, self.shape)

    def cell_name(self, cell: Cell) -> str:
        r, c = cell
        return f"M{r // 8}[{r % 8}][{c}]" if self.copy else f"{self.operand}[{r}][{c}]"


def _mma(k: int, operand: str) -> Fragment:
    atom = F.mma_atom(k)
    if operand == "A":  # (thread, value) -> m + 16 k: already the (M, K) tile, column-major
        layout, tile = atom.layout_a, ((8, 2), (8, 2) if k == 16 else 8)
    elif operand == "B":  # CuTe's B is n + 8 k over (N, K); drawn as the PTX draws it, K down and N across
        layout, tile = composition(Layout((8, k), (k, 1)), atom.layout_b), ((8, 2) if k == 16 else 8, 8)
    else:
        layout, tile = atom.layout_c, ((8, 2), 8)
    return Fragment(f"mma.sync m16n8k{k} {operand}", atom.ptx, operand, layout, tile, operand.lower(),
                    1 if operand == "C" else 2)


def _copy(name: str) -> Fragment:
    op, x, *trans = name.split(".")
    count = int(x[1:])
    atom = (F.ldmatrix if op == "ldmatrix" else F.stmatrix)(count, bool(trans))
    # The atom's element 64 j + 8 r + c (matrix j, row r, column c) becomes row 8 j + r, column c of a tile of the
    # stacked matrices: the re-indexing is itself a layout, composed after the registers' TV layout.
    rows = 8 * count
    layout = composition(Layout((8, rows), (rows, 1)), atom.layout_registers)
    return Fragment(name, atom.ptx, "M", layout, ((8, count) if count > 1 else 8, 8), "d", 2, atom)


def _wgmma() -> Fragment:
    atom = F.wgmma_atom(_WGMMA_N)
    return Fragment(INSTRUCTIONS[-1], atom.ptx, "C", atom.layout_c, ((8, 2, 4), (8, _WGMMA_N // 8)), "d", 1)


@lru_cache(maxsize=None)
def fragment(name: str) -> Fragment:
    """The :class:`Fragment` of an instruction in :data:`INSTRUCTIONS`, e.g. ``"ldmatrix.x4.trans"``.

    >>> f = fragment("mma.sync m16n8k16 B")
    >>> f.shape, f.threads, f.cell_name((3, 1))
    ((16, 8), 32, 'B[3][1]')
    """
    if name not in INSTRUCTIONS:
        raise ValueError(f"fragment: instruction={name!r} is not one the explorer knows; use one of "
                         f"{', '.join(INSTRUCTIONS)}")
    if name.startswith("mma.sync"):
        k, operand = name.split()[1:]
        return _mma(int(k.rpartition("k")[2]), operand)
    return _wgmma() if name.startswith("wgmma") else _copy(name)


def _check_lane(frag: Fragment, lane: int, fn: str) -> None:
    if not (isinstance(lane, int) and not isinstance(lane, bool) and 0 <= lane < frag.threads):
        raise ValueError(f"{fn}: lane={lane!r} is not a thread of {frag.name}; use 0-{frag.threads - 1}")


def _check_cell(frag: Fragment, cell: Cell, fn: str) -> None:
    rows, cols = frag.shape
    if not (isinstance(cell, tuple) and len(cell) == 2 and all(isinstance(x, int) and not isinstance(x, bool)
                                                               for x in cell)):
        raise ValueError(f"{fn}: cell={cell!r} must be (row, column), two ints, e.g. (9,2)")
    if not (0 <= cell[0] < rows and 0 <= cell[1] < cols):
        raise ValueError(f"{fn}: cell {cell} is outside {frag.name}'s {rows}x{cols} tile: rows 0-{rows - 1}, "
                         f"columns 0-{cols - 1}")


def _value_label(frag: Fragment, v: int) -> str:
    """The PTX's name of value ``v`` of a lane: ``a2 (register 1, low half)``, ``d1, high half``, ``c3``."""
    if frag.per_register == 1:
        return f"{frag.prefix}{v}"
    register, half = divmod(v, 2)
    where = f"{'low' if half == 0 else 'high'} half"
    return f"d{register}, {where}" if frag.prefix == "d" else f"{frag.prefix}{v} (register {register}, {where})"


def _register_label(frag: Fragment, register: int) -> str:
    """``d1`` for a named register (copies, accumulators), ``a2 a3`` for the two values of an MMA operand's."""
    if frag.per_register == 1 or frag.prefix == "d":
        return f"{frag.prefix}{register}"
    return " ".join(f"{frag.prefix}{v}" for v in range(2 * register, 2 * register + 2))


def _who(frag: Fragment, lane: int) -> str:
    return f"thread {lane} (warp {lane // 32}, lane {lane % 32})" if frag.threads > 32 else f"lane {lane}"


def _address(frag: Fragment, lane: int) -> str:
    """Which row of a copy's matrices the lane gives the shared-memory address of."""
    lanes = F.address_lanes(frag.copy)
    hits = [(j, r) for j in range(lanes.shape[0]) for r in range(8) if lanes[j, r] == lane]
    if not hits:
        return f"its address is not read (.x{frag.copy.num_matrices} reads lanes 0-{lanes.max()}'s)"
    return f"it gives the address of M{hits[0][0]}'s row {hits[0][1]}"


def describe(frag: Fragment, lane: int, cell: Optional[Cell] = None) -> list[str]:
    """The explorer's readout, as lines: what ``lane`` holds in each register, then who holds ``cell``.

    >>> for line in describe(fragment("ldmatrix.x4"), 9, (10, 3)):  # row 10: matrix 1's row 2
    ...     print(line)
    lane 9: it gives the address of M1's row 1; it receives 4 registers of two 16-bit halves:
    d0 = M0[2][2], M0[2][3] · d1 = M1[2][2], M1[2][3] · d2 = M2[2][2], M2[2][3] · d3 = M3[2][2], M3[2][3]
    M1[2][3] comes from lane 10's address, into lane 9's d1, high half
    """
    _check_lane(frag, lane, "describe")
    at = frag.coords[lane].tolist()  # the (row, column) of each of the lane's values
    n = len(at) // frag.per_register
    what = f"{n} register{'s' if n > 1 else ''} of two 16-bit halves" if frag.per_register == 2 else \
        f"{n} fp32 accumulators"
    if frag.copy is None:
        pair = "" if frag.threads > 32 else f" (groupID {lane >> 2}, threadID_in_group {lane % 4})"
        head = f"{_who(frag, lane)}{pair} holds {frag.operand} in {what}:"
    else:
        verb = "receives" if frag.ptx.startswith("ldmatrix") else "stores"
        head = f"{_who(frag, lane)}: {_address(frag, lane)}; it {verb} {what}:"
    per = frag.per_register
    held = [f"{_register_label(frag, j)} = " + ", ".join(frag.cell_name(tuple(c)) for c in at[per * j:per * (j + 1)])
            for j in range(n)]
    lines = [head, " · ".join(held)]
    if cell is not None:
        _check_cell(frag, cell, "describe")
        t, v = (int(x) for x in frag.owners[cell])
        name, label = frag.cell_name(cell), _value_label(frag, v)
        if frag.copy is None:
            lines.append(f"{name} is held by {_who(frag, t)} as {label}")
        else:
            source = int(F.address_lanes(frag.copy)[cell[0] // 8, cell[0] % 8])
            lines.append(f"{name} comes from lane {source}'s address, into lane {t}'s {label}"
                         if frag.ptx.startswith("ldmatrix") else
                         f"{name} comes from lane {t}'s {label}, stored at lane {source}'s address")
    return lines


def fragment_picture(frag: Fragment, lane: Optional[int] = None, cell: Optional[Cell] = None) -> Picture:
    """The fragment over its tile, each cell ``T<t> V<v>``; ``lane``'s cells bright and the others faded, ``cell``
    outlined.

    >>> p = fragment_picture(fragment("mma.sync m16n8k8 C"), lane=5, cell=(9, 2))
    >>> p.svg.count('<g class="cell'), p.svg.count('class="cell strong"'), p.svg.count('opacity="0.35"')
    (128, 1, 124)
    """
    if lane is not None:
        _check_lane(frag, lane, "fragment_picture")
    if cell is not None:
        _check_cell(frag, cell, "fragment_picture")
    rows, cols = frag.shape
    cw, ch = cell_size(cols, len(f"T{frag.threads - 1} V{frag.layout_tv[1].size() - 1}"), font=9), 20.0
    c = Canvas(LEFT + cols * cw + PAD, TOP + rows * ch + PAD)
    what = f"{frag.shape[0] // 8} matrices 8 × 8, M<j>[row][column]" if frag.copy else \
        f"{frag.operand} ({rows} × {cols})"
    c.text(LEFT, 14, f"{frag.ptx}: {what}" + ("" if lane is None else f", {_who(frag, lane)}"), size=13,
           anchor="start", cls="title", weight="bold")
    draw_tv(c, LEFT, TOP, frag.layout_tv, frag.tile, cw, ch, "fragment_picture", lane=lane, mark=cell)
    return Picture(c.finish(), frag.name)


def _parse_cell(text: str) -> Optional[Cell]:
    """The cell typed in the explorer's box, ``(9,2)`` or ``9,2``; None when the box is empty."""
    if not text.strip():
        return None
    from .widgets import parse_literal

    value = parse_literal(text, "cell")
    if not (isinstance(value, tuple) and len(value) == 2):
        raise ValueError(f"cell {text.strip()!r} must be (row, column), e.g. (9,2)")
    return value


def fragment_explorer(instruction: str = "mma.sync m16n8k16 A", lane: int = 0,
                      cell: Union[str, Cell] = "") -> Explorer:
    """Pick an instruction from :data:`INSTRUCTIONS` and a lane (a thread of the warpgroup for wgmma): the picture
    brightens the lane's cells and the readout lists its registers. Type a cell ``(row, column)`` to outline it and
    read which lane and register hold it.

    >>> ex = fragment_explorer("ldmatrix.x4")
    >>> ex.controls["instruction"].value = "wgmma m64n16k16 C"
    >>> ex.controls["lane"].value = 37
    >>> ex.readout.value.split("<br>")[0]
    'thread 37 (warp 1, lane 5) holds C in 8 fp32 accumulators:'
    """
    from .widgets import Explorer, W, text_box  # ipywidgets: only the explorer needs it

    frag = fragment(instruction)
    _check_lane(frag, lane, "fragment_explorer")
    if isinstance(cell, tuple):
        _check_cell(frag, cell, "fragment_explorer")
        cell = f"({cell[0]},{cell[1]})"
    elif not isinstance(cell, str):
        raise ValueError(f"fragment_explorer: cell={cell!r} must be (row, column) or its text such as '(9,2)'")

    def draw(ex: Explorer) -> str:
        c = ex.controls
        ex.readout.value = ""  # a bad cell leaves no stale readout beside the message
        frag = fragment(c["instruction"].value)
        slider = c["lane"]
        slider.description = "Thread:" if frag.threads > 32 else "Lane:"
        if slider.value >= frag.threads:
            slider.value = frag.threads - 1  # redraws with the lane clamped, then this draw finishes the same
        slider.max = frag.threads - 1
        at = _parse_cell(c["cell"].value)
        if at is not None:
            _check_cell(frag, at, "fragment explorer")
        ex.readout.value = "<br>".join(escape(line, quote=False) for line in describe(frag, slider.value, at))
        return fragment_picture(frag, slider.value, at).svg

    controls = {
        "instruction": W.Dropdown(options=list(INSTRUCTIONS), value=instruction, description="Instruction:",
                                  layout=W.Layout(width="330px")),
        "lane": W.IntSlider(value=lane, min=0, max=frag.threads - 1, description="Lane:", continuous_update=False,
                            layout=W.Layout(width="330px")),
        "cell": text_box(cell, "Cell:", "(row, column), e.g. (9,2)"),
    }
    return Explorer("fragment", controls, draw, readout=True)
