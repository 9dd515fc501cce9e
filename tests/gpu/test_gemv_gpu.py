"""The decode GEMV (`cutecourse.kernels.gemm.gemv`) on the GPU, against float64 torch: random M from 1 to 8 (rows of
x the kernel computes past M are not stored), ragged N (no multiple of a warp's rows) and K (whole 16-byte vectors,
no multiple of the 32 lanes' stride), fp16 and bf16, each D dtype, x K-major and M-major, padded leading dimensions,
outputs poisoned with NaN (padding included); the fused epilogue with each bias and aux; two calls bitwise equal;
`cutecourse.gemm` choosing it where the model rules. Kernels broken in the lanes' walk over K, the shuffle
reduction or the rows a warp takes fail the same checks."""

import math
import random
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

import cutecourse  # noqa: E402
from cutecourse import dispatch  # noqa: E402
from cutecourse.kernels.gemm import epilogue  # noqa: E402

pytestmark = pytest.mark.gpu(80)

from . import test_epilogue_gpu as epilogue_gpu  # noqa: E402

# The house's GPU helpers, imported, not copied (as the split-K test does).
strides = epilogue_gpu._load("strides_gpu_helpers_gemv", Path(__file__).with_name("test_gemm_strides_gpu.py"))
gemm_gpu = epilogue_gpu.gemm_gpu

#: (A/B dtype, D dtype, A major, B major): B is K-major (W as nn.Linear stores it), which the GEMV takes.
COMBOS = [(torch.float16, torch.float16, "k", "k"), (torch.bfloat16, torch.float32, "k", "k"),
          (torch.bfloat16, torch.bfloat16, "m", "k")]


@pytest.fixture(scope="module")
def gemv():
    return strides.runnable("gemv")


