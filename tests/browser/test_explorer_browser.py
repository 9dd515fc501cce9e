"""In a real JupyterLab in headless Chromium, the layout explorer redraws when the learner types a new shape.

Needs Debian's Chromium (`apt-get install -y chromium`), driven by the `playwright` package (no browser download).
Without it the test is skipped, except in CI (env CI set), where it fails. Screenshots: on failure always, and on
success too when CUTECOURSE_SCREENSHOTS names a folder (the default folder is pytest's tmp dir).
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

pytestmark = pytest.mark.browser

HERE = Path(__file__).parent
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"]
EXPLORER = ".cc-layout-explorer"
SVG = f"{EXPLORER} .cc-picture svg"
INSTALL = "apt-get update && apt-get install -y --no-install-recommends chromium"


def require_chromium() -> None:
    if Path(CHROMIUM).exists():
        return
    if os.environ.get("CI"):
        pytest.fail(f"CI must run the browser test, but there is no Chromium at {CHROMIUM}; .ci/run runs: {INSTALL}")
    pytest.skip(f"no Chromium at {CHROMIUM}; install it with: {INSTALL}")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_lab(root: Path, home: Path, port: int, token: str) -> subprocess.Popen:
    env = dict(os.environ, JUPYTER_CONFIG_DIR=str(home / "config"), JUPYTER_RUNTIME_DIR=str(home / "runtime"),
               JUPYTERLAB_SETTINGS_DIR=str(home / "settings"), JUPYTERLAB_WORKSPACES_DIR=str(home / "workspaces"),
               IPYTHONDIR=str(home / "ipython"))
    cmd = [sys.executable, "-m", "jupyter", "lab", "--no-browser", f"--port={port}", "--ServerApp.port_retries=0",
           "--ServerApp.ip=127.0.0.1", f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={root}",
           "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate", "--LabApp.news_url="]
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        cmd.append("--allow-root")
    log = open(home / "lab.log", "wb")
    return subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)


def wait_for_server(proc: subprocess.Popen, port: int, token: str, home: Path, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"jupyter lab exited with {proc.returncode}:\n{(home / 'lab.log').read_text()[-2000:]}")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/status?token={token}", timeout=2):
                return
        except OSError:
            time.sleep(0.3)
    raise AssertionError(f"jupyter lab did not answer within {timeout}s:\n{(home / 'lab.log').read_text()[-2000:]}")


def stop(proc: subprocess.Popen) -> None:
    if proc.poll() is not None:
        return
    os.killpg(proc.pid, signal.SIGTERM)  # its own session: the kernels it started go too
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)


@pytest.fixture
def sync_api():
    """Playwright and a Chromium to drive, or the test skips, before any JupyterLab starts."""
    require_chromium()
    return pytest.importorskip("playwright.sync_api")


@pytest.fixture
def lab(tmp_path, sync_api):
    root, home = tmp_path / "root", tmp_path / "home"
    root.mkdir()
    home.mkdir()
    shutil.copy(HERE / "demo_explorer.ipynb", root / "demo_explorer.ipynb")
    port, token = free_port(), os.urandom(12).hex()
    proc = start_lab(root, home, port, token)
    try:
        wait_for_server(proc, port, token, home)
        yield f"http://127.0.0.1:{port}/lab/tree/demo_explorer.ipynb?token={token}"
    finally:
        stop(proc)


def screenshot_dir(tmp_path: Path) -> Path:
    folder = Path(os.environ.get("CUTECOURSE_SCREENSHOTS") or tmp_path)
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def cell_count(page) -> int:
    return page.eval_on_selector(SVG, "svg => svg.querySelectorAll('g.cell').length")


def test_layout_explorer_redraws_when_the_shape_changes(sync_api, lab, tmp_path):
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch_persistent_context(str(tmp_path / "chromium-profile"), executable_path=CHROMIUM,
                                                       args=FLAGS, viewport={"width": 1400, "height": 900})
        page = browser.new_page()
        page.set_default_timeout(120_000)  # a loaded 2-core CI machine starts kernels slowly
        try:
            page.goto(lab)
            page.click(".jp-CodeCell .jp-InputArea-editor")
            page.keyboard.press("Shift+Enter")
            page.wait_for_selector(SVG)
            before = page.inner_html(f"{EXPLORER} .cc-picture")
            assert cell_count(page) == 32, "the explorer should first draw (4,8):(8,1), 32 cells"
            shape = page.locator(f"{EXPLORER} .cc-shape input")
            shape.fill("(2,3)")
            shape.press("Enter")
            page.wait_for_function(f"document.querySelector({SVG!r})?.querySelectorAll('g.cell').length === 6",
                                   timeout=60_000)
            after = page.inner_html(f"{EXPLORER} .cc-picture")
            assert after != before
            assert "(2,3):(8,1)" in page.text_content(f"{EXPLORER} .cc-picture .title")
        except Exception as e:
            shot = screenshot_dir(tmp_path) / "layout_explorer_failure.png"
            page.screenshot(path=str(shot), full_page=True)
            raise AssertionError(f"{e}\nscreenshot: {shot}") from e
        else:
            if os.environ.get("CUTECOURSE_SCREENSHOTS"):
                page.screenshot(path=str(screenshot_dir(tmp_path) / "layout_explorer.png"), full_page=True)
        finally:
            browser.close()


def test_without_chromium_it_skips_with_the_install_command_but_fails_in_ci(monkeypatch, tmp_path):
    monkeypatch.setitem(globals(), "CHROMIUM", str(tmp_path / "no-chromium"))
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception, match="apt-get install -y --no-install-recommends chromium"):
        require_chromium()
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="CI must run the browser test"):
        require_chromium()
