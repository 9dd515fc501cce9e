"""The scripts of benchmarks/ as modules, for the tests that check their wiring on the CPU."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

BENCHMARKS = Path(__file__).parents[2] / "benchmarks"


def load(script: str, name: str | None = None) -> ModuleType:
    """benchmarks/`script`.py as a fresh module called `name`; benchmarks/ is on sys.path meanwhile, so that it
    imports benchmarks/gemm.py as `gemm`, as when it runs."""
    sys.path.insert(0, str(BENCHMARKS))
    try:
        spec = importlib.util.spec_from_file_location(name or f"{script}_benchmark", BENCHMARKS / f"{script}.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(BENCHMARKS))
    return module
