"""The pipeline explorer: the schedule of :mod:`cutecourse.hw.pipeline` (a ring of ``stages`` shared-memory slots
feeding the math) as a timeline of which k-tile each slot holds and when the math waits for a load, a readout of
where the time goes, and sliders.

>>> from cutecourse.hw.pipeline import simulate
>>> describe(simulate(3, 500, 200, 16))[1]
'total 4400 cycles: the math computes 3200 (73%) and waits 1200 = 500 to fill the pipeline + 700 stalled on loads'
"""

from __future__ import annotations

import math
from html import escape
from numbers import Real
from typing import TYPE_CHECKING, Mapping, Optional

from cutecourse.hw.pipeline import ISSUES, Schedule, check_int, simulate

from .svg import Canvas, Picture, text_width

if TYPE_CHECKING:
    from .widgets import Explorer

__all__ = ["MAX_K_TILES", "MAX_STAGES", "describe", "timeline", "pipeline_explorer"]

MAX_K_TILES = 64  # the most k-tiles a timeline draws: each keeps a block wide enough to read
MAX_STAGES = 16  # the most slot rows a timeline draws


def _n(x: float) -> str:
    """A number of cycles as the readout writes it: 2200, 166.7."""
    return str(int(x)) if float(x).is_integer() else f"{x:.1f}"


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def _check_measured(measured: object, fn: str) -> None:
    ok = isinstance(measured, Mapping) and all(
        isinstance(k, int) and not isinstance(k, bool) and k >= 1 and isinstance(v, Real) and not isinstance(v, bool)
        and math.isfinite(v) and v > 0 for k, v in measured.items())
    if not ok:
        raise ValueError(f"{fn}: measured={measured!r} must map stage counts (ints ≥ 1) to TFLOP/s (numbers > 0), "
                         "e.g. {3: 480.0, 4: 560.0}")


def describe(schedule: Schedule, measured: Optional[Mapping[int, float]] = None,
             measured_label: str = "the real kernel") -> list[str]:
    """The explorer's readout, as lines: the ring, where the time goes, Little's law, and (given ``measured``, a
    mapping ``{stages: TFLOP/s}`` of the real kernel) its speed at this stage count.

    >>> for line in describe(simulate(3, 500, 200, 16), {3: 480.0, 4: 560.0}, "H200, gemm05 fp16 4096³"):
    ...     print(line)
    3 stages (cp.async: 2 loads in flight while one k-tile is computed); loads of 500 cycles, MMAs of 200, 16 k-tiles
    total 4400 cycles: the math computes 3200 (73%) and waits 1200 = 500 to fill the pipeline + 700 stalled on loads
    Little's law: (stages - 1) × 200 ≥ 500 needs 4 stages; with 3, one k-tile per 250 cycles (80% of the MMA's rate)
    H200, gemm05 fp16 4096³: 480 TFLOP/s at 3 stages (measured at 3-4 stages, best 560 at 4)
    """
    s = schedule
    if not isinstance(s, Schedule):
        raise ValueError(f"describe: schedule={s!r} is not a Schedule; pass simulate(stages, load_latency, "
                         "mma_time, k_tiles)")
    if s.issue == "tma":
        ring = "TMA: a producer warp refills each slot as soon as its MMA is done"
    elif s.stages == 1:
        ring = "cp.async with one slot: load, wait, compute, in turn"
    else:
        ring = f"cp.async: {_plural(s.stages - 1, 'load')} in flight while one k-tile is computed"
    gap = f", a load at most every {_n(s.load_gap)} cycles" if s.load_gap else ""
    lines = [f"{_plural(s.stages, 'stage')} ({ring}); loads of {_n(s.load_latency)} cycles, MMAs of "
             f"{_n(s.mma_time)}, {_plural(s.k_tiles, 'k-tile')}{gap}",
             f"total {_n(s.total)} cycles: the math computes {_n(s.k_tiles * s.mma_time)} ({s.efficiency:.0%}) and "
             + (f"waits {_n(s.math_waits)} = {_n(s.fill)} to fill the pipeline + {_n(s.stalls)} stalled on loads"
                if s.stalls else f"waits only the {_n(s.fill)} cycles of the fill (the first load)")]
    rate = f"one k-tile per {_n(s.period)} cycles ({s.mma_time / s.period:.0%} of the MMA's rate)"
    if s.min_stages is None:
        lines.append(f"a load only every {_n(s.load_gap)} cycles, slower than one MMA: the loads are "
                     f"bandwidth-bound, and no number of stages hides them; {rate}")
    else:
        verdict = "the math never waits after the fill" if s.hides_latency else rate
        lines.append(f"Little's law: (stages - 1) × {_n(s.mma_time)} ≥ {_n(s.load_latency)} needs "
                     f"{_plural(s.min_stages, 'stage')}; with {s.stages}, {verdict}")
    if measured is not None:
        _check_measured(measured, "describe")
        known = sorted(measured)
        at = f"{known[0]}-{known[-1]}" if known == list(range(known[0], known[-1] + 1)) and len(known) > 1 else \
            ", ".join(map(str, known))
        best = max(known, key=lambda k: measured[k])
        where = f"measured at {at} stage{'' if known == [1] else 's'}"
        lines.append(f"{measured_label}: {measured[s.stages]:.0f} TFLOP/s at {_plural(s.stages, 'stage')} ({where}, "
                     f"best {measured[best]:.0f} at {best})" if s.stages in measured else
                     f"{measured_label}: not measured at {_plural(s.stages, 'stage')} ({where})")
    return lines


