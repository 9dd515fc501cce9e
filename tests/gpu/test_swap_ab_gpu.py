"""Step 11's swap-AB on the GPU (``Config(swap_ab=True)``: Dᵀ = Bᵀ·Aᵀ into the transposed view of D, a column-major
C stored through ``stmatrix.trans``): random small and ragged M (1 to 64 rows, and a few hundred for several tiles
along it), ragged N and K, both majors of A and B, fp16 and bf16, 16-bit and float32 D, padded leading dimensions,
outputs poisoned with NaN (padding included), against float64 torch; with split-K (a column-major workspace and
reduction); the fused epilogue with a bias along N and along M (which the swap exchanges), beta · C, alpha and aux;
a column-major D given directly; `cutecourse.gemm` running a table's swap-AB winner. Kernels broken in what swap-AB
adds (C and aux read row-major, the partials stored row-major into the column-major workspace) fail the same
checks."""

import math
import random
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

import cutecourse  # noqa: E402
from cutecourse import dispatch  # noqa: E402
from cutecourse.kernels.gemm import epilogue, winners  # noqa: E402

pytestmark = pytest.mark.gpu(90)

from . import test_epilogue_gpu as epilogue_gpu  # noqa: E402

# The house's GPU helpers, imported: padded, NaN-poisoned operands and their judge, broken copies of a module.
strides = epilogue_gpu._load("strides_gpu_helpers", Path(__file__).with_name("test_gemm_strides_gpu.py"))
gemm_gpu = epilogue_gpu.gemm_gpu

#: (A/B dtype, D dtype, A major, B major): both dtypes, both majors of each operand, 16-bit and float32 D.
COMBOS = [(torch.float16, torch.float16, "k", "k"), (torch.bfloat16, torch.float32, "m", "n"),
          (torch.bfloat16, torch.bfloat16, "k", "n"), (torch.float16, torch.bfloat16, "m", "k")]
#: The swapped tiles: 64 rows of W by 16 tokens, one CTA a cluster; 128 by 32 in a 2 × 1 cluster (two CTAs along
#: W's rows share the tokens' tile, 16 rows each).
CONFIGS = {"64x16": dict(swap_ab=True, tile_m=64, tile_n=16, epi_n=16, cluster_m=1),
           "128x32-2x1": dict(swap_ab=True, tile_m=128, tile_n=32, epi_n=32, cluster_m=2)}


