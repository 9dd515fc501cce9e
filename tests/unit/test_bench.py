"""cutecourse.bench on a CPU (the clock sampler's parsing and windows; median_ms itself needs a GPU: tests/gpu), and the
variant specs of benchmarks/gemm.py, which times through it."""

from __future__ import annotations

import sys
import time

from cutecourse import bench

from . import benchmarks


def test_clocks_take_the_median_reading_inside_the_window_and_skip_unreadable_lines():
    lines = ["1500, 690.50", "[N/A], [N/A]", "1400, 700.00", "1900, 650.00"]  # medians, not means
    command = [sys.executable, "-c", f"print({chr(10).join(lines)!r}, flush=True)"]
    t0 = time.monotonic()
    with bench.Clocks(command=command) as clocks:
        clocks.process.wait()
        deadline = time.monotonic() + 10
        while len(clocks.readings) < 3 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert clocks.during(t0, time.monotonic()) == (1500.0, 690.5)
        assert clocks.during(t0 - 10, t0 - 5) is None  # no reading in that window


def test_clocks_without_nvidia_smi_read_nothing(monkeypatch):
    monkeypatch.setattr("shutil.which", lambda name: None)
    with bench.Clocks() as clocks:
        assert clocks.process is None
        assert clocks.during(0, time.monotonic()) is None


def test_the_gemm_benchmark_names_a_malformed_variant_and_the_form_it_wants():
    import pytest

    pytest.importorskip("cutlass")
    pytest.importorskip("torch")  # the kernels it lists import torch; the DSL alone (3.10, no torch) is not enough
    gemm = benchmarks.load("gemm", "gemm_benchmark")
    for bad in ("11:stages=3", "9:epi_n", "stages=3"):
        with pytest.raises(SystemExit, match=f"--variants '{bad}': write STEP:FIELD=VALUE"):
            gemm.kernels_to_time([], [bad])
    assert list(gemm.kernels_to_time([9], ["9:epi_n=64,stages=3"])) == [
        "gemm09_multicast", "gemm09_multicast(epi_n=64,stages=3)"]


def test_the_benchmarks_summary_takes_medians_and_the_ratio_to_the_baseline_of_the_same_rounds():
    gemm = benchmarks.load("gemm", "gemm_benchmark_summary")
    times = {"torch.matmul": [2.0, 1.0, 3.0], "ours": [1.0, 4.0, 0.5]}  # medians 2 ms and 1 ms
    power = {"torch.matmul": [(1500.0, 690.0), (1400.0, 680.0), (1600.0, 700.0)], "ours": []}
    got = gemm.summary(times, power, flops=2e9)
    assert got["ours"] == dict(ms=1.0, tflops=2.0, ratio=2.0, sm_mhz=None, watts=None)
    assert got["torch.matmul"] == dict(ms=2.0, tflops=1.0, ratio=1.0, sm_mhz=1500.0, watts=690.0)


def test_the_benchmarks_write_their_rows_as_csv_with_the_first_rows_keys(tmp_path):
    gemm = benchmarks.load("gemm", "gemm_benchmark_csv")
    path = tmp_path / "run.csv"
    gemm.write_csv([{"kernel": "ours", "ms": "0.21"}, {"kernel": "torch.matmul", "ms": "0.2"}], str(path))
    assert path.read_text().splitlines() == ["kernel,ms", "ours,0.21", "torch.matmul,0.2"]