# The picture: row labels left of the time axis, then the slots' rows, the math row, the axis and the note.
_LEFT = 70.0  # under 820 px: whole beside the side bar
_TOP = 56.0
_PLOT_W = 740.0
_ROW_H = 20.0
_ROW_GAP = 4.0
_LOAD = "#99DDFF"
_LANDED = "#EEDD88"
_MMA = "#44BB99"
_STALL = "#EE8866"
_FILL = "#DDDDDD"
_LEGEND = ((_LOAD, "load in flight"), (_LANDED, "landed, waiting for the math"), (_MMA, "MMA"),
           (_FILL, "fill (first load)"), (_STALL, "math waits for a load"))


def _tick_step(total: float) -> float:
    """A round step (1, 2 or 5 times a power of ten) giving at most 10 ticks over ``total``."""
    step = 10 ** math.floor(math.log10(total / 10)) if total >= 10 else 1
    return next(m * step for m in (1, 2, 5, 10) if total / (m * step) <= 10)  # step <= total / 10: 10 always fits


def _block(c: Canvas, x0: float, x1: float, y: float, fill: str, cls: str) -> None:
    if x1 > x0:
        c.rect(x0, y, x1 - x0, _ROW_H, fill=fill, stroke="#333", stroke_width=0.5, cls=cls)


def _label(c: Canvas, x0: float, x1: float, y: float, text: str) -> None:
    if text_width(text, 10) + 4 <= x1 - x0:  # a block too narrow keeps its label in its hover text only
        c.text((x0 + x1) / 2, y + _ROW_H / 2, text, size=10, cls="kt")


