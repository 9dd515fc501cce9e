"""cutecourse.tune and `cutecourse bench gemm` on the GPU: a small search stores its pick, which cutecourse.gemm then
runs (and says so); the profiler times our steps, the dispatcher's pick and torch.matmul and writes CSV; under Nsight
Compute it prints each kernel's key metrics. The winners races of the fused epilogue and of fp8 (sm_90) time their
own baselines and store under their own keys."""

import csv
import shutil

import pytest

torch = pytest.importorskip("torch")

import cutecourse  # noqa: E402
from cutecourse import bench, cli, dispatch, tuning  # noqa: E402
from cutecourse.kernels.gemm import tolerances  # noqa: E402

pytestmark = pytest.mark.gpu(80)


@pytest.fixture(autouse=True)
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("CUTECOURSE_CACHE", str(tmp_path))
    dispatch.forget_plans()
    yield tmp_path / "tune.json"
    dispatch.forget_plans()


def test_a_tuned_pick_is_stored_and_the_dispatcher_runs_it():
    major, minor = torch.cuda.get_device_capability()
    step = "gemm11_pingpong" if major * 10 + minor == 90 else "gemm05_swizzle"
    space = {"group_m": (4, 8), "epi_n": (32, 64)} if step == "gemm11_pingpong" else {"raster": (1, 8)}
    lines = []
    tuned = tuning.tune((1024, 1536, 512), "bfloat16", step=step, space=space, rounds=1, settle_ms=20,
                        say=lines.append)
    assert tuned.step == step and tuned.ms > 0 and tuned.baseline_ms > 0
    assert tuned.best in dict(tuned.timed) and dict(tuned.timed)[tuned.best] == tuned.ms
    assert sum(line.startswith(f"{step}(") for line in lines) >= len(tuned.timed)  # each one checked first
    assert str(tuned).startswith(f"{step}: {len(tuned.timed)} configs tried")
    a = torch.randn(1024, 512, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(1536, 512, device="cuda", dtype=torch.bfloat16).t()
    out = torch.full((1024, 1536), float("nan"), device="cuda", dtype=torch.bfloat16)
    choice = cutecourse.gemm.explain(a, b, out)
    assert choice.tuned and choice.step == step and choice.config == tuned.best, choice
    assert "tuned on this GPU" in str(choice)
    cutecourse.gemm(a, b, out)
    assert tolerances.within_bounds(out, a, b) is None


def test_the_profiler_times_steps_the_dispatcher_and_torch_and_writes_csv(tmp_path, capsys):
    path = tmp_path / "bench.csv"
    argv = ["bench", "gemm", "--m", "1024", "--n", "1024", "--k", "1024", "--kernels", "torch", "dispatch", "2",
            "--rounds", "1", "--settle-ms", "20", "--data", "integers", "--csv", str(path)]
    assert cli.main(argv) == 0
    rows = list(csv.DictReader(path.open()))
    assert [r["kernel"] for r in rows] == ["torch.matmul", "cutecourse.gemm", "gemm02_smem"]
    assert all(r["data"] == "integers" and float(r["ms"]) > 0 for r in rows)
    assert "| bfloat16 | integers | 1024×1024×1024 | cutecourse.gemm |" in capsys.readouterr().out


def test_under_nsight_compute_it_prints_each_kernels_metrics(capsys):
    if shutil.which("ncu") is None:
        pytest.skip("not run: ncu (Nsight Compute) is not installed here")
    argv = ["bench", "gemm", "--m", "2048", "--n", "2048", "--k", "2048", "--kernels", "torch", "dispatch",
            "11:splits=2", "--ncu"]
    code = cli.main(argv)
    out, err = capsys.readouterr()
    assert code == 0, err
    print(out)  # the profile, for the record
    table = [line.split(" | ") for line in out.splitlines() if line.startswith("| ")]
    assert table[0][:3] == ["| kernel", "ncu kernel", "duration (µs)"], out
    # every kernel is named by its launch, split-K's reduction too: the launch of two kernels has two rows
    launches = [row[0] for row in table[1:]]
    assert launches[:2] == ["| torch.matmul", "| cutecourse.gemm"], out
    assert launches[2:] == ["| gemm11_pingpong(splits=2)"] * 2, out
    # ncu's durations are read in µs whichever unit it printed: torch.matmul's agrees with CUDA events in this
    # process within 10× (a unit misread would be 1000× off).
    a, b, c = bench.operands(2048, 2048, 2048, "bfloat16")
    events_us = 1e3 * bench.median_ms(lambda i: torch.matmul(a, b, out=c))
    assert 0.1 < float(table[1][2]) / events_us < 10, (table[1], events_us)


@pytest.mark.gpu(90)
def test_the_fused_and_fp8_races_time_their_baselines_and_store_under_their_own_keys(tmp_path, monkeypatch):
    """A race of the fused epilogue times bias + GELU against cuBLASLt's, fp8's against torch._scaled_mm (fp8 with
    the k-tile of 128), each judged against float64 torch; each stores under its own key, which a fused (or fp8)
    call then runs, and the plain key stays empty."""
    from cutecourse.kernels.gemm import winners

    monkeypatch.setattr(winners, "TABLE", tmp_path / "winners.json")
    monkeypatch.setattr(winners, "EPILOGUE_CANDIDATES", (("gemm10_multicast", {}), ("gemm11_pingpong", {})))
    shape = (256, 512, 320)  # K = 320: a partial k-tile of 128 in fp8
    for dtype, fused, baseline in (("bfloat16", True, "cuBLASLt fused"), ("float8_e4m3fn", False, "torch._scaled_mm")):
        lines = []
        found = tuning.measure_winners([shape], dtype, fused=fused, rounds=1, settle_ms=5, say=lines.append)
        entry = found[winners.shape_class(*shape)]
        assert entry["raced"] == 2 and entry["step"] in ("gemm10_multicast", "gemm11_pingpong"), (entry, lines)
        assert entry["config"]["tile_k"] == (128 if dtype == "float8_e4m3fn" else 64)
        assert any(line.endswith(f"x {baseline}") for line in lines), lines
        assert winners.lookup("sm_90", winners.key(dtype, fused), *shape) == entry
    assert winners.lookup("sm_90", "bfloat16", *shape) is None
    a = torch.randn(shape[0], shape[2], device="cuda", dtype=torch.bfloat16)
    b = torch.randn(shape[1], shape[2], device="cuda", dtype=torch.bfloat16).t()
    out = torch.empty(shape[0], shape[1], device="cuda", dtype=torch.bfloat16)
    choice = cutecourse.gemm.explain(a, b, out, fused=True)
    assert "ran fastest with bias + GELU fused of 2 configs" in str(choice), choice
