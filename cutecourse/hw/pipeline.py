"""The pipeline model: a ring of ``stages`` shared-memory slots feeding the math, simulated k-tile by k-tile.
:mod:`cutecourse.viz.pipeline` draws its schedule as a timeline and explores it with sliders.

The model, in cycles (any unit: only the ratios matter). K-tile ``kt`` lives in slot ``kt % stages``; its load takes
``load_latency`` and its MMA ``mma_time``; the MMA of k-tile ``kt`` starts when its load has landed and the MMA of
k-tile ``kt - 1`` is done. When a load may start depends on who issues it (``issue``):

- ``"cp.async"`` (gemm04): the threads that compute also issue the copies. The loads of k-tiles ``0 .. stages - 2``
  start at 0; in iteration ``kt`` the threads wait for k-tile ``kt`` to land, then refill the slot k-tile ``kt - 1``
  has just freed with k-tile ``kt + stages - 1``, then compute ``kt``. So a load starts when the MMA of the k-tile
  ``stages - 1`` before it starts: ``stages - 1`` loads are in flight while one k-tile is computed. One stage is
  step 3's loop: load, wait, compute, in turn. (gemm06 and gemm07, whose warp 0 issues TMA loads between its own
  MMAs, fill and refill their slots in the same order.)
- ``"tma"`` (gemm08): a producer warp issues the loads. It fills all ``stages`` slots at 0, then refills a slot as
  soon as the MMA of the k-tile in it is done (the slot's *empty* mbarrier), without waiting for the math.

``load_gap`` is the bandwidth: consecutive loads start at least that many cycles apart (0: unlimited).

What the model satisfies exactly (the tests pin it): after the first load (the *fill*, ``load_latency``, which no
ring avoids), the math never waits, for any number of k-tiles, if and only if

    ``load_gap ≤ mma_time``  and  ``(stages - 1) · mma_time ≥ load_latency``,

i.e. ``stages ≥ ceil(load_latency / mma_time) + 1``; with one stage fewer it waits once there are more k-tiles than
slots. This is Little's law: to keep one k-tile every ``mma_time`` cycles arriving over a latency of
``load_latency``, ``load_latency / mma_time`` of them must be in flight, besides the one being computed. In the
steady state one k-tile is done every ``max(mma_time, load_gap, load_latency / (stages - 1))`` cycles with cp.async
(``load_latency + mma_time`` at one stage) and ``max(mma_time, load_gap, (load_latency + mma_time) / stages)``
with TMA, whose slots go back into flight while the math waits.

>>> s = simulate(stages=3, load_latency=500, mma_time=200, k_tiles=16)
>>> s.tiles[5]
KTile(kt=5, slot=2, load_start=1200, load_end=1700, mma_start=1700, mma_end=1900)
>>> s.total, s.stalls, s.min_stages, f"{s.efficiency:.0%}"
(4400, 700, 4, '73%')
>>> simulate(4, 500, 200, 16).stalls  # ceil(500 / 200) + 1 = 4 stages hide the load
0
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property
from numbers import Real
from typing import Optional

__all__ = ["ISSUES", "KTile", "Schedule", "simulate", "check_int"]

#: Who issues the loads: the computing threads (cp.async, gemm04) or a producer warp (TMA + mbarriers, gemm08).
ISSUES: tuple[str, ...] = ("cp.async", "tma")
_MAX_SIMULATED = 1 << 16  # the schedule is periodic after a few rounds of the ring: more k-tiles show nothing new


@dataclass(frozen=True)
class KTile:
    """One k-tile's trip through the ring: its slot, when its load is in flight, when its MMA runs."""

    kt: int
    slot: int
    load_start: float
    load_end: float
    mma_start: float
    mma_end: float


