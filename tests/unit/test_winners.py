"""The shipped table of measured winners (`cutecourse.kernels.gemm.winners`): shape classes, the table's round trip,
`explain` running a class's measured winner and saying so (and the model where nothing was measured), and every
entry of the shipped table a Config its step takes, on the arch it was measured on, with what was measured."""

import json

import pytest

from cutecourse.kernels.gemm import winners

torch = pytest.importorskip("torch")


def test_a_class_rounds_each_extent_up_to_a_power_of_two():
    assert winners.shape_class(128, 6144, 4096) == "128x8192x4096"
    assert winners.shape_class(1, 1, 1) == "1x1x1" and winners.shape_class(65, 4097, 2049) == "128x8192x4096"
    assert winners.describe("128x8192x4096") == "64 < M ≤ 128, 4096 < N ≤ 8192, 2048 < K ≤ 4096"
    assert winners.describe("1x2x4").startswith("M = 1, 1 < N ≤ 2")
    for bad in (0, -3, 2.0, True, None):
        with pytest.raises(ValueError, match="a GEMM extent is a positive int"):
            winners.shape_class(bad, 8, 8)


ENTRY = {"step": "gemm11_pingpong", "config": {"tile_m": 64, "tile_n": 128, "cluster_m": 1, "cluster_n": 1},
         "shape": [128, 6144, 4096], "raced": 7, "ms": 0.05, "ratio": 0.9, "baseline_ms": 0.045,
         "gpu": "NVIDIA H200|580|4.8.1", "date": "2026-12-03"}


@pytest.fixture
def table_file(monkeypatch, tmp_path):
    path = tmp_path / "winners.json"
    monkeypatch.setattr(winners, "TABLE", path)
    return path


def test_store_merges_sorts_and_is_read_back(table_file):
    winners.store("sm_90", "bfloat16", {"4096x4096x4096": dict(ENTRY, shape=[4096] * 3)})
    winners.store("sm_90", "bfloat16", {"128x8192x4096": ENTRY})
    assert winners.lookup("sm_90", "bfloat16", 100, 5000, 3000) == ENTRY
    assert winners.lookup("sm_90", "float16", 100, 5000, 3000) is None
    assert winners.lookup("sm_80", "bfloat16", 100, 5000, 3000) is None
    text = table_file.read_text()
    assert json.loads(text)["sm_90"]["bfloat16"].keys() == {"4096x4096x4096", "128x8192x4096"}
    assert text.index('"128x8192x4096"') < text.index('"4096x4096x4096"')  # by size, one class a line


def ops(m, n, k, dtype=torch.bfloat16):
    return torch.empty(m, k, dtype=dtype), torch.empty(n, k, dtype=dtype).t()


def test_explain_runs_a_measured_winner_and_says_what_was_measured(table_file):
    import cutecourse
    from cutecourse.kernels.gemm import gemm11_pingpong

    winners.store("sm_90", "bfloat16", {"128x8192x4096": ENTRY})
    choice = cutecourse.gemm.explain(*ops(100, 6000, 4000), arch=90)
    assert choice.step == "gemm11_pingpong" and choice.config == gemm11_pingpong.Config(**ENTRY["config"])
    reason = next(r for r in choice.reasons if r.startswith("measured"))
    for said in ("64 < M ≤ 128", "gemm11_pingpong(", "tile_m=64", "fastest of 7 configs", "NVIDIA H200", "2026-12-03",
                 "128x6144x4096", "0.900× torch.matmul", "winners.json"):
        assert said in reason, (said, reason)
    # Another class, another dtype, fp8, or another arch: the model, and it says so.
    for a, b, arch in (ops(4096, 4096, 4096) + (90,), ops(100, 6000, 4000, torch.float16) + (90,),
                       ops(100, 6000, 4000, torch.float8_e4m3fn) + (90,)):
        choice = cutecourse.gemm.explain(a, b, arch=arch)
        assert not any(r.startswith("measured") for r in choice.reasons)
        assert any("no winner measured" in r and "the model decides" in r for r in choice.reasons), choice
    assert cutecourse.gemm.explain(*ops(100, 6000, 4000), arch=80).step == "gemm05_swizzle"


def test_every_shipped_entry_is_a_config_its_step_takes_with_what_was_measured():
    import importlib

    from cutecourse.kernels.gemm import budget

    shipped = winners.table()
    entries = [(arch, dtype, cls, e) for arch, by_dtype in shipped.items() for dtype, by_class in by_dtype.items()
               for cls, e in by_class.items()]
    assert {(arch, dtype) for arch, dtype, _, _ in entries} >= {("sm_90", "bfloat16"), ("sm_90", "float16")}
    steps = {step for step, _ in winners.CANDIDATES}
    for arch, dtype, cls, e in entries:
        assert e["step"] in steps and winners.shape_class(*e["shape"]) == cls, (cls, e)
        config = importlib.import_module(f"cutecourse.kernels.gemm.{e['step']}").Config(**e["config"])
        assert budget.fits(e["step"], config, dtype, dtype, int(arch[3:])), (cls, e)
        assert e["ms"] > 0 and e["baseline_ms"] > 0 and abs(e["baseline_ms"] / e["ms"] - e["ratio"]) < 0.01
        assert e["gpu"].count("|") == 2 and len(e["date"]) == 10
        assert 2 <= e["raced"] <= len(winners.CANDIDATES), (cls, e)  # the race's size: what `explain` says it beat


def test_every_candidate_is_a_config_its_step_takes_that_fits_sm90():
    """A candidate its step refuses, or that overflows sm_90's shared memory, would only ever be skipped by the race."""
    import importlib

    from cutecourse.kernels.gemm import budget

    for step, fields in winners.CANDIDATES:
        config = importlib.import_module(f"cutecourse.kernels.gemm.{step}").Config(**fields)
        assert budget.fits(step, config, "bfloat16", "bfloat16", 90), (step, fields)


def test_measuring_winners_needs_a_hopper_gpu():
    from cutecourse import tuning

    with pytest.raises(ValueError, match="float16 or bfloat16"):
        tuning.measure_winners([(128, 128, 128)], "float32")
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match="none is visible here"):
            tuning.measure_winners([(128, 128, 128)])


def test_the_race_runs_swap_ab_only_on_problems_of_few_rows():
    swapped = [fields for _, fields in winners.CANDIDATES if fields.get("swap_ab")]
    assert len(swapped) == 2 and all(fields["tile_n"] == 16 for fields in swapped)
    for fields in swapped:
        assert winners.raced(fields, 1) and winners.raced(fields, winners.SWAP_AB_ROWS)
        assert not winners.raced(fields, winners.SWAP_AB_ROWS + 1)
    assert all(winners.raced(fields, 8192) for _, fields in winners.CANDIDATES if not fields.get("swap_ab"))
