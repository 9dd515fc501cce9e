"""In a real JupyterLab in headless Chromium: a stored lesson, opened as `make lab` opens it and never run, shows its
pictures at once (SVG and the HTML pictures of cutecourse.viz), because the set-up trusted it; an untrusted copy of
the same notebook shows them as text, which is what a learner saw before.

Needs Debian's Chromium, as test_explorer_browser.py does (skipped without it, except in CI).
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import sys
from pathlib import Path

import pytest

from .test_explorer_browser import CHROMIUM, FLAGS, free_port, screenshot_dir, start_lab, stop, wait_for_server

pytestmark = pytest.mark.browser

ROOT = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("course_setup", ROOT / "tools" / "course.py")
course = importlib.util.module_from_spec(spec)
spec.loader.exec_module(course)
LESSONS = ("06_smem_pipelines", "08_dispatch_profiling")
#: The output areas of the notebook on show (other tabs are hidden).
OUTPUTS = "[...document.querySelectorAll('.jp-NotebookPanel:not(.lm-mod-hidden) .jp-OutputArea-output')]"
#: Each output area that draws a picture: an SVG (an <img> of it) or an HTML picture (an inline <svg>).
PICTURES = f"""() => {OUTPUTS}.filter(e => e.querySelector('svg, img[src^="data:image/svg+xml"]')).length"""
#: Each output area that shows an IPython SVG as its text instead.
AS_TEXT = f"""() => {OUTPUTS}.filter(e => e.textContent.includes('<IPython.core.display.SVG object>')).length"""


def stored_pictures(notebook: Path) -> tuple[int, int]:
    """How many stored outputs are pictures, and how many of those are IPython SVGs (text: their repr)."""
    outputs = [o.get("data", {}) for c in json.loads(notebook.read_text())["cells"] for o in c.get("outputs", [])]
    pictures = [d for d in outputs if "image/svg+xml" in d]
    return len(pictures), sum("<IPython.core.display.SVG object>" in "".join(d["text/plain"]) for d in pictures)


@pytest.fixture
def course_lab(tmp_path, sync_api, monkeypatch):
    """A JupyterLab on a course root whose lessons `make lab` trusted, and an untrusted copy of the last lesson."""
    root, home = tmp_path / "root", tmp_path / "home"
    home.mkdir()
    for lesson in LESSONS:
        (root / "notebooks").mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / "notebooks" / f"{lesson}.ipynb", root / "notebooks")
    monkeypatch.setenv("JUPYTER_DATA_DIR", str(home / "data"))  # the server's (start_lab sets the same)
    assert course.trust(sys.executable, root) == 0
    # Trust goes by content: the copy differs in one metadata field, so that its signature is not the trusted one.
    notebook = json.loads((ROOT / "notebooks" / f"{LESSONS[-1]}.ipynb").read_text())
    notebook["metadata"]["copied"] = True
    (root / "untrusted").mkdir()
    (root / "untrusted" / f"{LESSONS[-1]}.ipynb").write_text(json.dumps(notebook))
    port, token = free_port(), os.urandom(12).hex()
    proc = start_lab(root, home, port, token)
    try:
        wait_for_server(proc, port, token, home)
        yield f"http://127.0.0.1:{port}/lab/tree/{{}}?token={token}"
    finally:
        stop(proc)


def test_a_stored_lesson_shows_its_pictures_when_first_opened(sync_api, course_lab, tmp_path):
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch_persistent_context(str(tmp_path / "chromium-profile"), executable_path=CHROMIUM,
                                                       args=FLAGS, viewport={"width": 1400, "height": 900})
        page = browser.new_page()
        page.set_default_timeout(120_000)  # a loaded 2-core machine starts JupyterLab slowly
        try:
            for lesson in LESSONS:
                pictures, _ = stored_pictures(ROOT / "notebooks" / f"{lesson}.ipynb")
                assert pictures, f"{lesson} stores no picture: choose another lesson for this test"
                page.goto(course_lab.format(f"notebooks/{lesson}.ipynb"))
                page.wait_for_function(f"({PICTURES})() >= {pictures}")
                assert page.evaluate(PICTURES) == pictures and page.evaluate(AS_TEXT) == 0, lesson
                assert page.locator(".jp-InputPrompt:has-text('[*]')").count() == 0  # nothing ran
            # The same notebook untrusted: its SVGs are text, as a fresh clone showed them before set-up trusted it.
            pictures, as_text = stored_pictures(ROOT / "notebooks" / f"{LESSONS[-1]}.ipynb")
            page.goto(course_lab.format(f"untrusted/{LESSONS[-1]}.ipynb"))
            page.wait_for_function(f"({AS_TEXT})() >= {as_text}")
            assert as_text == pictures and page.evaluate(PICTURES) == 0
        except Exception as e:
            shot = screenshot_dir(tmp_path) / "first_open_failure.png"
            page.screenshot(path=str(shot), full_page=True)
            raise AssertionError(f"{e}\nscreenshot: {shot}") from e
        finally:
            browser.close()
