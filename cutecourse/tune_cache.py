"""The tuner's picks, stored: `cutecourse.tune` stores the fastest right Config it found (`store`) and
`cutecourse.gemm` runs it (`lookup`), for that problem on that GPU.

The cache is a JSON file (`cache_file()`: ``$CUTECOURSE_CACHE/tune.json``, by default
``~/.cache/cutecourse/tune.json``), keyed by the GPU, its driver, the DSL version and the problem (dtypes, M, N, K,
majors: `problem_key`). Importing it loads nothing heavy; torch is imported on call.
"""

from __future__ import annotations

import importlib
import json
import os
import shutil
import subprocess
import warnings
from pathlib import Path
from typing import Any

from cutecourse.kernels.gemm import KERNELS


def cache_file() -> Path:
    """Where tuned picks are stored: ``$CUTECOURSE_CACHE/tune.json``, else ``~/.cache/cutecourse/tune.json``."""
    root = os.environ.get("CUTECOURSE_CACHE") or Path.home() / ".cache" / "cutecourse"
    return Path(root) / "tune.json"


_driver: dict[int, str] = {}


def gpu_identity(device: Any) -> str:
    """The GPU, its driver and the DSL version, as the cache keys them ("NVIDIA H200|580.159.04|4.8.1")."""
    import importlib.metadata

    import torch

    index = torch.device(device).index or 0
    if index not in _driver:
        smi = shutil.which("nvidia-smi")
        version = ""
        if smi:
            done = subprocess.run([smi, "--query-gpu=driver_version", "--format=csv,noheader", f"--id={index}"],
                                  capture_output=True, text=True, timeout=30)
            version = done.stdout.strip() if done.returncode == 0 else ""
        _driver[index] = version or f"cuda-driver-api-{torch._C._cuda_getDriverVersion()}"
    return "|".join((torch.cuda.get_device_name(index), _driver[index],
                     importlib.metadata.version("nvidia-cutlass-dsl")))


def problem_key(identity: str, a: Any, b: Any, out: Any) -> str:
    """The cache key of ``out = a @ b`` on the GPU `identity`: dtypes, M×N×K and the majors."""
    from cutecourse.kernels.gemm import operands

    ops = operands.traits(a, b, out, step="cutecourse.tune", vector=False,
                             fp8=a.dtype.is_floating_point and a.element_size() == 1)
    (m, k), n = a.shape, b.shape[1]
    return f"{identity}|{ops.ab}->{ops.c}|{m}x{n}x{k}|{ops.a_major}{ops.b_major}"


def _load() -> dict[str, Any]:
    path = cache_file()
    if not path.exists():
        return {}
    try:
        entries = json.loads(path.read_text())
        if not isinstance(entries, dict):
            raise ValueError("not a JSON object")
        return entries
    except (OSError, ValueError) as exc:
        warnings.warn(f"the tuning cache {path} is unreadable ({exc}); it is ignored. Delete it (rm {path}) and "
                      "tune again", stacklevel=3)
        return {}


def lookup(a: Any, b: Any, out: Any) -> dict[str, Any] | None:
    """The stored pick for ``out = a @ b`` on a's GPU: {"step", "config" (its fields), "ms", "ratio"}, or None."""
    entry = _load().get(problem_key(gpu_identity(a.device), a, b, out))
    if not isinstance(entry, dict) or entry.get("step") not in KERNELS:
        return None
    config_type = importlib.import_module(f"cutecourse.kernels.gemm.{entry['step']}").Config
    try:
        config_type(**entry["config"])
    except (TypeError, ValueError):  # stored by another version of the step: not this step's Config any more
        return None
    return entry


def store(key: str, entry: dict[str, Any]) -> None:
    """Store `entry` for `key`. A new tune of the same step replaces the old pick (the kernel, the clocks or the data
    may have changed since); a pick of another step stays if it was further ahead of torch.matmul, each ratio taken
    against torch.matmul in its own rounds (times from different runs do not compare)."""
    entries = _load()
    old = entries.get(key)
    if (isinstance(old, dict) and old.get("step") != entry["step"]
            and old.get("ratio", 0.0) >= entry["ratio"]):
        return
    entries[key] = entry
    path = cache_file()
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_suffix(".tmp")
    temporary.write_text(json.dumps(entries, indent=1, sort_keys=True) + "\n")
    temporary.replace(path)  # atomic: a reader never sees half a file