@dataclass(frozen=True)
class Schedule:
    """What :func:`simulate` returns: the parameters and every k-tile's :class:`KTile`, in order."""

    stages: int
    load_latency: float
    mma_time: float
    k_tiles: int
    issue: str
    load_gap: float
    tiles: tuple[KTile, ...]

    @property
    def total(self) -> float:
        """When the last MMA ends: the mainloop's time."""
        return self.tiles[-1].mma_end

    @cached_property
    def waits(self) -> tuple[float, ...]:
        """Per k-tile, how long the math waits before its MMA (the first: the fill, the first load's latency)."""
        ends = [0, *(t.mma_end for t in self.tiles[:-1])]
        return tuple(t.mma_start - end for t, end in zip(self.tiles, ends))

    @property
    def math_waits(self) -> float:
        """All the time the math waits: ``total - k_tiles · mma_time``."""
        return sum(self.waits)

    @property
    def fill(self) -> float:
        return self.waits[0]

    @property
    def stalls(self) -> float:
        """The waits after the fill: what more stages (or more bandwidth) can remove."""
        return self.math_waits - self.fill

    @property
    def efficiency(self) -> float:
        """The fraction of the time the math computes: ``k_tiles · mma_time / total``."""
        return self.k_tiles * self.mma_time / self.total

    @property
    def bandwidth_bound(self) -> bool:
        """Loads cannot start as often as MMAs finish: no number of stages keeps the math busy."""
        return self.load_gap > self.mma_time

    @property
    def min_stages(self) -> Optional[int]:
        """Little's law: the fewest stages with which the math never waits after the fill; None if bandwidth-bound."""
        return None if self.bandwidth_bound else math.ceil(self.load_latency / self.mma_time) + 1

    @property
    def hides_latency(self) -> bool:
        """``stages ≥ min_stages``: the math never waits after the fill, however many k-tiles there are."""
        return self.min_stages is not None and self.stages >= self.min_stages

    @property
    def period(self) -> float:
        """Cycles per k-tile in the steady state (see the module docstring); ``mma_time`` when the latency is hidden."""
        L = self.load_latency
        T = self.mma_time
        S = self.stages
        latency = (L + T) / S if self.issue == "tma" else L / (S - 1) if S > 1 else L + T
        return max(T, self.load_gap, latency)


def check_int(value: object, name: str, low: int, high: int, fn: str, fix: str) -> None:
    """Raise ValueError, ending with ``fix``, unless ``value`` is an int from ``low`` to ``high``."""
    if not (isinstance(value, int) and not isinstance(value, bool) and low <= value <= high):
        raise ValueError(f"{fn}: {name}={value!r} must be an int from {low} to {high}; {fix}")


def _check_time(value: object, name: str, fn: str, positive: bool) -> None:
    if not (isinstance(value, Real) and not isinstance(value, bool) and math.isfinite(value)
            and (value > 0 if positive else value >= 0)):
        raise ValueError(f"{fn}: {name}={value!r} must be a number of cycles, {'> 0' if positive else '≥ 0'}, "
                         f"e.g. {name}={200 if positive else 0}")


def simulate(stages: int, load_latency: float, mma_time: float, k_tiles: int, issue: str = "cp.async",
             load_gap: float = 0) -> Schedule:
    """The schedule of ``k_tiles`` k-tiles through a ring of ``stages`` slots (the model: the module docstring).

    >>> [(t.slot, t.load_start, t.mma_start) for t in simulate(1, 300, 100, 3).tiles]  # one stage: in turn
    [(0, 0, 300), (0, 400, 700), (0, 800, 1100)]
    >>> simulate(2, 300, 100, 8, issue="tma").period, simulate(2, 300, 100, 8).period
    (200.0, 300.0)
    """
    fn = "simulate"
    check_int(stages, "stages", 1, _MAX_SIMULATED, fn, "stages is the number of shared-memory slots, e.g. 3")
    _check_time(load_latency, "load_latency", fn, positive=False)
    _check_time(mma_time, "mma_time", fn, positive=True)
    check_int(k_tiles, "k_tiles", 1, _MAX_SIMULATED, fn, "k_tiles is K / tile_k, e.g. 16 (the schedule is "
                                                          "periodic after a few rounds of the ring)")
    if issue not in ISSUES:
        raise ValueError(f"{fn}: issue={issue!r} is not one of {ISSUES}: 'cp.async' when the computing threads "
                         "issue the loads (gemm04), 'tma' for a producer warp (gemm08)")
    _check_time(load_gap, "load_gap", fn, positive=False)
    S = stages
    L = load_latency
    T = mma_time
    tiles: list[KTile] = []
    for j in range(k_tiles):
        if issue == "tma" or S == 1:  # the slot's last tenant, k-tile j - S, must be computed
            ready = tiles[j - S].mma_end if j >= S else 0
        else:  # cp.async: issued in iteration j - S + 1, after its wait for k-tile j - S + 1 to land
            ready = tiles[j - S + 1].mma_start if j >= S - 1 else 0
        load_start = max(ready, tiles[-1].load_start + load_gap) if tiles else 0
        mma_start = max(load_start + L, tiles[-1].mma_end if tiles else 0)
        tiles.append(KTile(j, j % S, load_start, load_start + L, mma_start, mma_start + T))
    return Schedule(S, L, T, k_tiles, issue, load_gap, tuple(tiles))
