"""Skip markers for what the GPU test host lacks (`make test-gpu` runs there without Jupyter's packages); in CI a
missing one is an error of the set-up, not a skip."""

from __future__ import annotations

import os

import pytest

try:
    import ipywidgets  # noqa: F401
    WIDGETS = None
except ModuleNotFoundError as missing:
    if os.environ.get("CI"):
        raise
    WIDGETS = f"{missing.name} is not installed here; install the course's dependencies: pip install -e ."

#: For a test of an explorer's widgets (its tables and pictures need no ipywidgets).
widgets = pytest.mark.skipif(WIDGETS is not None, reason=WIDGETS or "")
