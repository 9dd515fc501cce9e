"""The decode GEMV (`cutecourse.kernels.gemm.gemv`) without a GPU: its PTX streams W with 16-byte loads and adds each
output's lanes with butterfly shuffles, with no Tensor Core or shared-memory instruction; the rows of x it is compiled
for follow M; what it refuses names the fix; and the dispatcher's rule 7 picks it where the model decides.
tests/gpu/test_gemv_gpu.py runs it."""

import pytest

pytest.importorskip("cutlass")
torch = pytest.importorskip("torch")

from cutlass.cute.runtime import make_fake_stream  # noqa: E402

import cutecourse  # noqa: E402
from cutecourse import dispatch  # noqa: E402
from cutecourse.kernels import ptx  # noqa: E402
from cutecourse.kernels.gemm import epilogue, gemv, launcher  # noqa: E402
from cutecourse.kernels.gemm.operands import traits  # noqa: E402


def operands(m, n, k, ab=torch.bfloat16, c=torch.bfloat16, b_major="k"):
    b = torch.empty(n, k, dtype=ab).t() if b_major == "k" else torch.empty(k, n, dtype=ab)
    return torch.empty(m, k, dtype=ab), b, torch.empty(m, n, dtype=c)


def compile_ptx(config, a, b, c, arch, fused=None):
    ops = traits(a, b, c, step="gemv", vector=True)
    config = gemv.rows_for(config, a.shape[0])
    return ptx.ptx_of(lambda options: launcher.compile_for(gemv.host, config, ops, a, b, c, make_fake_stream(),
                                                             options=options, fused=fused, bias=torch.empty(
                                                                 b.shape[1], dtype=torch.float32)), arch)


@pytest.mark.parametrize("arch, ab, c, m", [("sm_80", torch.float16, torch.float32, 1),
                                            ("sm_90a", torch.bfloat16, torch.bfloat16, 3)])
def test_the_ptx_streams_w_in_16_byte_loads_and_reduces_by_shuffles(arch, ab, c, m):
    config = gemv.Config()
    code = compile_ptx(config, *operands(m, 136, 4096, ab, c), arch)
    rows_m = gemv.rows_for(config, m).rows_m
    outputs = rows_m * config.rows_per_warp
    assert ptx.count(code, "shfl.sync.bfly") == 5 * outputs  # log2(32) steps for each of a warp's outputs
    # The K loop, unrolled twice, and its remainder: each pass loads each of the warp's W rows and x's rows once.
    assert ptx.count(code, "ld.global.v4") == 3 * (config.rows_per_warp + rows_m)
    assert ptx.count(code, "fma.rn.f32") == 3 * outputs * 8  # 8 products a 16-byte vector
    for absent in ("mma", "wgmma", "ldmatrix", "ld.shared", "st.shared", "bar.sync", "cp.async"):
        assert ptx.count(code, absent) == 0, absent


def test_the_fused_epilogue_is_traced_once_per_output():
    fused = epilogue.Fused(epilogue.Epilogue("gelu_tanh", bias="n"), bias_dtype="float32")
    code = compile_ptx(gemv.Config(rows_m=1), *operands(1, 136, 512), "sm_90a", fused)
    assert ptx.count(code, "tanh.approx.f32") == gemv.Config().rows_per_warp
    assert ptx.count(code, "ld.global.b32") == gemv.Config().rows_per_warp  # the float32 bias, one value an output


def test_the_rows_compiled_for_follow_m_and_more_are_refused():
    assert [gemv.rows_for(gemv.Config(), m).rows_m for m in (1, 2, 3, 4, 5, 8)] == [1, 2, 4, 4, 8, 8]
    assert gemv.rows_for(gemv.Config(rows_m=8), 3).rows_m == 8
    with pytest.raises(ValueError, match=r"a has M=9 rows; gemv computes at most 8.*use cutecourse.gemm"):
        gemv.rows_for(gemv.Config(), 9)
    with pytest.raises(ValueError, match=r"M=3 rows; gemv computes at most 2 \(Config\(rows_m=2\)\)"):
        gemv.gemm(*operands(3, 64, 64), gemv.Config(rows_m=2))
    with pytest.raises(ValueError, match=r"rows_m must be 0 .* or one of \(1, 2, 4, 8\)"):
        gemv.Config(rows_m=3)
    with pytest.raises(ValueError, match="warps must be 1 to 32"):
        gemv.Config(warps=33)


def test_an_n_major_b_is_refused_naming_the_k_major_one():
    """Refused as the operand checks found its major: also a b of one row (K = 1), which could be either, and which
    they take N-major when N holds whole vectors and K does not."""
    for m, k in ((1, 64), (8, 1)):
        a, b, c = operands(m, 64, k, b_major="n")
        if k == 1:
            a = torch.empty(k, m, dtype=a.dtype).t()  # M-major: K = 1 holds no whole vector
        with pytest.raises(ValueError, match=r"gemv reads b K-major, b = W.t\(\).*b = b.t\(\).contiguous\(\).t\(\)"):
            compile_ptx(gemv.Config(), a, b, c, "sm_90a")
    with pytest.raises(ValueError, match=r"rows_m is set from M at the call"):
        ops = traits(*operands(1, 64, 64), step="gemv", vector=True)
        launcher.compile_for(gemv.host, gemv.Config(), ops, *operands(1, 64, 64), make_fake_stream())


@pytest.fixture
def no_measured_winners(monkeypatch, tmp_path):
    from cutecourse.kernels.gemm import winners

    monkeypatch.setattr(winners, "TABLE", tmp_path / "winners.json")


@pytest.mark.parametrize("arch", [80, 89, 90, 120])
def test_the_model_sends_a_few_rows_against_k_major_weights_to_the_gemv(no_measured_winners, arch):
    for m in (1, dispatch.GEMV_ROWS):
        choice = cutecourse.gemm.explain(*operands(m, 4096, 4096)[:2], arch=arch, sms=132)
        assert choice.step == "gemv" and any(r.startswith(f"M={m} ≤ 4 rows and b K-major") for r in choice.reasons)
    others = [operands(dispatch.GEMV_ROWS + 1, 4096, 4096), operands(1, 4096, 4096, b_major="n"),
              operands(1, 4096, 4099)]  # more rows; W N-major; K no whole vectors (step 2)
    for a, b, _ in others:
        assert cutecourse.gemm.explain(a, b, arch=arch, sms=132).step != "gemv"


def test_a_measured_winner_overrides_the_gemv_rule(monkeypatch):
    from cutecourse.kernels.gemm import winners

    entry = {"step": "gemm11_pingpong", "config": {"tile_m": 64}, "shape": [1, 4096, 4096], "raced": 10, "ms": 0.02,
             "ratio": 1.0, "gpu": "H", "date": "2026-12-06"}
    monkeypatch.setattr(winners, "lookup", lambda arch, dtype, m, n, k, path=None: entry)
    choice = cutecourse.gemm.explain(*operands(1, 4096, 4096)[:2], arch=90, sms=132)
    assert choice.step == "gemm11_pingpong" and choice.config.tile_m == 64
    assert cutecourse.gemm.explain(*operands(1, 4096, 4096)[:2], arch=80).step == "gemv"  # the table is sm_90's