def gemv_shapes(seed, count, combo):
    """`count` random (M, N, K, pads): M 1 to 8 (8 for an M-major x: its contiguous extent holds whole vectors), N and
    K whole 16-byte vectors of D and of the operands, K up to 20000 (a lane walks K / 256 vectors) and no multiple of
    256. A float32 D's N may end inside a CTA's 8 rows (whole vectors of 4); the first cases: the least (a partial CTA
    for a float32 D), one row of the suite's weights, a ragged one."""
    rng = random.Random(seed)
    m_of = (lambda: 8) if combo[2] == "m" else (lambda: rng.randint(1, 8))
    unit = 16 // torch.empty(0, dtype=combo[1]).element_size()  # D's 16-byte vector
    cases = [(m_of(), 3 * unit, 8, (8, 8, 8)), (m_of(), 6144, 4096, (0, 0, 0)), (m_of(), 1016, 4104, (16, 64, 8))]
    while len(cases) < count:
        n = unit * rng.randint(1, 4800 // unit) + unit
        k = 8 * int(math.exp(rng.uniform(0, math.log(2500))))
        if k % 256 == 0:
            k += 8
        cases.append((m_of(), n, k, tuple(rng.choice([8, 16, 64]) for _ in range(3))))
    return cases


@pytest.mark.parametrize("combo", COMBOS, ids=lambda c: f"{str(c[0])[6:]}-{str(c[1])[6:]}-{c[2]}{c[3]}")
def test_gemv_matches_float64_torch_on_ragged_padded_shapes(gemv, combo):
    cases = gemv_shapes(COMBOS.index(combo), 12, combo)
    wrong = strides.failures(gemv.gemm, combo, cases)
    assert not wrong, f"{len(wrong)} of {len(cases)} wrong:\n" + "\n".join(wrong)


def test_other_configs_match_too(gemv):
    """Two rows a warp, and 4 warps of 4 rows: the grid's rows of W and the warps' split of them differ."""
    for config in (gemv.Config(warps=2, rows_per_warp=2), gemv.Config(warps=4, rows_per_warp=4, rows_m=8)):
        cases = gemv_shapes(5, 6, COMBOS[0])
        wrong = strides.failures(lambda a, b, out: gemv.gemm(a, b, out, config), COMBOS[0], cases)
        assert not wrong, f"{config}: " + "\n".join(wrong)


@pytest.mark.parametrize("bias", ["n", "m"])
def test_the_fused_epilogue(gemv, bias):
    """D = act(alpha · x @ W.t() + beta · C + bias) and aux = its argument, with a bias along N (nn.Linear's) or M."""
    combo = (torch.bfloat16, torch.bfloat16, "k", "k")
    epi = epilogue.Epilogue("gelu_tanh" if bias == "n" else "silu", bias=bias, aux=True)
    wrong = []
    for m, n, k, pads in gemv_shapes(9, 5, combo):
        a, b, d, buffer = strides.operands(m, n, k, combo, pads)
        problems = epilogue_gpu.fused_problems(gemv.gemm, a, b, d, buffer, epi, torch.float32)
        if problems:
            wrong.append(f"{(m, n, k)} pads {pads}: " + "; ".join(problems))
    assert not wrong, "\n".join(wrong)


def test_two_calls_are_bitwise_equal(gemv):
    a, b, d, _ = strides.operands(3, 4104, 14336, COMBOS[1], (8, 8, 8))  # float32 D: every bit of the sum shows
    results = []
    for _ in range(2):
        d.fill_(float("nan"))
        gemv.gemm(a, b, d)
        torch.cuda.synchronize()
        results.append(d.clone())
    assert strides.tolerances.within_bounds(results[0], a, b) is None
    assert torch.equal(results[0], results[1]), "two GEMV calls on the same inputs differ"


def test_cutecourse_gemm_runs_the_gemv_where_the_model_rules(monkeypatch, tmp_path):
    """With no measured winner or tuned pick, 3 × 4096 × 14336 (x @ W.t()) runs on the GEMV, right; with W N-major
    (b contiguous) it does not."""
    from cutecourse.kernels.gemm import winners

    monkeypatch.setattr(winners, "TABLE", tmp_path / "winners.json")
    monkeypatch.setenv("CUTECOURSE_CACHE", str(tmp_path))
    dispatch.forget_plans()
    a, b, out, buffer = strides.operands(3, 4096, 14336, (torch.bfloat16, torch.bfloat16, "k", "k"), (0, 8, 0))
    assert cutecourse.gemm.explain(a, b, out).step == "gemv"
    cutecourse.gemm(a, b, out)
    torch.cuda.synchronize()
    assert strides.judge(out, buffer, a, b) is None
    a, b, out, buffer = strides.operands(3, 4096, 14336, (torch.bfloat16, torch.bfloat16, "k", "n"), (0, 8, 0))
    assert cutecourse.gemm.explain(a, b, out).step != "gemv"


#: what is broken -> its edits to gemv.py: each must make the check above fail.
BROKEN = {
    "the lanes skip every other vector of K": [("cutlass.range(lane, k // vector, WARP, unroll=2)",
                                                "cutlass.range(lane, k // vector, 2 * WARP, unroll=2)")],
    "the shuffles add only half the warp's lanes": [("cute.arch.warp_reduction_sum(acc[i, r])",
                                                     "cute.arch.warp_reduction_sum(acc[i, r], threads_in_group=16)")],
    "the warps' rows overlap": [("first_n = (bidx * warps + tidx // WARP) * rows_per_warp",
                                 "first_n = bidx * warps + tidx // WARP")],
    "rows past N are stored": [("if first_n + r < n:", "if first_n + r < n + WARP:")],
}


@pytest.mark.parametrize("what", list(BROKEN))
def test_a_broken_gemv_fails_the_check(what, gemv, tmp_path):
    broken = gemm_gpu.variant("gemv", BROKEN[what], tmp_path)
    config = broken.Config(rows_per_warp=2)  # two rows a warp: the overlap shows
    cases = gemv_shapes(11, 3, COMBOS[1])
    assert strides.failures(lambda a, b, out: broken.gemm(a, b, out, config), COMBOS[1], cases), (
        f"a GEMV where {what} passed the check: it cannot fail")
