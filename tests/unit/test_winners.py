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


def test_a_fused_call_runs_the_fused_races_winner_and_fp8_the_fp8_races(table_file):
    """A call with an epilogue runs its class's fused winner where the fused race measured the class, else the plain
    product's winner and says that no fused race measured it; fp8 e4m3 its own race's winner, e5m2 the model."""
    import cutecourse
    from cutecourse.kernels.gemm import gemm10_multicast, gemm11_pingpong

    plain = dict(ENTRY, shape=[4096] * 3)
    fused = dict(ENTRY, step="gemm10_multicast", config={"tile_m": 256, "tile_n": 128}, shape=[4096] * 3, ratio=1.02,
                 baseline_ms=0.051, raced=6)
    fp8 = dict(fused, config={"tile_k": 128, "epi_n": 64}, ratio=1.04, baseline_ms=0.052)
    winners.store("sm_90", "bfloat16", {"4096x4096x4096": plain})
    winners.store("sm_90", "bfloat16+bias_gelu", {"4096x4096x4096": fused})
    winners.store("sm_90", "float8_e4m3fn", {"4096x4096x4096": fp8})
    square = ops(4096, 4096, 4096)

    choice = cutecourse.gemm.explain(*square, arch=90, fused=True)
    assert (choice.step, choice.config) == ("gemm10_multicast", gemm10_multicast.Config(tile_m=256, tile_n=128))
    reason = next(r for r in choice.reasons if r.startswith("measured"))
    assert "ran fastest with bias + GELU fused of 6 configs" in reason and "1.020× cuBLASLt fused" in reason, reason
    choice = cutecourse.gemm.explain(*square, arch=90)
    assert (choice.step, choice.config) == ("gemm11_pingpong", gemm11_pingpong.Config(**ENTRY["config"]))
    assert "0.900× torch.matmul" in next(r for r in choice.reasons if r.startswith("measured"))
    # fp16 has only a plain winner: a fused call runs it, and says why.
    winners.store("sm_90", "float16", {"4096x4096x4096": plain})
    choice = cutecourse.gemm.explain(*ops(4096, 4096, 4096, torch.float16), arch=90, fused=True)
    assert choice.step == "gemm11_pingpong"
    assert any(r.startswith("measured") and r.endswith("no fused epilogue was raced on this class")
               for r in choice.reasons), choice
    choice = cutecourse.gemm.explain(*ops(4096, 4096, 4096, torch.float8_e4m3fn), arch=90)
    assert (choice.step, choice.config) == ("gemm10_multicast", gemm10_multicast.Config(tile_k=128, epi_n=64))
    assert "ran fastest in fp8" in str(choice) and "1.040× torch._scaled_mm" in str(choice)
    choice = cutecourse.gemm.explain(*ops(4096, 4096, 4096, torch.float8_e5m2), arch=90)
    assert choice.config == gemm10_multicast.FP8_CONFIG and "no winner measured" in str(choice)


def test_every_shipped_entry_is_a_config_its_step_takes_with_what_was_measured():
    import importlib

    from cutecourse.kernels.gemm import budget

    shipped = winners.table()
    entries = [(arch, dtype, cls, e) for arch, by_dtype in shipped.items() for dtype, by_class in by_dtype.items()
               for cls, e in by_class.items()]
    assert {(arch, dtype) for arch, dtype, _, _ in entries} >= {("sm_90", "bfloat16"), ("sm_90", "float16")}
    for arch, key, cls, e in entries:
        candidates = winners.races(key)  # also refuses a key no race writes
        assert e["step"] in {step for step, _ in candidates} and winners.shape_class(*e["shape"]) == cls, (cls, e)
        config = importlib.import_module(f"cutecourse.kernels.gemm.{e['step']}").Config(**e["config"])
        ab, c = operand_dtypes(key)
        assert budget.fits(e["step"], config, ab, c, int(arch[3:])), (cls, e)
        assert e["ms"] > 0 and e["baseline_ms"] > 0 and abs(e["baseline_ms"] / e["ms"] - e["ratio"]) < 0.01
        assert e["gpu"].count("|") == 2 and len(e["date"]) == 10
        assert 2 <= e["raced"] <= len(candidates), (cls, e)  # the race's size: what `explain` says it beat


def operand_dtypes(key):
    """A table key's (A and B dtype, D dtype): fp8's D is bfloat16."""
    ab = key.removesuffix(winners.FUSED_SUFFIX)
    return ab, "bfloat16" if ab == winners.FP8 else ab


