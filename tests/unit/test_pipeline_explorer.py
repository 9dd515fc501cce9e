"""The pipeline explorer's model is a ring of shared-memory slots: every slot holds its k-tiles in order and is refilled
only once its last k-tile is computed, an MMA starts as soon as its load has landed and the math is free, and the
math never waits after the fill exactly when Little's law says, (stages - 1) · mma_time ≥ load_latency; the timeline
draws that schedule, the readout says it, and the explorer redraws on every slider."""

from __future__ import annotations

import dataclasses
import doctest
import html
import itertools
import math
import re
import xml.etree.ElementTree as ET

import pytest

from cutecourse.hw import pipeline as model
from cutecourse.hw.pipeline import ISSUES, Schedule, simulate
from cutecourse.viz import pipeline as P  # the picture and the readout need no ipywidgets

from .test_light_imports import run_hidden
from .needs import widgets


NS = "{http://www.w3.org/2000/svg}"

# A grid of rings: latencies below, at and above multiples of the MMA time, gaps below and above it.
GRID = list(itertools.product(range(1, 9), (0, 50, 100, 150, 300, 500, 777, 1000), (10, 100, 130, 200),
                              (0, 60, 100, 150), ISSUES))


def ring_violations(s: Schedule) -> list[str]:
    """What a schedule breaks of the ring's rules (empty when it keeps them all)."""
    bad = []
    S = s.stages
    L = s.load_latency
    T = s.mma_time
    for t in s.tiles:
        if t.slot != t.kt % S:
            bad.append(f"k-tile {t.kt} in slot {t.slot}, not {t.kt % S}")
        if t.load_end != t.load_start + L or t.mma_end != t.mma_start + T:
            bad.append(f"k-tile {t.kt}: a load takes {t.load_end - t.load_start}, an MMA {t.mma_end - t.mma_start}")
        if t.mma_start < t.load_end:
            bad.append(f"k-tile {t.kt}'s MMA starts at {t.mma_start}, before its load lands at {t.load_end}")
    for prev, t in zip(s.tiles, s.tiles[1:]):
        if t.mma_start != max(t.load_end, prev.mma_end):
            bad.append(f"k-tile {t.kt}'s MMA starts at {t.mma_start}, not as soon as it can")
        if t.load_start < prev.load_start + s.load_gap:
            bad.append(f"k-tile {t.kt}'s load starts {t.load_start - prev.load_start} after the previous one")
    for old, new in zip(s.tiles, s.tiles[S:]):  # the slot's next tenant
        if new.load_start < old.mma_end:
            bad.append(f"slot {old.slot} reloaded with k-tile {new.kt} at {new.load_start}, before k-tile "
                       f"{old.kt}'s MMA ends at {old.mma_end}")
    return bad


def in_flight_at_start(s: Schedule) -> int:
    return sum(t.load_start == 0 for t in s.tiles)


@widgets
@pytest.mark.parametrize("module", [model, P])
def test_docstring_examples_run(module):
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert result.failed == 0 and result.attempted > 0


def test_every_ring_keeps_its_slots_in_order_and_refills_a_slot_only_when_it_is_free():
    for stages, latency, mma, gap, issue in GRID:
        s = simulate(stages, latency, mma, 3 * stages + 5, issue, gap)
        assert [t.kt for t in s.tiles] == list(range(s.k_tiles))
        assert ring_violations(s) == [], (stages, latency, mma, gap, issue)