def small_m_shapes(seed, count, whole_m=False):
    """`count` random (M, N, K, pads): M from 1 to 64 (and one of a few hundred: several tiles along the swapped N),
    N and K whole 16-byte vectors (8 elements), K no multiple of 64. The first: one token, a ragged 17 rows, and
    1 × 8 × 8. `whole_m`: M too in whole vectors, as an M-major a needs (its contiguous extent)."""
    rng = random.Random(seed)
    cases = [(1, 1000, 520, (8, 8, 8)), (17, 136, 1000, (16, 8, 64)), (1, 8, 8, (8, 8, 8)), (300, 264, 72, (8, 64, 16))]
    while len(cases) < count:
        m = rng.randint(1, 64)
        n = -(-int(math.exp(rng.uniform(math.log(8), math.log(3000)))) // 8) * 8
        k = 64 * rng.randrange(0, 30) + 8 * rng.randrange(1, 8)
        cases.append((m, n, k, tuple(rng.choice([8, 16, 64]) for _ in range(3))))
    return [(-(-m // 8) * 8 if whole_m else m, n, k, pads) for m, n, k, pads in cases]


@pytest.fixture(scope="module")
def pingpong():
    return strides.runnable("gemm11_pingpong")


def swap_failures(gemm, config, combo, cases):
    return strides.failures(lambda a, b, out: gemm(a, b, out, config), combo, cases)


@pytest.mark.parametrize("tiles", list(CONFIGS))
@pytest.mark.parametrize("combo", COMBOS, ids=lambda c: f"{str(c[0])[6:]}-{str(c[1])[6:]}-{c[2]}{c[3]}")
def test_swap_ab_matches_float64_torch_on_small_ragged_padded_shapes(pingpong, combo, tiles):
    config = pingpong.Config(**CONFIGS[tiles])
    cases = small_m_shapes(COMBOS.index(combo) * 10 + list(CONFIGS).index(tiles), 10, combo[2] == "m")
    wrong = swap_failures(pingpong.gemm, config, combo, cases)
    assert not wrong, f"{config}: {len(wrong)} of {len(cases)} wrong:\n" + "\n".join(wrong)


@pytest.mark.parametrize("combo", COMBOS[:2], ids=lambda c: f"{str(c[0])[6:]}-{str(c[1])[6:]}-{c[2]}{c[3]}")
def test_swap_ab_with_split_k_matches_float64_torch(pingpong, combo):
    """Three splits: the partials land in a column-major workspace (each slice D's row-major partial) and the
    reduction reads and stores along M."""
    config = pingpong.Config(**CONFIGS["64x16"], splits=3)
    cases = [(m, n, max(k, 64 * 3 + 8), pads)
             for m, n, k, pads in small_m_shapes(40 + COMBOS.index(combo), 8, combo[2] == "m")]
    wrong = swap_failures(pingpong.gemm, config, combo, cases)
    assert not wrong, f"{config}: {len(wrong)} of {len(cases)} wrong:\n" + "\n".join(wrong)


@pytest.mark.parametrize("splits", [1, 3])
@pytest.mark.parametrize("bias", ["n", "m"])
def test_the_fused_epilogue_runs_in_the_swapped_frame(pingpong, bias, splits):
    """D = GELU(alpha · acc + beta · C + bias) and aux = its argument: C and aux read and written through their
    transposed views, the bias along N becoming one along M of Dᵀ (and the other way round)."""
    config = pingpong.Config(**CONFIGS["64x16"], splits=splits)
    combo = (torch.bfloat16, torch.bfloat16, "k", "k")
    epi = epilogue.Epilogue("gelu_tanh", bias=bias, aux=True)
    wrong = []
    for m, n, k, pads in small_m_shapes(50 + splits, 5):
        k = max(k, 64 * splits)
        a, b, d, buffer = strides.operands(m, n, k, combo, pads)
        problems = epilogue_gpu.fused_problems(lambda *args, **kw: pingpong.gemm(*args, config, **kw), a, b, d,
                                               buffer, epi)
        if problems:
            wrong.append(f"{(m, n, k)} pads {pads}: " + "; ".join(problems))
    assert not wrong, "\n".join(wrong)


def test_a_column_major_d_is_stored_without_a_swap(pingpong):
    """gemm(a, b, d) with d the transposed view of a padded (N, M) matrix: the column-major epilogue on its own."""
    wrong = []
    for m, n, k, pads in [(136, 264, 520, (8, 16, 8)), (1000, 8, 72, (8, 8, 64)), (8, 1000, 1000, (16, 8, 8))]:
        a, b, _, _ = strides.operands(m, n, k, COMBOS[2], pads)
        dt, buffer = strides.view(n, m, pads[2], 0, torch.bfloat16, "nan")
        pingpong.gemm(a, b, dt.t())
        torch.cuda.synchronize()
        problem = strides.judge(dt.t(), buffer, a, b)
        if problem:
            wrong.append(f"{(m, n, k)} pads {pads}: {problem}")
    assert not wrong, "\n".join(wrong)


def test_cutecourse_gemm_runs_a_measured_swap_ab_winner(monkeypatch, tmp_path):
    """A table whose winner for 16 × 4096 × 4096's class is swap-AB: explain names it, and the call is right."""
    monkeypatch.setattr(winners, "TABLE", tmp_path / "winners.json")
    monkeypatch.setenv("CUTECOURSE_CACHE", str(tmp_path))
    dispatch.forget_plans()
    config = dict(CONFIGS["64x16"])
    entry = {"step": "gemm11_pingpong", "config": config, "shape": [16, 4096, 4096], "raced": 1, "ms": 1.0,
             "ratio": 1.0, "baseline_ms": 1.0, "gpu": "test", "date": "2026-12-06"}
    major, minor = torch.cuda.get_device_capability()
    winners.store(f"sm_{major * 10 + minor}", "bfloat16", {winners.shape_class(16, 4096, 4096): entry})
    a, b, out, buffer = strides.operands(13, 4000, 4000, (torch.bfloat16, torch.bfloat16, "k", "k"), (0, 8, 8))
    choice = cutecourse.gemm.explain(a, b, out)
    assert choice.step == "gemm11_pingpong" and choice.config.swap_ab and "swap_ab=True" in " ".join(choice.reasons)
    cutecourse.gemm(a, b, out)
    torch.cuda.synchronize()
    assert strides.judge(out, buffer, a, b) is None
    dispatch.forget_plans()


#: what is broken -> (the edit of step 11, the Config's splits, whether the check runs the fused epilogue): each must
#: make its check above fail.
BROKEN = {
    "C and aux read row-major through their transposed views": (
        ("epilogue.tensors(fused, pSrc, pBias, pAux, m, n, ops.c_major)",
         "epilogue.tensors(fused, pSrc, pBias, pAux, m, n)"), 1, True),
    "the partials stored row-major into the column-major workspace": (
        ("splitk.workspace(pC, m, n, config.splits, ops.c_major)", "splitk.workspace(pC, m, n, config.splits)"), 3,
        False),
}


@pytest.mark.parametrize("what", list(BROKEN))
def test_a_broken_swap_fails_the_check(what, tmp_path):
    strides.runnable("gemm11_pingpong")
    edit, splits, fused = BROKEN[what]
    broken = gemm_gpu.variant("gemm11_pingpong", [edit], tmp_path)
    config = broken.Config(**CONFIGS["64x16"], splits=splits)
    # M in whole vectors: a row-major workspace of Dᵀ's partials then has 16-byte aligned rows, so the TMA store
    # writes it (into the wrong places) rather than ending this process's CUDA context and the tests after it.
    cases = [(m, n, max(k, 200), pads) for m, n, k, pads in small_m_shapes(60, 3, whole_m=True)]
    if not fused:
        assert swap_failures(broken.gemm, config, COMBOS[2], cases), f"swap-AB with {what} passed: it cannot fail"
        return
    epi = epilogue.Epilogue("gelu_tanh", bias="n", aux=True)
    found = []
    for m, n, k, pads in cases:
        a, b, d, buffer = strides.operands(m, n, k, COMBOS[2], pads)
        found += epilogue_gpu.fused_problems(lambda *args, **kw: broken.gemm(*args, config, **kw), a, b, d, buffer,
                                             epi)
    assert found, f"swap-AB with {what} passed the check: it cannot fail"
