"""cutecourse.bench on a CPU: the clock sampler's parsing and windows, the kernel specs, the summary and CSV of the
benchmarks and the profiler (median_ms and the runs themselves need a GPU: tests/gpu), ncu's command line and CSV,
`cutecourse bench gemm`'s refusals, and the benchmarks' --shapes."""

from __future__ import annotations

import argparse
import sys
import time

import pytest

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


def test_the_kernel_specs_name_a_malformed_variant_and_the_form_they_want():
    pytest.importorskip("cutlass")
    pytest.importorskip("torch")  # the kernels it lists import torch; the DSL alone (3.10, no torch) is not enough
    for bad in ("12:stages=3", "10:epi_n", "stages=3"):
        with pytest.raises(SystemExit, match=f"--variants '{bad}': write STEP:FIELD=VALUE"):
            bench.kernels_to_time([], [bad])
    assert list(bench.kernels_to_time([10], ["10:epi_n=64,stages=3"])) == [
        "gemm10_multicast", "gemm10_multicast(epi_n=64,stages=3)"]
    assert list(bench.kernels_to_time([], ["gemv", "gemv:warps=8"])) == ["gemv", "gemv(warps=8)"]
    (_, swapped), = bench.kernels_to_time([], ["11:swap_ab=True,tile_n=16,epi_n=16"]).values()
    assert swapped.swap_ab is True and swapped.tile_n == 16  # a bool field is written True or False
    with pytest.raises(SystemExit, match=r"--variants 11:swap_ab=yes: swap_ab='yes': True .* or False"):
        bench.kernels_to_time([], ["11:swap_ab=yes"])
    with pytest.raises(SystemExit, match=r"--variants gemv:warps=64: .*warps must be 1 to 32"):
        bench.kernels_to_time([], ["gemv:warps=64"])


def test_the_summary_takes_medians_and_the_ratio_to_the_baseline_of_the_same_rounds():
    times = {"torch.matmul": [2.0, 1.0, 3.0], "ours": [1.0, 4.0, 0.5]}  # medians 2 ms and 1 ms
    power = {"torch.matmul": [(1500.0, 690.0), (1400.0, 680.0), (1600.0, 700.0)], "ours": []}
    got = bench.summary(times, power, flops=2e9)
    assert got["ours"] == dict(ms=1.0, tflops=2.0, ratio=2.0, sm_mhz=None, watts=None)
    assert got["torch.matmul"] == dict(ms=2.0, tflops=1.0, ratio=1.0, sm_mhz=1500.0, watts=690.0)


def test_the_rows_are_written_as_csv_with_the_first_rows_keys_and_as_a_markdown_table(tmp_path):
    path = tmp_path / "run.csv"
    bench.write_csv([{"kernel": "ours", "ms": "0.21"}, {"kernel": "torch.matmul", "ms": "0.2"}], str(path))
    assert path.read_text().splitlines() == ["kernel,ms", "ours,0.21", "torch.matmul,0.2"]
    row = dict(dtype="bfloat16", data="integers", M=8, N=16, K=32, kernel="gemm10_multicast", ms="0.1", tflops="1.0",
               ratio="0.990", sm_mhz="1500", watts="690")
    assert bench.table([row]).splitlines()[2] == ("| bfloat16 | integers | 8×16×32 | gemm10_multicast | 0.1 | 1.0 | "
                                                  "0.990 | 1500 | 690 |")


def test_a_problem_is_three_positive_extents_and_a_bad_one_is_named_with_the_form():
    assert bench.problem("128x6144x4096") == (128, 6144, 4096)
    for text in ("4096x4096", "4096x0x4096", "1x2x3x4", "4096x4096xk", "-1x8x8", ""):
        with pytest.raises(argparse.ArgumentTypeError, match=f"{text!r}: write MxNxK with three positive integers"):
            bench.problem(text)