def test_the_rules_catch_a_ring_that_refills_a_slot_too_early_or_computes_too_soon():
    s = simulate(3, 500, 200, 16)
    early = [dataclasses.replace(t, load_start=t.load_start - 50, load_end=t.load_end - 50) if t.kt == 5 else t
             for t in s.tiles]  # k-tile 5 into slot 2 while k-tile 2 is still computed there
    assert any("slot 2 reloaded with k-tile 5" in v for v in ring_violations(dataclasses.replace(s, tiles=early)))
    eager = [dataclasses.replace(t, mma_start=t.mma_start - 1, mma_end=t.mma_end - 1) if t.kt == 15 else t
             for t in s.tiles]
    assert any("before its load lands" in v for v in ring_violations(dataclasses.replace(s, tiles=eager)))
    late = [dataclasses.replace(t, mma_start=t.mma_start + 1, mma_end=t.mma_end + 1) if t.kt == 15 else t
            for t in s.tiles]
    assert ring_violations(dataclasses.replace(s, tiles=late)) == \
        [f"k-tile 15's MMA starts at {s.tiles[15].mma_start + 1}, not as soon as it can"]


def test_the_math_never_waits_after_the_fill_exactly_when_littles_law_holds():
    """(stages - 1) · mma_time ≥ load_latency and load_gap ≤ mma_time; with more k-tiles than slots, otherwise it
    waits."""
    for stages, latency, mma, gap, issue in GRID:
        law = (stages - 1) * mma >= latency and gap <= mma
        for k_tiles in (stages + 1, 4 * stages + 7):
            s = simulate(stages, latency, mma, k_tiles, issue, gap)
            assert s.hides_latency == law and (s.stalls == 0) == law, (stages, latency, mma, gap, issue, s.waits)
            assert s.fill == latency and s.math_waits == s.fill + s.stalls == s.total - k_tiles * mma
            assert s.efficiency == k_tiles * mma / s.total and all(w >= 0 for w in s.waits)
            if law:
                assert s.total == latency + k_tiles * mma


@pytest.mark.parametrize("latency, mma", [(500, 200), (400, 200), (401, 200), (1000, 10), (0, 50), (199, 200)])
@pytest.mark.parametrize("issue", ISSUES)
def test_ceil_latency_over_mma_plus_one_stages_is_the_fewest_that_keep_the_math_busy(latency, mma, issue):
    fewest = math.ceil(latency / mma) + 1
    k_tiles = 2 * fewest + 8  # more k-tiles than slots, or no stall could show
    assert simulate(fewest, latency, mma, k_tiles, issue).min_stages == fewest
    assert simulate(fewest, latency, mma, k_tiles, issue).stalls == 0
    assert simulate(fewest + 3, latency, mma, k_tiles, issue).stalls == 0
    if fewest > 1:
        assert simulate(fewest - 1, latency, mma, k_tiles, issue).stalls > 0


def test_a_load_gap_longer_than_an_mma_is_bandwidth_bound_at_any_stage_count():
    for stages in range(1, 9):
        s = simulate(stages, 100, 100, 32, load_gap=150)
        assert s.bandwidth_bound and s.min_stages is None and s.stalls > 0
        assert s.period == (200 if stages == 1 else 150)  # one stage: a load, then its MMA, in turn
    assert simulate(8, 100, 100, 32, load_gap=100).stalls == 0  # a load per MMA keeps up


@pytest.mark.parametrize("issue", ISSUES)
@pytest.mark.parametrize("latency, mma, k_tiles", [(300, 100, 3), (500, 200, 16), (0, 10, 5), (700, 30, 64)])
def test_one_stage_serialises_load_and_mma(issue, latency, mma, k_tiles):
    s = simulate(1, latency, mma, k_tiles, issue)
    assert s.total == k_tiles * (latency + mma) and s.period == latency + mma
    assert all(t.load_start == t.kt * (latency + mma) for t in s.tiles)


@pytest.mark.parametrize("stages, k_tiles, issue, at_start", [
    (4, 3, "cp.async", 3), (4, 2, "tma", 2), (4, 4, "tma", 4), (4, 9, "cp.async", 3), (4, 9, "tma", 4),
    (1, 5, "cp.async", 1), (8, 1, "cp.async", 1)])
