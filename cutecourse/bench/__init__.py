"""Timing on the GPU: CUDA events, warm-up, medians, and launches back to back.

Every GPU figure of the course comes through :func:`median_ms`, and every benchmark times its baseline (torch's
device copy, ``torch.matmul``) with it in the same run, so ratios compare like with like.
"""

from __future__ import annotations

import statistics
from typing import Callable


def median_ms(fn: Callable[[int], object], reps: int = 30, batch: int = 10, warmup: int = 3) -> float:
    """Median milliseconds per launch of ``fn(i)``, timed over `batch` back-to-back launches per repetition.

    ``fn`` gets 0, 1, 0, 1, ... so it can alternate two buffer sets (pass sets larger than L2 to keep it out of the
    measurement). Back-to-back launches let a launcher's host work overlap the kernels before it: timing one launch
    alone measures the host as well (seen: a 127 µs transpose timed as 190 µs behind a 61 µs launcher).
    """
    import torch

    for i in range(warmup):
        fn(i % 2)
    times = []
    for _ in range(reps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for i in range(batch):
            fn(i % 2)
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / batch)
    return statistics.median(times)
