"""benchmarks/epilogue.py on a CPU: its command line; the judge its checks, the fp8 and fused races and
tests/gpu/test_epilogue_gpu.py use (`tolerances.within_epilogue_bounds`), which passes D rounded to its dtype and what
fast fp32 math may do, and fails a wrong epilogue; and the ratios and goals it reports from settled rounds' times.
Its kernels and timing need a GPU."""

from __future__ import annotations

import pytest

pytest.importorskip("cutlass")
torch = pytest.importorskip("torch")

from cutecourse.kernels.gemm import tolerances  # noqa: E402

from . import benchmarks  # noqa: E402


@pytest.fixture(scope="module")
def bench():
    """benchmarks/epilogue.py as a module (it imports benchmarks/gemm.py as `gemm`, as when run)."""
    return benchmarks.load("epilogue")


def test_by_default_it_times_the_issues_shapes_and_dtypes_with_the_last_step(bench):
    args = bench.parse([])
    assert args.shapes == [(4096, 4096, 4096), (8192, 8192, 8192)]
    assert args.dtypes == ["bfloat16", "float16", "float8_e4m3fn"]
    assert (args.steps, args.fp8_steps, args.variants) == ([11], [11], [])
    assert (args.rounds, args.settle_ms, args.csv) == (5, 1000.0, "epilogue.csv")
    args = bench.parse(["--shapes", "2048x1024x512", "--dtypes", "float16", "--steps", "5", "10", "11",
                        "--rounds", "3"])
    assert (args.shapes, args.dtypes, args.steps, args.rounds) == ([(2048, 1024, 512)], ["float16"], [5, 10, 11], 3)


@pytest.mark.parametrize("argv, says", [
    (["--shapes", "4096x4096"], "'4096x4096': write MxNxK with three positive integers"),
    (["--shapes", "4096x0x4096"], "'4096x0x4096': write MxNxK"),
    (["--steps", "4"], "invalid choice: 4 (choose from 5, 6, 7, 8, 9, 10, 11)"),  # step 4 has no epilogue
    (["--fp8-steps", "5"], "invalid choice: 5 (choose from 10, 11)"),  # fp8 wgmma needs Hopper
    (["--dtypes", "float8_e5m2"], "invalid choice: 'float8_e5m2'"),
])
def test_a_bad_argument_is_refused_by_name(bench, capsys, argv, says):
    with pytest.raises(SystemExit):
        bench.parse(argv)
    assert says in capsys.readouterr().err


def epilogue_case(activation, dtype, scale=1.0):
    """A GEMM's float64 accumulators (random normal, K = 64), a bias along N of the same spread, the pre-activation x
    = acc + bias, its activation, and D: that rounded to `dtype`."""
    generator = torch.Generator().manual_seed(0)
    acc, bias = (scale * 8 * torch.randn(*shape, generator=generator, dtype=torch.float64) for shape in ((200, 200),
                                                                                                    (200,)))
    act = {"relu": torch.relu, "gelu_tanh": lambda v: torch.nn.functional.gelu(v, approximate="tanh"),
           "none": lambda v: v}[activation]
    x = acc + bias
    return acc, bias, x, act(x), act(x).to(dtype)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("activation", ["none", "relu", "gelu_tanh"])
def test_the_judge_passes_the_reference_rounded_to_ds_dtype(activation, dtype):
    _, _, x, d_ref, d = epilogue_case(activation, dtype)
    assert tolerances.within_epilogue_bounds(d, d_ref, x, activation) is None


def test_the_judge_allows_gelu_what_tanh_approx_may_err_and_no_more():
    _, _, x, d_ref, _ = epilogue_case("gelu_tanh", torch.float32, scale=1 / 8)  # |x| about 1: tanh far from ±1
    fast = tolerances.FAST_MATH["gelu_tanh"]
    assert tolerances.within_epilogue_bounds((d_ref + fast * x.abs()).float(), d_ref, x, "gelu_tanh") is None
    assert tolerances.within_epilogue_bounds((d_ref + 3 * fast * x.abs()).float(), d_ref, x, "gelu_tanh") is not None
    # ReLU is exact: the same error is too much for it.
    _, _, x, d_ref, _ = epilogue_case("relu", torch.float32, scale=1 / 8)
    assert tolerances.within_epilogue_bounds((d_ref + fast * x.abs()).float(), d_ref, x, "relu") is not None


