"""Step 11's swap-AB on a CPU (``Config(swap_ab=True)``): the Config's tiles along a small M, the checks that take a
column-major D (only where the step stores one), the epilogue transposed, the plan the launcher makes for
(b.t(), a.t(), d.t()), and, compiled for sm_90a without a GPU, the PTX: a wgmma whose N is the tokens' tile,
``stmatrix.trans`` into the column-major sC, and a reduction that loads and stores along M.
tests/gpu/test_swap_ab_gpu.py runs them."""

import pytest

pytest.importorskip("cutlass")
torch = pytest.importorskip("torch")

from cutlass.cute.runtime import make_fake_stream  # noqa: E402

from cutecourse.kernels import launch, ptx  # noqa: E402
from cutecourse.kernels.gemm import epilogue, gemm11_pingpong, launcher, operands, splitk  # noqa: E402

ARCH = "sm_90a"
Config = gemm11_pingpong.Config
SWAP = dict(swap_ab=True, tile_m=64, tile_n=16, epi_n=16, cluster_m=1)


def test_the_config_takes_tiles_of_16_tokens_and_refuses_what_wgmma_or_the_multicast_cannot_split():
    for tile_n in (16, 32, 48, 64, 256):
        Config(tile_m=64, tile_n=tile_n, epi_n=16, cluster_m=1)
    for tile_n in (8, 24, 40, 272):  # not one wgmma N, or more than the largest
        with pytest.raises(ValueError, match="tile_n a multiple of 16 up to 256 and of epi_n"):
            Config(tile_n=tile_n, epi_n=8, cluster_m=1)
    with pytest.raises(ValueError, match="tile_n / cluster_m rows of B, which must be a multiple of 8"):
        Config(tile_n=16, epi_n=16, cluster_m=4)
    with pytest.raises(ValueError, match=r"^swap_ab='yes': True \(compute Cᵀ = Bᵀ·Aᵀ, for a small M\) or False"):
        Config(swap_ab="yes")


def test_a_column_major_output_is_taken_only_where_the_step_stores_one():
    a, b = torch.empty(24, 64, dtype=torch.bfloat16), torch.empty(64, 40, dtype=torch.bfloat16)
    d = torch.empty(40 + 8, 24, dtype=torch.bfloat16)[:40].t()  # column-major (24, 40), leading dimension 24
    with pytest.raises(ValueError, match=r"pass a row-major output \(its leading dimension at least N\): d = "):
        operands.traits(a, b, d, step="gemm10_multicast", vector=True, out="d")
    ops = operands.traits(a, b, d, step="gemm11_pingpong", vector=True, out="d", column_major_out=True)
    assert ops.c_major == "m" and operands.leading_dims(ops, a, b, d)[2] == 24
    row = torch.empty(24, 40, dtype=torch.bfloat16)
    assert operands.traits(a, b, row, step="gemm11_pingpong", vector=True, column_major_out=True).c_major == "n"
    # One token: dᵀ is (N, 1), both majors by its strides; the one whose extent holds 16-byte vectors is taken.
    x = torch.empty(1, 64, dtype=torch.bfloat16)
    w = torch.empty(40, 64, dtype=torch.bfloat16)
    y = torch.empty(1, 40)
    swapped = operands.traits(w, x.t(), y.t(), step="gemm11_pingpong", vector=True, column_major_out=True)
    assert (swapped.a_major, swapped.b_major, swapped.c_major) == ("k", "k", "m")
    with pytest.raises(ValueError, match=r"d's contiguous extent is M=20 elements, not a multiple of 8"):
        operands.traits(torch.empty(20, 64, dtype=torch.bfloat16), b, torch.empty(40, 20, dtype=torch.bfloat16).t(),
                        step="gemm11_pingpong", vector=True, out="d", column_major_out=True)


def test_the_transposed_epilogue_exchanges_the_bias_modes_and_checks_c_in_d_s_major():
    fused = epilogue.Fused(epilogue.Epilogue("relu", bias="n", aux=True), source=True, bias_dtype="float32")
    assert epilogue.transposed(fused) == epilogue.Fused(epilogue.Epilogue("relu", bias="m", aux=True), source=True,
                                                        bias_dtype="float32")
    assert epilogue.transposed(epilogue.transposed(fused)) == fused and epilogue.transposed(epilogue.PLAIN) == \
        epilogue.PLAIN
    d = torch.empty(16, 8).t()  # column-major (8, 16)
    with pytest.raises(ValueError, match=r"D is column-major, so pass a column-major tensor: c = c.t\(\)"):
        epilogue.plan(None, 1.0, 2.0, torch.empty(8, 16), None, None, d, "m")
    assert epilogue.plan(None, 1.0, 2.0, torch.empty(16, 8).t(), None, None, d, "m").source


@pytest.fixture
def cpu_launcher(monkeypatch):
    """Step 11's launcher on CPU tensors, the GPU's own checks stubbed (the operand checks themselves run)."""
    monkeypatch.setattr(operands, "check", lambda a, b, c, **kw: operands.traits(
        a, b, c, step="x", vector=True, column_major_out=kw.get("column_major_out", False)))
    monkeypatch.setattr(operands, "capability", lambda device: 90)
    monkeypatch.setattr(launch, "current_stream", lambda *args: make_fake_stream())
    return splitk.Launcher(gemm11_pingpong.host, Config, vector=True, min_cc=90, epilogue=True, fp8=True,
                           column_major_out=True)


