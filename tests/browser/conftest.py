"""The browser tests' fixture (playwright and a Chromium, or a skip), and the demo notebook here, which the browser
test opens and nbval does not run (it has no stored outputs)."""

import pytest

from .test_explorer_browser import require_chromium

collect_ignore_glob = ["*.ipynb"]


@pytest.fixture
def sync_api():
    """Playwright and a Chromium to drive, or the test skips, before any JupyterLab starts."""
    require_chromium()
    return pytest.importorskip("playwright.sync_api")