def test_the_prologue_fills_stages_minus_one_slots_with_cp_async_and_all_with_tma(stages, k_tiles, issue, at_start):
    s = simulate(stages, 900, 100, k_tiles, issue)
    assert in_flight_at_start(s) == at_start
    if k_tiles < stages:  # fewer k-tiles than slots: every load is in flight at once, nothing stalls
        assert s.stalls == 0 and s.total == 900 + k_tiles * 100 and len({t.slot for t in s.tiles}) == k_tiles


def test_cp_async_issues_a_load_only_after_waiting_for_the_tile_before_it_tma_does_not():
    """cp.async: iteration kt waits for k-tile kt, then issues k-tile kt + stages - 1; a producer warp only waits
    for the slot. Latency-bound, the producer's ring runs faster."""
    cp, tma = simulate(3, 900, 100, 24), simulate(3, 900, 100, 24, issue="tma")
    assert all(t.load_start == cp.tiles[t.kt - 2].mma_start for t in cp.tiles[2:])
    assert all(t.load_start == tma.tiles[t.kt - 3].mma_end for t in tma.tiles[3:])
    assert (cp.period, tma.period) == (450, 1000 / 3) and tma.total < cp.total


def test_the_steady_state_runs_one_k_tile_per_period():
    """max(mma, gap, latency / (stages - 1)) for cp.async (latency + mma at one stage), max(mma, gap,
    (latency + mma) / stages) for TMA: over 840 k-tiles, a multiple of every round of the ring."""
    for stages, latency, mma, gap, issue in GRID[::5]:
        s = simulate(stages, latency, mma, 1000, issue, gap)
        latency_bound = (latency + mma) / stages if issue == "tma" else latency / (stages - 1) if stages > 1 else \
            latency + mma
        assert s.period == max(mma, gap, latency_bound)
        rate = (s.tiles[-1].mma_start - s.tiles[-841].mma_start) / 840
        assert rate == pytest.approx(s.period, rel=1e-12), (stages, latency, mma, gap, issue)


@pytest.mark.parametrize("kwargs, message", [
    ({"stages": 0}, "simulate: stages=0 must be an int from 1 to 65536; stages is the number of shared-memory slots"),
    ({"stages": 2.0}, "stages=2.0 must be an int"),
    ({"stages": True}, "stages=True must be an int"),
    ({"load_latency": -1}, "load_latency=-1 must be a number of cycles, ≥ 0, e.g. load_latency=0"),
    ({"load_latency": float("inf")}, "load_latency=inf must be a number of cycles"),
    ({"mma_time": 0}, "mma_time=0 must be a number of cycles, > 0, e.g. mma_time=200"),
    ({"mma_time": "200"}, "mma_time='200' must be a number of cycles"),
    ({"k_tiles": 0}, "k_tiles=0 must be an int from 1 to 65536; k_tiles is K / tile_k"),
    ({"k_tiles": 1 << 17}, "k_tiles=131072 must be an int from 1 to 65536"),
    ({"issue": "TMA"}, "issue='TMA' is not one of ('cp.async', 'tma'): 'cp.async' when the computing threads"),
    ({"load_gap": -5}, "load_gap=-5 must be a number of cycles, ≥ 0"),
])
def test_simulate_rejects_bad_arguments_naming_the_argument_and_the_fix(kwargs, message):
    args = {"stages": 3, "load_latency": 500, "mma_time": 200, "k_tiles": 16, **kwargs}
    with pytest.raises(ValueError, match=re.escape(message)):
        simulate(**args)


def groups(svg: str, cls: str) -> list[dict[str, str]]:
    return [dict(g.attrib, text=" ".join(t.text for t in g.iter(f"{NS}text")))
            for g in ET.fromstring(svg).iter(f"{NS}g") if g.get("class", "").split()[0] == cls]