@pytest.mark.parametrize("script, flag", [("gemm", "--shapes"), ("tune", "--shapes"), ("gemm_clocks", "--shape")])
def test_every_benchmark_reads_its_shapes_through_bench_problem(script, flag, monkeypatch, capsys):
    """A bad shape ends at argparse with its text and the form, before any GPU work (gemm_clocks parses on import)."""
    monkeypatch.setattr(sys, "argv", [f"{script}.py", flag, "4096x4096"])
    with pytest.raises(SystemExit) as exited:
        benchmarks.load(script).main()
    assert exited.value.code == 2
    assert f"argument {flag}: '4096x4096': write MxNxK with three positive integers" in capsys.readouterr().err


def test_operands_refuse_an_unknown_data_kind_or_major_by_name():
    pytest.importorskip("torch")
    with pytest.raises(ValueError, match="data='ones': pick one of normal, integers, zeros"):
        bench.operands(8, 8, 8, "bfloat16", data="ones")
    with pytest.raises(ValueError, match=r"majors=\('n', 'k'\): give \(a's, b's\) major"):
        bench.operands(8, 8, 8, "bfloat16", majors=("n", "k"))


def test_hw_imports_nothing_from_the_packages_that_build_on_it():
    """Measuring sits in bench, which imports the kernels, which use hw: hw itself imports none of them."""
    import ast
    from pathlib import Path

    import cutecourse.hw

    above = ("bench", "kernels", "dispatch", "tuning", "tune_cache", "viz", "grading")
    for path in Path(cutecourse.hw.__file__).parent.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = [alias.name for alias in node.names] if isinstance(node, ast.Import) else []
            if isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module] + [f"{node.module}.{alias.name}" for alias in node.names]
            for name in names:
                assert name.split(".")[:2] not in [["cutecourse", top] for top in above], f"{path.name}: {name}"


NCU_CSV = """==PROF== Connected to process 123
"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","gpu__time_duration.sum",\
"sm__throughput.avg.pct_of_peak_sustained_elapsed","dram__bytes.sum","sm__cycles_elapsed.avg.per_second",\
"sm__cycles_elapsed.max","lts__t_sectors_srcunit_tex_op_read.sum",\
"smsp__average_warps_issue_stalled_wait_per_issue_active.ratio",\
"smsp__average_warps_issue_stalled_barrier_per_issue_active.ratio",\
"smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio",\
"smsp__average_warps_issue_stalled_sleeping_per_issue_active.ratio"
"","","","","","","","nsecond","%","Gbyte","cycle/nsecond","cycle","sector","","","",""
"0","123","python3","h","nvjet_sm90_tst_256x128","1","7","209,504","91.2","0.43","1.49","312,000","27,400,000",\
"0.50","2.25","1.10","0.10"
"1","123","python3","h","kernel_cutlass_gemm","1","7","211,008","n/a","0.41","1.48","314,000","30,400,000",\
"n/a","0.40","3.00","0.20"
""".replace("\\\n", "")