def timeline(schedule: Schedule) -> Picture:
    """The schedule as a timeline, time to the right: a row per slot (each k-tile's load in flight, landed, and
    computed, labelled by its ``kt``), a row for the math (MMAs, the fill, the stalls), a time axis and a note.

    Each k-tile is a ``<g class="tile">`` in its slot's row and a ``<g class="mma">`` in the math row, with
    ``data-kt`` and its times; each wait a ``<g class="wait">`` (``wait fill`` for the first). The whole drawing is a
    ``<g class="pipeline">`` whose ``data-efficiency`` and ``data-stalls`` say how it went.

    >>> p = timeline(simulate(3, 500, 200, 16))
    >>> p.svg.count('<g class="tile"'), p.svg.count('<g class="wait'), 'data-efficiency="0.7273"' in p.svg
    (16, 8, True)
    """
    s = schedule
    if not isinstance(s, Schedule):
        raise ValueError(f"timeline: schedule={s!r} is not a Schedule; pass simulate(stages, load_latency, "
                         "mma_time, k_tiles)")
    if s.k_tiles > MAX_K_TILES:
        raise ValueError(f"timeline: k_tiles={s.k_tiles} is more than the {MAX_K_TILES} a timeline draws legibly; "
                         f"simulate at most {MAX_K_TILES} (the steady state shows within a few rounds of the ring)")
    if s.stages > MAX_STAGES:
        raise ValueError(f"timeline: stages={s.stages} is more than the {MAX_STAGES} slot rows a timeline draws; "
                         f"simulate at most {MAX_STAGES} stages")
    scale = _PLOT_W / s.total
    rows = min(s.stages, s.k_tiles)  # a slot no k-tile reaches stays empty: not drawn

    def x(t: float) -> float:
        return _LEFT + t * scale

    def y(row: int) -> float:  # the math row sits a gap below the slots
        return _TOP + row * (_ROW_H + _ROW_GAP) + (8 if row == rows else 0)

    c = Canvas(_LEFT + _PLOT_W, 0)
    how = "cp.async" if s.issue == "cp.async" else "TMA + mbarriers"
    gap = f", loads ≥ {_n(s.load_gap)} apart" if s.load_gap else ""
    c.text(4, 12, f"{how}, {_plural(s.stages, 'stage')}: loads of {_n(s.load_latency)} cycles, MMAs of "
                  f"{_n(s.mma_time)}, {_plural(s.k_tiles, 'k-tile')}{gap}", size=13, anchor="start", cls="title",
           weight="bold")
    at = _LEFT
    for fill, what in _LEGEND:
        c.rect(at, 27, 12, 12, fill=fill, stroke="#333", stroke_width=0.5, cls="legend")
        c.text(at + 16, 33, what, size=10, anchor="start", cls="legend")
        at += 16 + text_width(what, 10) + 16
    c.raw(f'<g class="pipeline" data-stages="{s.stages}" data-issue="{s.issue}" data-efficiency="{s.efficiency:.4f}" '
          f'data-stalls="{_n(s.stalls)}">')
    for slot in range(rows):
        c.text(_LEFT - 6, y(slot) + _ROW_H / 2, f"slot {slot}", size=10, anchor="end", cls="row")
    for t in s.tiles:
        times = {"kt": t.kt, "slot": t.slot, "load-start": t.load_start, "load-end": t.load_end,
                 "mma-start": t.mma_start, "mma-end": t.mma_end}
        data = "".join(f' data-{k}="{_n(v)}"' for k, v in times.items())
        landed = "" if t.mma_start == t.load_end else f", waits {_n(t.mma_start - t.load_end)} for the math"
        c.raw(f'<g class="tile"{data}><title>k-tile {t.kt} in slot {t.slot}: loading {_n(t.load_start)}-'
              f'{_n(t.load_end)}{landed}, computed {_n(t.mma_start)}-{_n(t.mma_end)}</title>')
        top = y(t.slot)
        _block(c, x(t.load_start), x(t.load_end), top, _LOAD, "load")
        _block(c, x(t.load_end), x(t.mma_start), top, _LANDED, "landed")
        _block(c, x(t.mma_start), x(t.mma_end), top, _MMA, "computed")
        _label(c, x(t.load_start), x(t.mma_end), top, str(t.kt))
        c.raw("</g>")
    top = y(rows)
    c.text(_LEFT - 6, top + _ROW_H / 2, "math", size=10, anchor="end", cls="row", weight="bold")
    for t, wait in zip(s.tiles, s.waits):
        if wait > 0:
            kind = "wait fill" if t.kt == 0 else "wait"
            why = "the first load (the fill)" if t.kt == 0 else f"k-tile {t.kt}'s load"
            c.raw(f'<g class="{kind}" data-kt="{t.kt}" data-cycles="{_n(wait)}"><title>the math waits {_n(wait)} '
                  f'cycles for {why}</title>')
            _block(c, x(t.mma_start - wait), x(t.mma_start), top, _FILL if t.kt == 0 else _STALL, "wait")
            c.raw("</g>")
        c.raw(f'<g class="mma" data-kt="{t.kt}"><title>MMA of k-tile {t.kt}: {_n(t.mma_start)}-{_n(t.mma_end)}'
              f'</title>')
        _block(c, x(t.mma_start), x(t.mma_end), top, _MMA, "mma")
        _label(c, x(t.mma_start), x(t.mma_end), top, str(t.kt))
        c.raw("</g>")
    axis = top + _ROW_H + 8
    c.line(_LEFT, axis, _LEFT + _PLOT_W, axis, cls="axis")
    step = _tick_step(s.total)
    for i in range(int(s.total // step) + 1):
        c.line(x(i * step), axis, x(i * step), axis + 4, cls="tick")
        c.text(x(i * step), axis + 12, _n(i * step), size=9, cls="tick")
    c.text(_LEFT - 14, axis + 12, "cycles", size=9, anchor="end", cls="tick")
    c.raw("</g>")
    c.text(4, axis + 32, f"efficiency {s.efficiency:.0%}: the math waits {_n(s.math_waits)} of {_n(s.total)} cycles "
                         f"({_n(s.fill)} fill + {_n(s.stalls)} stalls); steady state: {_n(s.period)} cycles per "
                         f"k-tile", size=11, anchor="start", cls="note")
    return Picture(c.finish(), f"pipeline of {s.stages} stages")


def pipeline_explorer(stages: int = 3, load_latency: int = 500, mma_time: int = 200, k_tiles: int = 16,
                      issue: str = "cp.async", load_gap: int = 0, measured: Optional[Mapping[int, float]] = None,
                      measured_label: str = "the real kernel") -> Explorer:
    """Sliders for the stages (1-8), the load latency, the MMA time, the k-tiles (up to :data:`MAX_K_TILES`) and
    the load gap, and a menu for who issues the loads; the timeline redraws and the readout (:func:`describe`)
    gives the efficiency, the waits, Little's law's minimum stages and, given ``measured`` (``{stages: TFLOP/s}``
    of the real kernel, named by ``measured_label``), its speed at the slider's stage count.

    >>> ex = pipeline_explorer(measured={4: 560.0}, measured_label="H200, gemm05")
    >>> ex.controls["stages"].value = 4
    >>> print(*ex.readout.value.split("<br>")[2:], sep="\\n")
    Little's law: (stages - 1) × 200 ≥ 500 needs 4 stages; with 4, the math never waits after the fill
    H200, gemm05: 560 TFLOP/s at 4 stages (measured at 4 stages, best 560 at 4)
    """
    fn = "pipeline_explorer"
    check_int(stages, "stages", 1, 8, fn, "the slider goes from 1 to 8")
    check_int(k_tiles, "k_tiles", 1, MAX_K_TILES, fn, f"the slider goes from 1 to {MAX_K_TILES}")
    check_int(load_latency, "load_latency", 0, 4000, fn, "the slider goes from 0 to 4000 cycles")
    check_int(mma_time, "mma_time", 10, 1000, fn, "the slider goes from 10 to 1000 cycles")
    check_int(load_gap, "load_gap", 0, 1000, fn, "the slider goes from 0 to 1000 cycles")
    if issue not in ISSUES:
        raise ValueError(f"{fn}: issue={issue!r} is not one of {ISSUES}")
    if measured is not None:
        _check_measured(measured, fn)

    from .widgets import Explorer, W  # ipywidgets: only the explorer needs it

    def draw(ex: Explorer) -> str:
        c = ex.controls
        s = simulate(c["stages"].value, c["load_latency"].value, c["mma_time"].value, c["k_tiles"].value,
                     c["issue"].value, c["load_gap"].value)
        ex.readout.value = "<br>".join(escape(line, quote=False) for line in describe(s, measured, measured_label))
        return timeline(s).svg

    def slider(value: int, low: int, high: int, step: int, description: str) -> W.IntSlider:
        return W.IntSlider(value=value, min=low, max=high, step=step, description=description,
                           continuous_update=False, layout=W.Layout(width="320px"))

    controls = {
        "issue": W.Dropdown(options=[("cp.async (gemm04)", "cp.async"), ("TMA + producer warp (gemm08)", "tma")],
                            value=issue, description="Loads:", layout=W.Layout(width="320px")),
        "stages": slider(stages, 1, 8, 1, "Stages:"),
        "load_latency": slider(load_latency, 0, 4000, 10, "Load latency:"),
        "mma_time": slider(mma_time, 10, 1000, 10, "MMA time:"),
        "k_tiles": slider(k_tiles, 1, MAX_K_TILES, 1, "K-tiles:"),
        "load_gap": slider(load_gap, 0, 1000, 10, "Load gap:"),
    }
    return Explorer("pipeline", controls, draw, readout=True)
