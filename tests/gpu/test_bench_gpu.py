"""cutecourse.bench.median_ms on the GPU: it times the kernels, not the host work that launches them."""

from __future__ import annotations

import time

import pytest

from cutecourse.bench import median_ms

pytestmark = pytest.mark.gpu(80)


def test_host_work_before_each_launch_stays_out_of_the_time():
    import torch

    def kernel(_: int) -> None:
        torch.cuda._sleep(1_000_000)  # about 0.5-0.7 ms of GPU time

    gpu_only = median_ms(kernel, reps=5, batch=3)

    def slow_launcher(i: int) -> None:  # host work of 40% of the kernel before each launch
        start = time.perf_counter()
        while time.perf_counter() - start < 0.4 * gpu_only / 1e3:
            pass
        kernel(i)

    # Without the untimed launch that each repetition queues first, the events would also time the host work of
    # the first launch while the GPU idles: (0.4 + 3) / 3 = 1.13 × the kernel.
    assert median_ms(slow_launcher, reps=5, batch=3) == pytest.approx(gpu_only, rel=0.04)
