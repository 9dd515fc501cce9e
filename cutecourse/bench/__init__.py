"""Timing on the GPU: CUDA events, warm-up, medians, and launches back to back.

Every GPU figure of the course comes through :func:`median_ms`, and every benchmark times its baseline (torch's
device copy, ``torch.matmul``) with it in the same run, so ratios compare like with like.
"""

from __future__ import annotations

import shutil
import statistics
import subprocess
import threading
import time
from typing import Callable


def median_ms(fn: Callable[[int], object], reps: int = 30, batch: int = 10, warmup: int = 3) -> float:
    """Median milliseconds per launch of ``fn(i)``, timed over `batch` back-to-back launches per repetition.

    ``fn`` gets 0, 1, 0, 1, ... so it can alternate two buffer sets (pass sets larger than L2 to keep it out of the
    measurement). Back-to-back launches let a launcher's host work overlap the kernels before it: timing one launch
    alone measures the host as well (seen: a 127 µs transpose timed as 190 µs behind a 61 µs launcher). Each repetition
    first queues one untimed launch, so the GPU is busy while the timed ones are queued and the first timed launch
    does not wait for the host: without it the events also timed one launch's host work and an idle GPU (torch.matmul
    at 4096³ measured 0.2169 ms so and 0.2085 ms primed, with a spread of 5% against 1.5%).
    """
    import torch

    for i in range(warmup):
        fn(i % 2)
    times = []
    for _ in range(reps):
        fn(0)
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for i in range(batch):
            fn(i % 2)
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / batch)
    return statistics.median(times)


class Clocks:
    """The SM clock and board power while kernels run, read by ``nvidia-smi`` in a background thread.

    Random-data GEMMs on an H100/H200 hit the 700 W power limit, and the GPU then lowers its clock: two kernels that
    take the same cycles can differ in time by how much power each draws. ``clocks.during(t0, t1)`` gives the median
    (MHz, W) of the readings between two ``time.monotonic()`` stamps, or None where ``nvidia-smi`` is missing or
    took no reading then (a reading comes every `period_ms`, so a window needs to be a few of those long)::

        with Clocks() as clocks:
            t0 = time.monotonic(); run(); torch.cuda.synchronize()
            print(clocks.during(t0, time.monotonic()))
    """

    QUERY = ["--query-gpu=clocks.sm,power.draw", "--format=csv,noheader,nounits"]

    def __init__(self, period_ms: int = 50, command: list[str] | None = None) -> None:
        self.readings: list[tuple[float, float, float]] = []  # (monotonic time, MHz, W)
        if command is None:
            smi = shutil.which("nvidia-smi")
            command = [smi, *self.QUERY, f"--loop-ms={period_ms}"] if smi else None
        self.process = (subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
                        if command else None)
        if self.process:
            threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in self.process.stdout:
            try:
                mhz, watts = (float(x) for x in line.split(",")[:2])
            except ValueError:  # "[N/A]" or a header: no reading
                continue
            self.readings.append((time.monotonic(), mhz, watts))

    def during(self, t0: float, t1: float) -> tuple[float, float] | None:
        inside = [(mhz, watts) for t, mhz, watts in self.readings if t0 <= t <= t1]
        if not inside:
            return None
        return statistics.median(r[0] for r in inside), statistics.median(r[1] for r in inside)

    def close(self) -> None:
        if self.process:
            self.process.terminate()
            self.process.wait()

    def __enter__(self) -> "Clocks":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