def test_ncu_asks_for_the_first_metric_it_knows_and_its_csv_is_read_in_our_units():
    from cutecourse.bench import ncu

    known = {"sm__pipe_tensor_op_hmma_cycles_active", "gpu__time_duration"}
    metrics = ncu.chosen(known)
    assert metrics["tensor pipe %"] == "sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active"
    assert ncu.chosen(set())["tensor pipe %"] == ncu.METRICS["tensor pipe %"][0]
    line = ncu.command("ncu", metrics, ["python3", "x.py"], "/tmp/profile", ncu.stalls(set()))
    assert line[:6] == ["ncu", "--clock-control", "none", "--profile-from-start", "off", "--nvtx"]
    assert line[-5:] == ["--export", "/tmp/profile", "--force-overwrite", "python3", "x.py"]
    assert ncu.export("ncu", "/tmp/profile", True) == ["ncu", "--import", "/tmp/profile.ncu-rep", "--csv", "--page",
                                                       "raw", "--print-nvtx-rename", "kernel"]
    assert "--print-nvtx-rename" not in ncu.export("ncu", "/tmp/profile", False)
    profiles = ncu.parse(NCU_CSV, metrics)
    assert [p["kernel"] for p in profiles] == ["nvjet_sm90_tst_256x128", "kernel_cutlass_gemm"]
    assert profiles[0]["duration (µs)"] == 209.504 and profiles[0]["SM clock (MHz)"] == 1490.0
    assert profiles[0]["DRAM MB"] == 430.0 and profiles[1]["SM throughput %"] is None  # n/a
    assert profiles[0]["tensor pipe %"] is None  # not in this CSV
    assert profiles[0]["cycles"] == 312000 and profiles[1]["L2 read sectors (M)"] == 30.4
    assert profiles[0]["stalls"] == {"wait": 0.5, "barrier": 2.25, "long_scoreboard": 1.1, "sleeping": 0.1}
    assert "wait" not in profiles[1]["stalls"]  # n/a
    row = ncu.flat(profiles[1], "gemm10_multicast")
    assert row["stall long_scoreboard"] == 3.0 and row["stall wait"] is None and "stalls" not in row
    assert list(row)[:2] == ["launched", "kernel"] and row["launched"] == "gemm10_multicast"
    assert list(row)[-len(ncu.STALLS):] == [f"stall {reason}" for reason in ncu.STALLS]  # every row has every column
    unnamed = ncu.flat({"kernel": "k"}, None)
    assert unnamed["launched"] is None and unnamed["stall barrier"] is None
    asked = line[line.index("--metrics") + 1].split(",")
    assert [name for name in asked if "_stalled_" in name] == [ncu.STALL_METRIC.format(r) for r in ncu.STALLS]
    # an ncu that knows only some stall reasons is asked for only those, as for the other metrics
    assert ncu.stalls({"smsp__average_warps_issue_stalled_wait_per_issue_active", "gpu__time_duration"}) == [
        ncu.STALL_METRIC.format("wait")]
    table = ncu.table(["torch.matmul", "gemm10_multicast"], profiles).splitlines()
    assert table[2].startswith("| torch.matmul | nvjet_sm90_tst_256x128 | 209.5 | 1490.0 | 312000 | 91.2 | n/a")
    assert table[2].endswith("| barrier 2.25, long_scoreboard 1.10, wait 0.50 |")  # the three largest, largest first
    assert table[3].endswith("| long_scoreboard 3.00, barrier 0.40, sleeping 0.20 |")
    assert table[1].count("|---") == len(table[0].split(" | ")) == len(ncu.METRICS) + 3  # a column for each header
    selected = dict(profiles[0], stalls={"selected": 1.0, "wait": 0.5})  # the issuing warp is not a stall
    assert ncu.table(["k"], [selected]).endswith("| wait 0.50 |")
    assert ncu.table(["k"], [{"kernel": "k", **{w: None for w in ncu.METRICS}}]).endswith("| n/a | n/a |")
    assert ncu.table([None, None], profiles).splitlines()[2].startswith("|  | nvjet")
    # a launch that ran two kernels (split-K's GEMM and reduction) names both; a name inside another takes the longer
    launched = ["torch.matmul", "gemm11_pingpong", "gemm11_pingpong(splits=2)"]
    ranges = ["torch.matmul", "gemm11_pingpong(splits=2)", "gemm11_pingpong(splits=2)", "gemm11_pingpong", "elsewhere"]
    assert ncu.named(launched, ranges, 5) == [*launched[:1], launched[2], launched[2], launched[1], None]
    assert ncu.named(launched, ranges[:3], 5) == [None] * 5  # a renamed page that does not match is not guessed at
    assert ncu.parse("no csv here", metrics) == []


def test_bench_gemm_says_what_it_needs_where_it_cannot_run(capsys, monkeypatch):
    from cutecourse import cli

    assert cli.main(["bench", "gemm", "--m", "0", "--n", "8", "--k", "8"]) == 2
    assert "give positive extents" in capsys.readouterr().err
    torch = pytest.importorskip("torch")
    pytest.importorskip("cutlass")  # the kernels named are read first, from the steps' modules
    with monkeypatch.context() as patched:
        patched.setattr("shutil.which", lambda name: None)
        assert cli.main(["bench", "gemm", "--m", "8", "--n", "8", "--k", "8", "--ncu"]) == 2
        assert "ncu (Nsight Compute) is not on PATH. Install it" in capsys.readouterr().err
        assert cli.main(["bench", "gemm", "--m", "8", "--n", "8", "--k", "8", "--ncu", "--kernels", "12"]) == 2
        assert "step 12: the GEMM steps are 1-11" in capsys.readouterr().err  # before ncu is looked for
    for spec, says in (("0", "step 0: the GEMM steps are 1-11"), ("x", "--kernels 'x': give torch, dispatch"),
                       ("10:foo=1", "unexpected keyword argument 'foo'. gemm10_multicast.Config's fields are tile_m")):
        assert cli.main(["bench", "gemm", "--m", "8", "--n", "8", "--k", "8", "--kernels", spec]) == 2
        assert says in capsys.readouterr().err
    if not torch.cuda.is_available():
        assert cli.main(["bench", "gemm", "--m", "8", "--n", "8", "--k", "8"]) == 2
        assert "none is visible here" in capsys.readouterr().err