def rect_span(svg: str, cls: str, rect: str) -> list[tuple[float, float]]:
    """(left, right) of each `rect` rectangle in each `cls` group, in the groups' order."""
    out = []
    for g in ET.fromstring(svg).iter(f"{NS}g"):
        if g.get("class", "").split()[0] == cls:
            for r in g.iter(f"{NS}rect"):
                if r.get("class") == rect:
                    out.append((float(r.get("x")), float(r.get("x")) + float(r.get("width"))))
    return out


@pytest.mark.parametrize("stages, latency, mma, k_tiles, issue", [
    (3, 500, 200, 16, "cp.async"), (4, 500, 200, 16, "tma"), (1, 300, 100, 6, "cp.async"), (8, 2000, 20, 64, "tma")])
def test_the_timeline_draws_each_k_tile_in_its_slot_and_every_wait_of_the_math(stages, latency, mma, k_tiles, issue):
    s = simulate(stages, latency, mma, k_tiles, issue)
    svg = P.timeline(s).svg
    root = ET.fromstring(svg)
    assert float(root.get("width")) <= 840  # whole at 100% zoom in a 1280 px JupyterLab with its side bar open
    tiles = groups(svg, "tile")
    assert [(int(g["data-kt"]), int(g["data-slot"])) for g in tiles] == [(t.kt, t.slot) for t in s.tiles]
    assert [float(g["data-load-start"]) for g in tiles] == [t.load_start for t in s.tiles]
    assert [float(g["data-mma-end"]) for g in tiles] == [t.mma_end for t in s.tiles]
    assert all(g["text"] in ("", g["data-kt"]) for g in tiles)  # labelled by kt where a label fits
    assert [int(g["data-kt"]) for g in groups(svg, "mma")] == list(range(k_tiles))
    waits = groups(svg, "wait")
    assert [(int(g["data-kt"]), float(g["data-cycles"])) for g in waits] == \
        [(kt, w) for kt, w in enumerate(s.waits) if w > 0]
    assert [g["class"] for g in waits][:1] == ["wait fill"] and all(g["class"] == "wait" for g in waits[1:])
    # Time runs right at one scale: each MMA's block spans its start and end, the same in its slot and the math row.
    mmas = rect_span(svg, "mma", "mma")
    scale = (mmas[-1][1] - mmas[0][0]) / (s.total - s.tiles[0].mma_start)
    assert all(a == pytest.approx(mmas[0][0] + (t.mma_start - s.tiles[0].mma_start) * scale, abs=0.01) for (a, _), t in
               zip(mmas, s.tiles))
    assert rect_span(svg, "tile", "computed") == mmas
    rows = [t.text for t in root.iter(f"{NS}text") if t.get("class") == "row"]
    assert rows == [f"slot {j}" for j in range(min(stages, k_tiles))] + ["math"]
    note = next(t.text for t in root.iter(f"{NS}text") if t.get("class") == "note")
    assert note.startswith(f"efficiency {s.efficiency:.0%}: the math waits {s.math_waits:g} of {s.total:g} cycles")


def test_the_default_timeline_labels_every_block_and_draws_the_stalls_only_below_littles_law():
    stall, busy = P.timeline(simulate(3, 500, 200, 16)).svg, P.timeline(simulate(4, 500, 200, 16)).svg
    for svg in (stall, busy):
        assert [g["text"] for g in groups(svg, "tile")] == [str(kt) for kt in range(16)]
        assert [g["text"] for g in groups(svg, "mma")] == [str(kt) for kt in range(16)]
    assert [g["data-cycles"] for g in groups(stall, "wait")] == ["500"] + ["100"] * 7
    assert [g["data-cycles"] for g in groups(busy, "wait")] == ["500"]
    assert groups(stall, "pipeline")[0]["data-efficiency"] == "0.7273" and groups(stall, "pipeline")[0]["data-stalls"] \
        == "700"
    assert groups(busy, "pipeline")[0]["data-efficiency"] == f"{3200 / 3700:.4f}"


