"""matplotlib charts: the roofline (lesson 1) and benchmark bars against a baseline (lesson 8).

Figures are built with ``matplotlib.figure.Figure`` (no pyplot state), so they display in Jupyter as the cell's
value and save with ``fig.savefig(path)``.

>>> fig = roofline({"FP16 Tensor Core": 989.0, "FP32": 67.0}, 4.8, [("my GEMM", 300.0, 610.0)])
>>> [ax.get_xscale() for ax in fig.axes]
['log']
"""

from __future__ import annotations

import io
from typing import Mapping, Sequence, Union

from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter

from cutecourse.hw.roofline import attainable_tflops, ridge_point

__all__ = ["roofline", "bench_chart", "figure_svg"]

Point = Union[tuple[str, float], tuple[str, float, float]]


def check_roof(peak_tflops: Mapping[str, float], bandwidth_tbs: float) -> None:
    """Raise ValueError unless ``peak_tflops`` maps names to positive TFLOP/s and ``bandwidth_tbs`` is positive."""
    if not peak_tflops or any(not v > 0 for v in peak_tflops.values()):
        raise ValueError(f"roofline: peak_tflops must map a name to a positive TFLOP/s, got {peak_tflops!r}; "
                         f"e.g. {{'FP16 Tensor Core': 989.0}}")
    if not bandwidth_tbs > 0:
        raise ValueError(f"roofline: bandwidth_tbs must be a positive TB/s, got {bandwidth_tbs!r}; e.g. 3.35")


def roofline(peak_tflops: Mapping[str, float], bandwidth_tbs: float, points: Sequence[Point] = ()) -> Figure:
    """A log-log roofline: one roof per entry of ``peak_tflops`` under one memory slope of ``bandwidth_tbs``.

    ``points`` are ``(label, intensity)`` (drawn on the roof: what the kernel could reach) or
    ``(label, intensity, measured_tflops)`` (drawn where it is). Intensity is FLOP per byte of DRAM traffic.

    >>> fig = roofline({"FP16": 989.0}, 3.35, [("naive", 2.0)])
    >>> len(fig.axes[0].lines) >= 2
    True
    """
    check_roof(peak_tflops, bandwidth_tbs)
    ridge_max = ridge_point(max(peak_tflops.values()), bandwidth_tbs)
    xs_all = [p[1] for p in points] + [ridge_max]
    lo, hi = min(0.1, min(xs_all) / 2), max(1e4, max(xs_all) * 4)
    fig = Figure(figsize=(7.5, 4.5), layout="constrained")
    ax = fig.add_subplot()
    for name, peak in sorted(peak_tflops.items(), key=lambda kv: -kv[1]):
        ridge = ridge_point(peak, bandwidth_tbs)
        (line,) = ax.plot([lo, ridge, hi], [bandwidth_tbs * lo, peak, peak], label=f"{name}: {peak:g} TFLOP/s")
        ax.annotate(f"ridge {ridge:.0f} FLOP/B", (ridge, peak), textcoords="offset points", xytext=(4, -12),
                    fontsize=8, color=line.get_color())
    best = max(peak_tflops.values())
    for p in points:
        label, x = p[0], float(p[1])
        y = float(p[2]) if len(p) > 2 else attainable_tflops(best, bandwidth_tbs, x)
        ax.plot([x], [y], "o", color="black")
        ax.annotate(label, (x, y), textcoords="offset points", xytext=(5, 5), fontsize=9)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(lo, hi)
    # Decades only, labelled in plain text (not mathtext): a third of the SVG, and labels the picture test can read.
    ax.minorticks_off()
    for axis in (ax.xaxis, ax.yaxis):
        axis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    ax.set_xlabel("arithmetic intensity (FLOP / byte)")
    ax.set_ylabel("TFLOP/s")
    ax.set_title(f"Roofline, {bandwidth_tbs:g} TB/s memory bandwidth")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8, loc="upper left")  # above the memory slope, where no kernel sits
    return fig


def bench_chart(rows: Sequence[Mapping[str, object]], unit: str = "TFLOP/s") -> Figure:
    """Horizontal bars, one per row: ``{"name": str, "value": float}`` plus, optionally, ``"baseline": float``.

    With a baseline (e.g. cuBLAS timed in the same run) a tick marks it and the bar is labelled with the ratio,
    the figure the course reports.

    >>> fig = bench_chart([{"name": "step 3", "value": 410.0, "baseline": 620.0}, {"name": "step 4", "value": 590.0}])
    >>> len(fig.axes[0].patches)
    2
    """
    if not rows:
        raise ValueError("bench_chart: rows is empty; pass e.g. [{'name': 'my kernel', 'value': 512.0}]")
    for i, r in enumerate(rows):
        if "name" not in r or "value" not in r:
            raise ValueError(f"bench_chart: rows[{i}] = {dict(r)!r} needs keys 'name' and 'value' "
                             f"(and optionally 'baseline')")
    fig = Figure(figsize=(7.5, 0.5 * len(rows) + 1.2), layout="constrained")
    ax = fig.add_subplot()
    names = [str(r["name"]) for r in rows]
    values = [float(r["value"]) for r in rows]  # type: ignore[arg-type]
    ys = list(range(len(rows)))[::-1]
    ax.barh(ys, values, color="#77AADD")
    for y, r, v in zip(ys, rows, values):
        text = f"{v:g}"
        if r.get("baseline"):
            base = float(r["baseline"])  # type: ignore[arg-type]
            ax.plot([base, base], [y - 0.4, y + 0.4], color="black", linewidth=2)
            text += f"  ({v / base:.2f}x baseline)"
        ax.annotate(text, (v, y), textcoords="offset points", xytext=(4, 0), va="center", fontsize=9)
    ax.set_yticks(ys, names)
    ax.set_xlabel(unit)
    ax.margins(x=0.25)
    return fig


def figure_svg(fig: Figure) -> str:
    """The figure as SVG text (what the roofline explorer shows, and what a notebook stores of a chart): text kept as
    text (small, searchable, and measured by the picture tests), no date and the same ids on every run, so that a
    stored output compares equal when the cell runs again."""
    import matplotlib

    buf = io.StringIO()
    with matplotlib.rc_context({"svg.fonttype": "none", "svg.hashsalt": "cutecourse"}):
        fig.savefig(buf, format="svg", metadata={"Date": None})
    return buf.getvalue()