def test_the_judge_fails_a_wrong_epilogue_and_names_nan():
    acc, bias, x, d_ref, d = epilogue_case("relu", torch.bfloat16)
    wrong = {"the activation skipped": x, "the bias left out": torch.relu(acc),
             "the bias along M": torch.relu(acc + bias[:, None]), "alpha = 2 ignored": torch.relu(x / 2),
             "a sigmoid for the ReLU": torch.sigmoid(x)}
    for what, got in wrong.items():
        assert tolerances.within_epilogue_bounds(got.to(torch.bfloat16), d_ref, x, "relu") is not None, what
    d[7, 3] = float("nan")
    assert tolerances.within_epilogue_bounds(d, d_ref, x, "relu") == (
        "1 of 40000 outputs are NaN (never written, or C read with beta = 0)")


def test_a_kernel_the_judge_refuses_stops_the_run_before_it_is_timed(bench, monkeypatch):
    """The benchmark checks through benchmarks/gemm.py's `checked`, with the epilogue's judge."""
    monkeypatch.setattr(torch.cuda, "synchronize", lambda: None)
    _, _, x, d_ref, _ = epilogue_case("relu", torch.float32)
    a = x
    b = torch.eye(200, dtype=torch.float64)
    d = torch.empty(200, 200)

    def judge(out):
        return tolerances.within_epilogue_bounds(out, d_ref, x, "relu")

    def forgets_the_relu(a, b, d, config):
        d.copy_(a @ b)

    said = []
    fn = bench.checked("right", lambda a, b, d, config: d.copy_(torch.relu(a @ b)), None, a, b, d, say=said.append,
                       judge=judge)
    assert said[0].startswith("right: correct") and callable(fn)
    with pytest.raises(SystemExit, match=r"forgets the ReLU is wrong: relative error"):
        bench.checked("forgets the ReLU", forgets_the_relu, None, a, b, d, say=said.append, judge=judge)


def fake_rounds(ms):
    """settled_rounds' result for kernels of these median ms (3 rounds each, no clock readings)."""
    return {name: [t * 1.1, t, t * 0.9] for name, t in ms.items()}, {name: [] for name in ms}


def test_the_rows_carry_each_kernels_ratio_to_its_baseline_and_the_goals_their_verdicts(bench):
    meta = dict(date="2026-12-02", gpu="H200", dtype="bfloat16", M=4096, N=4096, K=4096)
    ms = {"torch.matmul": 0.20, "torch unfused gelu_tanh": 0.30, "cuBLASLt fused gelu_tanh": 0.25,
          "gemm11_pingpong gelu_tanh": 0.235, "torch unfused relu": 0.28, "cuBLASLt fused relu": 0.22,
          "gemm11_pingpong relu": 0.225}
    rows = bench.rows_of(*fake_rounds(ms), 2 * 4096**3, **meta)
    by_kernel = {r["kernel"]: r for r in rows}
    assert by_kernel["gemm11_pingpong gelu_tanh"]["baseline"] == "cuBLASLt fused gelu_tanh"
    assert by_kernel["gemm11_pingpong gelu_tanh"]["ratio"] == f"{0.25 / 0.235:.3f}"
    assert by_kernel["torch.matmul"]["epilogue"] == "none" and by_kernel["torch.matmul"]["ratio"] == "1.000"
    assert by_kernel["gemm11_pingpong relu"]["tflops"] == f"{2 * 4096**3 / 0.225 / 1e9:.1f}"
    fp8 = dict(meta, dtype="float8_e4m3fn")
    rows += bench.rows_of(*fake_rounds({"torch._scaled_mm": 0.15, "torch._scaled_mm fast_accum": 0.13,
                                        "gemm11_pingpong fp8": 0.155}), 2 * 4096**3, **fp8)
    verdicts = {(g["dtype"], g["kernel"]): g for g in bench.goals(rows)}
    assert list(verdicts) == [("bfloat16", "gemm11_pingpong gelu_tanh"), ("bfloat16", "gemm11_pingpong relu"),
                              ("float8_e4m3fn", "gemm11_pingpong fp8")]
    gelu = verdicts["bfloat16", "gemm11_pingpong gelu_tanh"]
    assert gelu["verdict"] == "target 1.05 met"  # 0.25 / 0.235 = 1.064
    assert gelu["vs_unfused"] == pytest.approx(0.30 / 0.235) and gelu["fused_vs_unfused"] == pytest.approx(0.30 / 0.25)
    assert verdicts["bfloat16", "gemm11_pingpong relu"]["verdict"] == "goal 1.0 missed"  # 0.22 / 0.225 = 0.978
    ours_fp8 = verdicts["float8_e4m3fn", "gemm11_pingpong fp8"]
    assert ours_fp8["verdict"] == "goal 0.95 met"  # 0.15 / 0.155 = 0.968
    assert ours_fp8["vs_fast_accum"] == pytest.approx(0.13 / 0.155)
    table = bench.markdown(rows)
    assert "| bfloat16 | 4096×4096×4096 | gelu_tanh | gemm11_pingpong gelu_tanh | 1.064 | 1.277 | 1.200 |  | " \
           "target 1.05 met |" in table
