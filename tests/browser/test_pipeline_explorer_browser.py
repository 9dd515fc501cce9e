"""The pipeline explorer in a real JupyterLab in headless Chromium at 1280 and 1400 px: its controls at their full
width (slider tracks long enough to drag, the menu not clipped), the timeline and the readout whole (no scrolling,
nothing outside its box), and moving the stages slider redraws the timeline for the new stage count, with the
real kernel's measured speed at that count in the readout.

Needs what tests/browser/test_explorer_browser.py needs (Debian's Chromium and playwright; skipped without them,
except in CI). Screenshots of the explorer at 1400 px go into CUTECOURSE_SCREENSHOTS when it names a folder, else
pytest's tmp dir, and so does one of any failure.
"""

from __future__ import annotations

import json

import pytest

from cutecourse.hw.pipeline import simulate

from .test_explorer_browser import CHROMIUM, FLAGS, MIN_TRACK_PX, outside, run_all_cells, screenshot_dir, serving

pytestmark = pytest.mark.browser

EXPLORER = ".cc-pipeline-explorer"
PICTURE = f"{EXPLORER} .cc-picture"
WIDTHS = (1280, 1400)  # screenshots at 1400
CONTROL_PX = (320,) * 6  # the widths pipeline_explorer gives its menu and its five sliders
LABEL = "H200, gemm05 fp16 4096³"
MEASURED = {3: 480.0, 4: 560.0}
NOTEBOOK = {"cells": [{"cell_type": "code", "execution_count": None, "id": "p0a1", "metadata": {}, "outputs": [],
                       "source": ["from cutecourse.viz.pipeline import pipeline_explorer\n",
                                  f"pipeline_explorer(stages=3, measured={MEASURED!r}, measured_label={LABEL!r})"]}],
            "metadata": {"kernelspec": {"display_name": "Python 3 (ipykernel)", "language": "python",
                                        "name": "python3"}, "language_info": {"name": "python"}},
            "nbformat": 4, "nbformat_minor": 5}


@pytest.fixture
def lab(tmp_path, sync_api):
    notebook = tmp_path / "pipeline.ipynb"
    notebook.write_text(json.dumps(NOTEBOOK))
    with serving(tmp_path, notebook) as url:
        yield url


#: The controls' widths, the slider tracks, whether the menu or the picture needs scrolling, and what must lie inside
#: its box: the controls, the readout's text, the timeline (its last tick and its note too).
MEASURE = """([explorer, picture]) => {
  const box = (e) => { const r = e.getBoundingClientRect(); return [r.left, r.top, r.right, r.bottom]; };
  const text = (e) => { const range = document.createRange(); range.selectNodeContents(e); return box(range); };
  const E = document.querySelector(explorer), P = document.querySelector(picture);
  const svg = P.querySelector('svg'), select = E.querySelector('.widget-dropdown select');
  const controls = [...E.querySelector('.cc-controls').children];
  return {
    widths: controls.map(c => c.getBoundingClientRect().width),
    tracks: [...E.querySelectorAll('.widget-hslider .slider-container')].map(e => e.getBoundingClientRect().width),
    clipped: select.scrollWidth > select.clientWidth + 1,
    scrolls: P.scrollWidth > P.clientWidth + 1 || P.scrollHeight > P.clientHeight + 1,
    inside: [
      ...controls.map((c, i) => ['control ' + i, box(c), box(E)]),
      ['readout text', text(E.querySelector('.cc-readout')), box(E.querySelector('.cc-readout'))],
      ['readout', box(E.querySelector('.cc-readout')), box(E)],
      ['timeline', box(svg), box(P)],
      ['picture', box(P), box(E)],
      ...[...svg.querySelectorAll('text.tick, text.note, text.title, text.legend')].map(t => [t.textContent, box(t),
                                                                                               box(svg)]),
    ],
  };
}"""

#: What the timeline shows: its stage count and efficiency, the k-tiles in its slot rows and the stalls of the math.
DRAWN = """(picture) => {
  const svg = document.querySelector(picture + ' svg'), g = svg.querySelector('g.pipeline');
  return {stages: g.dataset.stages, efficiency: g.dataset.efficiency,
          tiles: svg.querySelectorAll('g.tile').length, stalls: svg.querySelectorAll('g.wait:not(.fill)').length};
}"""