def test_the_swapped_plan_is_made_for_the_transposed_views_and_keeps_the_call_s_epilogue(cpu_launcher):
    x, w = torch.empty(13, 1000, dtype=torch.bfloat16), torch.empty(136, 1000, dtype=torch.bfloat16)
    d = torch.empty(13, 136 + 8, dtype=torch.bfloat16)[:, :136]  # row-major, leading dimension 144
    bias = torch.empty(136, dtype=torch.bfloat16)
    plan = cpu_launcher.plan(x, w.t(), d, Config(**SWAP), epilogue.Epilogue("gelu_tanh", bias="n"), bias=bias)
    assert plan.swapped and plan.fused.epilogue.bias == "m"  # the bias along N is along Dᵀ's M
    assert plan.extents == (136, 13, 1000, 1000, 1000, 144)  # M, N, K of Dᵀ = W·xᵀ; W's, x's and D's strides
    (ops, config, fused), = cpu_launcher.compiled
    assert (ops.a_major, ops.b_major, ops.c_major, config.swap_ab) == ("k", "k", "m", True)
    unswapped = cpu_launcher.plan(x, w.t(), d, Config(tile_n=16, epi_n=16, cluster_m=1))
    assert not unswapped.swapped and unswapped.extents == (13, 136, 1000, 1000, 1000, 144)
    split = cpu_launcher.plan(x, w.t(), d, Config(**SWAP, splits=3))
    assert split.swapped and [ops.c_major for ops, _ in cpu_launcher.partials] == ["m"]  # a column-major workspace


def test_the_launch_passes_b_s_address_first_for_a_swapped_plan(monkeypatch):
    monkeypatch.setattr(launch, "raw_stream", lambda device: 0)
    called = []
    gemm = launcher.Launcher(gemm11_pingpong.host, Config, vector=True, min_cc=90)
    a, b = torch.empty(2, 8), torch.empty(8, 4)
    d = torch.empty(2, 4)
    gemm.launch(launcher.Plan(lambda *args: called.append(args[:3]), None, (), True), a, b, d)
    gemm.launch(launcher.Plan(lambda *args: called.append(args[:3]), None, (), False), a, b, d)
    assert called == [(b.data_ptr(), a.data_ptr(), d.data_ptr()), (a.data_ptr(), b.data_ptr(), d.data_ptr())]


def swapped_ptx(config, c_dtype, m=13, n=4096, k=1000, swapped=True):
    """Step 11's PTX for y = x @ w.t() of `m` tokens, compiled as the swapped launcher compiles it (Dᵀ = W·xᵀ), or
    as it is (not `swapped`)."""
    x, w = torch.empty(m, k, dtype=torch.bfloat16), torch.empty(n, k, dtype=torch.bfloat16)
    d = torch.empty(m, n, dtype=c_dtype)
    a, b, c = (w, x.t(), d.t()) if swapped else (x, w.t(), d)
    ops = operands.traits(a, b, c, step="gemm11_pingpong", vector=True, column_major_out=True)
    return ptx.compiled_with_ptx(lambda o: launcher.compile_for(gemm11_pingpong.host, config, ops, a, b, c,
                                                                make_fake_stream(), options=o), ARCH)[1]


def test_the_swapped_kernel_multiplies_16_tokens_a_wgmma_and_stores_through_stmatrix_trans():
    code = swapped_ptx(Config(**SWAP), torch.bfloat16)
    census = ptx.census(code)
    assert set(op for op in census if op.startswith("wgmma.mma_async")) == {
        "wgmma.mma_async.sync.aligned.m64n16k16.f32.bf16.bf16"}
    stores = {op for op in census if op.startswith("stmatrix")}
    assert stores and all(".trans" in op for op in stores), stores
    assert ptx.count(code, "cp.async.bulk.tensor.2d.global.shared::cta") > 0  # the TMA store of each subtile
    plain = ptx.census(swapped_ptx(Config(tile_n=16, epi_n=16, cluster_m=1), torch.bfloat16, swapped=False))
    assert {op for op in plain if op.startswith("stmatrix")} and not any(".trans" in op for op in plain)


def test_the_column_major_reduction_loads_and_stores_16_bytes_along_m():
    m, n = 136, 13  # Dᵀ of 13 tokens: M contiguous, N ragged
    splits = 3
    d = torch.empty(n, m, dtype=torch.bfloat16).t()
    ops = operands.traits(torch.empty(m, 64, dtype=torch.bfloat16), torch.empty(n, 64, dtype=torch.bfloat16).t(),
                          d, step="gemm11_pingpong", vector=True, column_major_out=True)
    assert ops.c_major == "m"
    for stream_k in (None, Config(**SWAP, stream_k=True, splits=splits)):  # split-K's, and stream-K's pieces
        code = ptx.compiled_with_ptx(lambda o: splitk.compile_reduction(ops, splits, epilogue.PLAIN, d,
                                                                        make_fake_stream(), options=o,
                                                                        stream_k=stream_k), ARCH)[1]
        census = ptx.census(code)
        assert sum(c for op, c in census.items() if op.startswith("ld.global.v4")) == splits * 4, census
        assert sum(c for op, c in census.items() if op.startswith("st.global.v2")) == 4, census  # 4 bf16 along M
