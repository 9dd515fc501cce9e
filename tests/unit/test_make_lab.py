"""`make lab` serves JupyterLab at the course's root (lessons, exercises and solutions reachable), its notebooks
trusted, without its news prompt: /lab answers HTTP 200, then the server is stopped."""

import json
import os
import re
import signal
import socket
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow
def test_make_lab_serves_jupyterlab(tmp_path):
    port = free_port()
    log = tmp_path / "lab.log"
    # Jupyter's data folder (where trusted notebooks' signatures live) of this test's own.
    env = dict(os.environ, JUPYTER_DATA_DIR=str(tmp_path / "jupyter-data"))
    with log.open("w") as sink:
        server = subprocess.Popen(["make", "lab", f"LAB_ARGS=--no-browser --port {port} --ServerApp.ip=127.0.0.1"],
                                  cwd=ROOT, stdout=sink, stderr=subprocess.STDOUT, start_new_session=True, env=env)
    try:
        token, deadline = None, time.monotonic() + 90
        while token is None and time.monotonic() < deadline:
            assert server.poll() is None, log.read_text()
            found = re.search(rf"http://127\.0\.0\.1:{port}/lab\?token=(\w+)", log.read_text())
            token = found and found.group(1)
            time.sleep(0.5)
        assert token, "JupyterLab never printed its URL:\n" + log.read_text()
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/lab?token={token}", timeout=30) as page:
            assert page.status == 200
            html = page.read().decode()
        assert "JupyterLab" in html
        # No news prompt over the first outputs: the page config turns JupyterLab's announcements off.
        config = json.loads(re.search(r'<script id="jupyter-config-data" type="application/json">(.*?)</script>',
                                      html, re.DOTALL).group(1))
        assert config["news"] == {"disabled": True}, config.get("news")
        # ... and the "fetch news?" notification is answered by the environment's overrides.
        url = f"http://127.0.0.1:{port}/lab/api/settings/@jupyterlab/apputils-extension:notification?token={token}"
        with urllib.request.urlopen(url, timeout=30) as page:
            assert json.load(page)["schema"]["properties"]["fetchNews"]["default"] == "false"
        # The server's root is the course's: the lessons, the exercises and the solutions are all there.
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/contents?token={token}", timeout=30) as page:
            names = {item["name"] for item in json.load(page)["content"]}
        assert {"notebooks", "exercises", "solutions"} <= names, names
        # ... and its notebooks are trusted: the server marks every code cell so (their pictures show at once).
        for path in ("notebooks/06_smem_pipelines.ipynb", "exercises/07_epilogue.ipynb"):
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/contents/{path}?token={token}",
                                        timeout=30) as page:
                cells = [c for c in json.load(page)["content"]["cells"] if c["cell_type"] == "code"]
            assert cells and all(c["metadata"].get("trusted") is True for c in cells), path
    finally:
        stop(server)


def stop(server: subprocess.Popen) -> None:
    """End the server's process group; one that already exited (set-up failed) is no error, so the test's own
    failure, with the log, is what the learner sees."""
    for sig, wait in ((signal.SIGTERM, 20), (signal.SIGKILL, None)):
        try:
            os.killpg(server.pid, sig)
        except ProcessLookupError:
            break
        try:
            server.wait(timeout=wait)
            break
        except subprocess.TimeoutExpired:
            continue
    server.wait()