@pytest.mark.parametrize("schedule, message", [
    (simulate(3, 500, 200, 65), "timeline: k_tiles=65 is more than the 64 a timeline draws legibly; simulate at"),
    (simulate(17, 500, 200, 20), "timeline: stages=17 is more than the 16 slot rows a timeline draws"),
    (3, "timeline: schedule=3 is not a Schedule; pass simulate(stages, load_latency, mma_time, k_tiles)"),
])
def test_the_timeline_refuses_what_it_cannot_draw_legibly(schedule, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        P.timeline(schedule)


MEASURED = {2: 301.5, 3: 480.0, 4: 560.2, 5: 555.0}


def test_describe_says_where_the_time_goes_and_what_littles_law_asks():
    stall = P.describe(simulate(3, 500, 200, 16))
    assert stall == [
        "3 stages (cp.async: 2 loads in flight while one k-tile is computed); loads of 500 cycles, MMAs of 200, "
        "16 k-tiles",
        "total 4400 cycles: the math computes 3200 (73%) and waits 1200 = 500 to fill the pipeline + 700 stalled on "
        "loads",
        "Little's law: (stages - 1) × 200 ≥ 500 needs 4 stages; with 3, one k-tile per 250 cycles (80% of the MMA's "
        "rate)"]
    busy = P.describe(simulate(4, 500, 200, 16, issue="tma"))
    assert busy[0].startswith("4 stages (TMA: a producer warp refills each slot as soon as its MMA is done)")
    assert busy[1] == ("total 3700 cycles: the math computes 3200 (86%) and waits only the 500 cycles of the fill "
                       "(the first load)")
    assert busy[2] == ("Little's law: (stages - 1) × 200 ≥ 500 needs 4 stages; with 4, the math never waits after "
                       "the fill")
    one = P.describe(simulate(1, 500, 200, 2, load_gap=30))
    assert one[0] == ("1 stage (cp.async with one slot: load, wait, compute, in turn); loads of 500 cycles, MMAs of "
                      "200, 2 k-tiles, a load at most every 30 cycles")
    bound = P.describe(simulate(6, 500, 200, 16, load_gap=250))
    assert bound[2] == ("a load only every 250 cycles, slower than one MMA: the loads are bandwidth-bound, and no "
                        "number of stages hides them; one k-tile per 250 cycles (80% of the MMA's rate)")


@pytest.mark.parametrize("stages, line", [
    (3, "H200, gemm05 fp16 4096³: 480 TFLOP/s at 3 stages (measured at 2-5 stages, best 560 at 4)"),
    (4, "H200, gemm05 fp16 4096³: 560 TFLOP/s at 4 stages (measured at 2-5 stages, best 560 at 4)"),
    (1, "H200, gemm05 fp16 4096³: not measured at 1 stage (measured at 2-5 stages)"),
    (8, "H200, gemm05 fp16 4096³: not measured at 8 stages (measured at 2-5 stages)"),
])
def test_describe_gives_the_real_kernels_speed_at_the_stage_count_or_says_it_was_not_measured(stages, line):
    lines = P.describe(simulate(stages, 500, 200, 16), MEASURED, "H200, gemm05 fp16 4096³")
    assert len(lines) == 4 and lines[3] == line
    assert P.describe(simulate(stages, 500, 200, 16), {3: 1.0, 5: 2.0})[3].endswith("(measured at 3, 5 stages" +
                                                                                     (", best 2 at 5)" if stages == 3
                                                                                      else ")"))


@pytest.mark.parametrize("measured", [{0: 500.0}, {3: -1.0}, {3: "fast"}, {True: 1.0}, [480.0], {3: float("nan")}])
def test_describe_rejects_measurements_that_are_not_stages_to_tflops(measured):
    with pytest.raises(ValueError, match=re.escape("describe: measured=") + ".*" +
                       re.escape("must map stage counts (ints ≥ 1) to TFLOP/s (numbers > 0), e.g. {3: 480.0")):
        P.describe(simulate(3, 500, 200, 16), measured)


def test_the_model_picture_and_readout_run_without_ipywidgets_or_numpy():
    """Under test_light_imports' blocker, which makes importing a heavy module raise: using the model, the picture
    and the readout imports none; only the explorer asks for ipywidgets."""
    out = run_hidden("""
        from cutecourse.hw.pipeline import simulate
        from cutecourse.viz import pipeline as P
        s = simulate(3, 500, 200, 16)
        P.timeline(s), P.describe(s, {3: 480.0})
        try:
            P.pipeline_explorer()
        except ModuleNotFoundError as e:
            assert "pip install 'ipywidgets" in str(e), e
        else:
            raise AssertionError("the explorer built without ipywidgets")
    """)
    assert out.returncode == 0, out.stderr


def efficiency(ex) -> str:
    return groups(ex.picture.value, "pipeline")[0]["data-efficiency"]


@widgets
def test_the_explorer_redraws_on_every_slider_and_the_menu():
    ex = P.pipeline_explorer(measured=MEASURED, measured_label="H200, gemm05 fp16 4096³")
    assert ex.message.value == "" and efficiency(ex) == "0.7273"
    assert ex.readout.value.split("<br>")[3].startswith("H200, gemm05 fp16 4096³: 480 TFLOP/s at 3 stages")
    seen = {ex.picture.value}
    changes = [("stages", 4, "0.8649", "with 4, the math never waits"), ("load_latency", 900, "0.5714", "needs 6"),
               ("mma_time", 300, "0.8421", "needs 4 stages; with 4, the math never"),
               ("k_tiles", 40, "0.9302", "40 k-tiles"), ("issue", "tma", "0.9302", "TMA: a producer warp"),
               ("load_gap", 400, "0.7143", "bandwidth-bound"), ("stages", 1, "0.2500", "not measured at 1 stage")]
    for name, value, want, said in changes:
        ex.controls[name].value = value
        s = simulate(*(ex.controls[k].value for k in ("stages", "load_latency", "mma_time", "k_tiles", "issue",
                                                        "load_gap")))
        assert ex.message.value == "" and efficiency(ex) == want == f"{s.efficiency:.4f}", (name, value)
        assert said in html.unescape(ex.readout.value), (name, ex.readout.value)
        assert html.unescape(ex.readout.value).split("<br>") == P.describe(s, MEASURED, "H200, gemm05 fp16 4096³")
        assert ex.picture.value not in seen
        seen.add(ex.picture.value)


@widgets
def test_the_explorer_without_measurements_has_three_readout_lines():
    ex = P.pipeline_explorer(stages=5, issue="tma")
    assert len(ex.readout.value.split("<br>")) == 3 and ex.controls["issue"].value == "tma"
    assert ex.controls["stages"].max == 8 and ex.controls["k_tiles"].max == P.MAX_K_TILES


@pytest.mark.parametrize("kwargs, message", [  # checked before ipywidgets loads
    ({"stages": 9}, "pipeline_explorer: stages=9 must be an int from 1 to 8; the slider goes from 1 to 8"),
    ({"k_tiles": 65}, "k_tiles=65 must be an int from 1 to 64"),
    ({"load_latency": -1}, "load_latency=-1 must be an int from 0 to 4000"),
    ({"mma_time": 0}, "mma_time=0 must be an int from 10 to 1000"),
    ({"load_gap": 2.5}, "load_gap=2.5 must be an int from 0 to 1000"),
    ({"issue": "wgmma"}, "issue='wgmma' is not one of ('cp.async', 'tma')"),
    ({"measured": {3: 0}}, "pipeline_explorer: measured={3: 0} must map stage counts"),
])
def test_bad_explorer_arguments_raise_naming_the_argument_and_the_fix(kwargs, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        P.pipeline_explorer(**kwargs)
