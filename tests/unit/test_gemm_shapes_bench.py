"""benchmarks/gemm_shapes.py on a CPU: what it records as the step and Config `cutecourse.gemm` ran on each shape (the
CSV's `ran` column) is what the dispatcher picks for the suite's call, asked with CPU tensors for the GPU's arch and SM
count. Its kernels and timing need a GPU."""

from __future__ import annotations

import dataclasses
import importlib

import pytest

pytest.importorskip("cutlass")
pytest.importorskip("torch")

from cutecourse.kernels.gemm import winners  # noqa: E402

from . import benchmarks  # noqa: E402


@pytest.fixture(scope="module")
def suite():
    return benchmarks.load("gemm_shapes")


def test_the_ran_column_names_the_tables_winner_on_hopper_and_step_5_elsewhere(suite):
    for m, n, k in [(1024, 1024, 16384), (4096, 4096, 4096), (1, 4096, 14336), (128, 6144, 4096)]:
        entry = winners.lookup("sm_90", "bfloat16", m, n, k)
        default = dataclasses.asdict(importlib.import_module(f"cutecourse.kernels.gemm.{entry['step']}").Config())
        expected = {f"{key}={value}" for key, value in entry["config"].items() if default[key] != value}
        said = suite.ran(m, n, k, "bfloat16", 90, 132)
        assert said.startswith(f"{entry['step']}("), (said, entry["step"])
        changed = said[len(entry["step"]) + 1:-1]
        assert (set() if changed == "default" else set(changed.split(","))) == expected, (said, entry["config"])
    assert suite.ran(4096, 4096, 4096, "float16", 80, 108) == "gemm05_swizzle(default)"
    split = [e["shape"] for e in winners.table()["sm_90"]["bfloat16"].values() if e["config"].get("splits", 1) > 1]
    assert split and all("splits=" in suite.ran(*shape, "bfloat16", 90, 132) for shape in split)  # split-K winners


def test_the_csv_has_the_ran_column(suite):
    assert suite.FIELDS[-1] == "ran"


def test_a_run_with_the_extras_prints_its_table_and_writes_every_row(suite, monkeypatch, tmp_path, capsys):
    # The extras' own torch.matmul row has epilogue "none" too, and no "data": the table is the plain rows' alone.
    import sys

    import torch

    meta = dict(date="2026-12-06", gpu="GPU", M=4096, N=4096, K=4096, ms="1.0", tflops="1.0", ratio="1.000",
                sm_mhz="", watts="", rounds="1.0")
    plain = [dict(meta, dtype="bfloat16", data="randn", kernel=k, epilogue="none", baseline="torch.matmul")
             for k in ("torch.matmul", suite.OURS)]
    extras = [dict(meta, dtype="bfloat16", kernel="torch.matmul", epilogue="none", baseline="torch.matmul"),
              dict(meta, dtype="bfloat16", kernel=f"{suite.OURS} gelu_tanh", epilogue="gelu_tanh",
                   baseline="cuBLASLt gelu_tanh")]
    monkeypatch.setattr(suite, "plain_rows", lambda *args: [dict(r) for r in plain])
    monkeypatch.setattr(suite, "extra_rows", lambda *args: [dict(r) for r in extras])
    monkeypatch.setattr(suite, "plot", lambda *args: None)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda *args: "NVIDIA GPU")
    path = tmp_path / "run.csv"
    monkeypatch.setattr(sys, "argv", ["gemm_shapes.py", "--only", "4096x4096x4096", "--csv", str(path)])
    suite.main()
    out = capsys.readouterr().out
    assert out.count("| bfloat16 | randn | 4096×4096×4096 |") == 2, out
    assert "gelu_tanh" in out  # the extras' geomean line
    assert len(path.read_text().splitlines()) == 1 + len(plain) + len(extras)