def drawn(stages: int) -> dict:
    """What DRAWN should find for the explorer's defaults at `stages` stages, from the model itself."""
    s = simulate(stages, 500, 200, 16)
    return {"stages": str(stages), "efficiency": f"{s.efficiency:.4f}", "tiles": 16,
            "stalls": sum(w > 0 for w in s.waits[1:])}


def readout(page) -> list[str]:
    return page.inner_text(f"{EXPLORER} .cc-readout").splitlines()


def assert_whole(page) -> None:
    got = page.evaluate(MEASURE, [EXPLORER, PICTURE])
    assert [round(w) for w in got["widths"]] == list(CONTROL_PX), got["widths"]  # none squeezed
    assert len(got["tracks"]) == 5 and min(got["tracks"]) >= MIN_TRACK_PX, got["tracks"]
    assert not got["clipped"] and not got["scrolls"], got
    cut = [what for what, inner, outer in got["inside"] if outside(inner, outer)]
    assert not cut, (cut, got["inside"])


def test_the_pipeline_explorer_redraws_for_the_stages_and_is_whole(sync_api, lab, tmp_path):
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch_persistent_context(str(tmp_path / "chromium-profile"), executable_path=CHROMIUM,
                                                       args=FLAGS, viewport={"width": WIDTHS[0], "height": 1000})
        page = browser.new_page()
        page.set_default_timeout(120_000)  # a loaded 2-core CI machine starts kernels slowly
        shots = screenshot_dir(tmp_path)
        try:
            run_all_cells(page, lab, (f"{PICTURE} svg",))
            assert page.evaluate(DRAWN, PICTURE) == drawn(3) and drawn(3)["stalls"] == 7
            assert readout(page)[2].startswith("Little's law: (stages - 1) × 200 ≥ 500 needs 4 stages; with 3, ")
            assert readout(page)[3].startswith(f"{LABEL}: 480 TFLOP/s at 3 stages")
            for width in WIDTHS:
                page.set_viewport_size({"width": width, "height": 1000})
                page.wait_for_timeout(500)  # JupyterLab lays the notebook out again
                assert_whole(page)

            before = page.inner_html(PICTURE)
            page.focus(f"{EXPLORER} .widget-hslider .noUi-handle")  # the first slider: the stages
            page.keyboard.press("ArrowRight")
            want = json.dumps(json.dumps(drawn(4), separators=(",", ":")))  # as JSON.stringify writes it, quoted
            page.wait_for_function(f"JSON.stringify(({DRAWN})({PICTURE!r})) === {want}", timeout=60_000)
            page.wait_for_function(f"document.querySelector('{EXPLORER} .cc-readout').innerText.includes("
                                   f"'with 4, the math never waits')", timeout=60_000)
            assert page.inner_html(PICTURE) != before and drawn(4)["stalls"] == 0
            assert readout(page)[3].startswith(f"{LABEL}: 560 TFLOP/s at 4 stages")
            assert_whole(page)
            page.locator(EXPLORER).screenshot(path=str(shots / "pipeline_explorer_1400.png"))

            page.keyboard.press("ArrowRight")
            page.wait_for_function(f"document.querySelector('{EXPLORER} .cc-readout').innerText.includes("
                                   f"'not measured at 5 stages')", timeout=60_000)
            # The readout and the timeline are two outputs, redrawn one after the other: wait for the timeline too (a
            # loaded machine showed the readout at 5 stages and the timeline still at 4).
            want = json.dumps(json.dumps(drawn(5), separators=(",", ":")))
            page.wait_for_function(f"JSON.stringify(({DRAWN})({PICTURE!r})) === {want}", timeout=60_000)
        except Exception as e:
            shot = shots / "pipeline_explorer_failure.png"
            page.screenshot(path=str(shot), full_page=True)
            raise AssertionError(f"{e}\nscreenshot: {shot}") from e
        finally:
            browser.close()