FAKE_NCU = '''#!/usr/bin/env python3
"""A stand-in for ncu: it knows every metric but one stall reason, and "profiles" two launches, the second of which
ran two kernels (split-K's GEMM and its reduction); its report reads back renamed by NVTX range where asked."""
import sys
args = sys.argv[1:]
if args == ["--query-metrics"]:
    names = [m.split(".")[0] for m in %r if "stalled_barrier" not in m]
    print("Device NVIDIA H200\\n" + "\\n".join(f"{n}  Counter  a metric" for n in names))
    sys.exit(0)
if "--import" in args:
    metrics = open(args[args.index("--import") + 1]).read().split(",")
    renamed = "--print-nvtx-rename" in args
    kernels = ["torch.matmul", "gemm10_multicast", "gemm10_multicast"] if renamed else ["nvjet_a", "kernel_b", "reduce"]
    rows = [["ID", "Kernel Name", *metrics], ["", "", *["" for _ in metrics]]]
    rows += [[str(i), kernel, *[str(i + 1) for _ in metrics]] for i, kernel in enumerate(kernels)]
    print("\\n".join(",".join(f'"{v}"' for v in row) for row in rows))
    sys.exit(0)
metrics = args[args.index("--metrics") + 1].split(",")
assert not any("stalled_barrier" in m for m in metrics), "asked for a metric this ncu does not know"
assert "--nvtx" in args, "the launches' NVTX ranges are not recorded"
with open(args[args.index("--export") + 1] + ".ncu-rep", "w") as report:
    report.write(",".join(metrics))
print("launched: torch.matmul gemm10_multicast")
'''


def test_bench_gemm_ncu_asks_for_what_ncu_knows_and_writes_each_launch_and_stall_as_columns(tmp_path, capsys,
                                                                                          monkeypatch):
    import csv

    pytest.importorskip("torch")
    pytest.importorskip("cutlass")  # the kernels named are read first, from the steps' modules
    from cutecourse import cli
    from cutecourse.bench import ncu

    every = [*(names[0] for names in ncu.METRICS.values()), *ncu.stalls(set())]
    fake = tmp_path / "ncu"
    fake.write_text(FAKE_NCU % every)
    fake.chmod(0o755)
    monkeypatch.setattr("shutil.which", lambda name: str(fake) if name == "ncu" else None)
    out_csv = tmp_path / "profile.csv"
    argv = ["bench", "gemm", "--m", "64", "--n", "64", "--k", "64", "--kernels", "torch", "9", "--ncu",
            "--csv", str(out_csv)]
    assert cli.main(argv) == 0, capsys.readouterr().err
    out = capsys.readouterr().out
    assert "stalls: 17 reasons" in out  # the one this ncu lacks was not asked for
    table = [line for line in out.splitlines() if line.startswith("| ")]
    assert table[1].startswith("| torch.matmul | nvjet_a | 1.0 |") and table[2].startswith("| gemm10_multicast |")
    assert table[3].startswith("| gemm10_multicast | reduce | 3.0 |")  # the launch's second kernel is named too
    rows = list(csv.DictReader(open(out_csv)))
    assert [r["launched"] for r in rows] == ["torch.matmul", "gemm10_multicast", "gemm10_multicast"]
    assert rows[1]["stall wait"] == "2.0" and rows[1]["stall barrier"] == ""  # every reason a column