def test_every_candidate_is_a_config_its_step_takes_that_fits_sm90():
    """A candidate its step refuses, or that overflows sm_90's shared memory, would only ever be skipped by the race."""
    import importlib

    from cutecourse.kernels.gemm import budget

    for key in ("bfloat16", "bfloat16+bias_gelu", "float8_e4m3fn"):
        for step, fields in winners.races(key):
            config = importlib.import_module(f"cutecourse.kernels.gemm.{step}").Config(**fields)
            assert budget.fits(step, config, *operand_dtypes(key), 90), (key, step, fields)
    fp8_steps = {step for step, _ in winners.races(winners.FP8)}
    for step in fp8_steps:  # fp8's candidates take the k-tile of the step's own fp8 Config
        fp8_config = importlib.import_module(f"cutecourse.kernels.gemm.{step}").FP8_CONFIG
        assert all(fields["tile_k"] == fp8_config.tile_k for s, fields in winners.races(winners.FP8) if s == step)


def test_a_race_is_keyed_by_what_it_measured():
    assert [winners.key(d) for d in ("float16", "bfloat16", "float8_e4m3fn")] == ["float16", "bfloat16",
                                                                                 "float8_e4m3fn"]
    assert winners.key("bfloat16", fused=True) == "bfloat16+bias_gelu"
    assert [winners.kind(k) for k in ("float16", "float16+bias_gelu", "float8_e4m3fn")] == ["plain", "fused", "fp8"]
    assert winners.races("float16") == winners.CANDIDATES
    assert winners.races("float16+bias_gelu") == winners.EPILOGUE_CANDIDATES
    assert [step for step, _ in winners.races("float8_e4m3fn")] == [step for step, _ in winners.EPILOGUE_CANDIDATES]
    for bad in ("float8_e5m2", "float8_e4m3fn+bias_gelu", "bfloat16+relu"):
        with pytest.raises(ValueError, match="the races time|fused=True with"):
            winners.kind(bad)
    for bad, fused, says in (("float32", False, "float16, bfloat16 or float8_e4m3fn"),
                             ("float8_e5m2", False, "float16, bfloat16 or float8_e4m3fn"),
                             ("float8_e4m3fn", True, "race the fused epilogue in float16 or bfloat16")):
        with pytest.raises(ValueError, match=says):
            winners.key(bad, fused)


def test_measuring_winners_needs_a_hopper_gpu():
    from cutecourse import tuning

    with pytest.raises(ValueError, match="dtype='float32': the races time float16, bfloat16 or float8_e4m3fn"):
        tuning.measure_winners([(128, 128, 128)], "float32")
    with pytest.raises(ValueError, match="fused=True with float8_e4m3fn"):
        tuning.measure_winners([(128, 128, 128)], "float8_e4m3fn", fused=True)
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


def test_the_race_has_a_command_that_names_the_problems_and_dtypes(monkeypatch, capsys):
    """`cutecourse tune winners` races the named problems in each dtype (`suite`, `extras` or M×N×K), writes the
    table unless --dry-run; `cutecourse tune gemm` searches one problem. A bad problem or an fp8 fused race exits 2
    naming the fix, before any GPU is needed."""
    from cutecourse import cli, tuning

    raced, tuned = [], []
    monkeypatch.setattr(tuning, "measure_winners", lambda shapes, dtype, **kw: raced.append((shapes, dtype, kw)))
    monkeypatch.setattr(tuning, "tune", lambda shape, dtype, **kw: tuned.append((shape, dtype, kw)) or "tuned")
    assert cli.main(["tune", "winners", "--shapes", "extras", "128x6144x4096", "--dtypes", "bfloat16",
                     "float8_e4m3fn", "--dry-run", "--rounds", "2"]) == 0
    shapes = [*winners.EXTRAS, (128, 6144, 4096)]
    assert [(s, d) for s, d, _ in raced] == [(shapes, "bfloat16"), (shapes, "float8_e4m3fn")]
    assert all(kw["write"] is False and kw["fused"] is False and kw["rounds"] == 2 for _, _, kw in raced)
    assert "not written (--dry-run)" in capsys.readouterr().out
    raced.clear()
    assert cli.main(["tune", "winners", "--fused"]) == 0
    assert raced[0][0] == winners.SHAPES and raced[0][2]["fused"] and raced[0][2]["write"]
    assert [d for _, d, _ in raced] == ["bfloat16", "float16"]
    assert cli.main(["tune", "gemm", "--m", "128", "--n", "6144", "--k", "4096", "--search", "exhaustive"]) == 0
    assert tuned == [((128, 6144, 4096), "bfloat16", dict(search="exhaustive", rounds=3, settle_ms=100.0,
                                                            say=print))]
    monkeypatch.undo()
    for argv, says in ((["--shapes", "4096x0x4096"], "--shapes '4096x0x4096': write MxNxK"),
                       (["--dtypes", "float8_e4m3fn", "--fused"], "race the fused epilogue in float16 or bfloat16")):
        assert cli.main(["tune", "winners", *argv]) == 2
        assert says in capsys.readouterr().err
