"""`make test-gpu` runs on the GPU host as it is: torch, numpy, pytest and the DSL, but no jupyter, no ipywidgets (and
here no matplotlib either). Collecting the GPU suite with those hidden must not fail, so a test module that imports
one of them at module level cannot stop `pytest -m gpu` again."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).parents[2]
#: What the GPU host lacks (top-level module names).
HIDDEN = ("ipywidgets", "matplotlib", "IPython", "ipykernel", "jupyter", "jupyter_core", "jupyter_client",
          "jupyterlab", "notebook", "nbformat", "nbclient", "nbval", "jupytext", "playwright")

#: Runs pytest with the HIDDEN modules unfindable, as if they were not installed: every finder on sys.meta_path
#: answers None for them (so ``import`` raises ModuleNotFoundError and ``importlib.util.find_spec`` gives None).
_WITHOUT = r"""
import sys
hidden = set(sys.argv[1].split(","))

class Hiding:
    def __init__(self, finder):
        self.finder = finder

    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in hidden or not hasattr(self.finder, "find_spec"):
            return None
        return self.finder.find_spec(name, path, target)

    def __getattr__(self, attribute):
        return getattr(self.finder, attribute)

sys.meta_path[:] = [Hiding(finder) for finder in sys.meta_path]
import pytest
sys.exit(pytest.main(sys.argv[2:]))
"""


def collect_gpu_suite(*extra: str) -> subprocess.CompletedProcess:
    """`pytest -m gpu --collect-only` (what `make test-gpu` collects) in a fresh process without the HIDDEN
    modules, outside CI (the GPU host is not CI: there a missing tool skips its tests)."""
    env = {k: v for k, v in os.environ.items() if k != "CI"}
    # nbval registers itself as a pytest plugin; where it is not installed there is nothing to disable.
    command = [sys.executable, "-c", _WITHOUT, ",".join(HIDDEN), "-m", "gpu", "--collect-only", "-q",
               "-p", "no:cacheprovider", "-p", "no:nbval", *extra]
    return subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)


def test_the_gpu_suite_collects_without_jupyter_ipywidgets_or_matplotlib():
    run = collect_gpu_suite()
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    collected = [line for line in run.stdout.splitlines() if line.startswith("tests/gpu/")]
    assert any(line.startswith("tests/gpu/test_gemm_gpu.py::") for line in collected), run.stdout[-3000:]
    assert "error" not in run.stdout.lower().split("collected")[-1], run.stdout[-3000:]


def test_a_module_that_imports_ipywidgets_at_the_top_breaks_that_collection(tmp_path):
    """The check above can fail: a test module like the old test_viz_widgets stops the collection."""
    broken = tmp_path / "test_needs_widgets.py"
    broken.write_text("import ipywidgets\n\n\ndef test_nothing():\n    pass\n")
    run = collect_gpu_suite(str(broken), "tests/gpu")
    assert run.returncode != 0 and "No module named 'ipywidgets'" in run.stdout + run.stderr
