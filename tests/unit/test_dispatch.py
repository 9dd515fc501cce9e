"""cutecourse.gemm's dispatch rules on a CPU: `explain` on CPU tensors with a named arch says which step a GPU of that
arch would run and why, or refuses naming torch's fallback (tests/gpu/test_dispatch_gpu.py runs the choices). These
are the model's rules, with no table of measured winners (tests/unit/test_winners.py tests the table)."""

import pytest

pytest.importorskip("cutlass")
torch = pytest.importorskip("torch")

import cutecourse  # noqa: E402
from cutecourse import dispatch  # noqa: E402
from cutecourse.kernels.gemm import epilogue, gemm05_swizzle, gemm10_multicast, gemm11_pingpong  # noqa: E402

explain = cutecourse.gemm.explain


@pytest.fixture(autouse=True)
def no_measured_winners(monkeypatch, tmp_path):
    """The model's rules: no shipped table of measured winners (tests/unit/test_winners.py tests the table)."""
    from cutecourse.kernels.gemm import winners

    monkeypatch.setattr(winners, "TABLE", tmp_path / "winners.json")


def ops(m, n, k, dtype=torch.bfloat16, majors=("k", "n")):
    a = torch.empty(m, k, dtype=dtype) if majors[0] == "k" else torch.empty(k, m, dtype=dtype).t()
    b = torch.empty(n, k, dtype=dtype).t() if majors[1] == "k" else torch.empty(k, n, dtype=dtype)
    return a, b


def test_the_package_names_gemm_and_tune_lazily_and_gemm_carries_explain():
    assert cutecourse.gemm is dispatch.gemm and cutecourse.gemm.explain is dispatch.explain
    from cutecourse import tuning

    assert cutecourse.tune is tuning.tune
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        cutecourse.nope  # noqa: B018


@pytest.mark.parametrize("arch, step", [(90, "gemm10_multicast"), (80, "gemm05_swizzle"), (86, "gemm05_swizzle"),
                                        (89, "gemm05_swizzle"), (100, "gemm05_swizzle"), (120, "gemm05_swizzle")])
def test_the_arch_picks_the_path(arch, step):
    choice = explain(*ops(4096, 4096, 4096), arch=arch)
    assert choice.step == step and not choice.tuned
    if arch in (86, 89, 120):  # 99 KiB of shared memory per CTA: the default's 144 KiB do not fit
        assert choice.config == gemm05_swizzle.Config(tile_m=128, warps_m=2, stages=3)
        assert "allows 99 KiB of shared memory per CTA: the default's 144 KiB do not fit, 96 KiB do" in str(choice)
    else:
        assert choice.config == type(choice.config)()  # the step's default
    assert f"sm_{arch}" in str(choice)


def test_past_sm_90_the_reason_says_wgmma_is_sm_90a_only():
    assert any("wgmma is sm_90a only" in r for r in explain(*ops(256, 256, 256), arch=100).reasons)


@pytest.mark.parametrize("m, n, sms, step", [
    (4096, 4096, 132, "gemm10_multicast"),  # 32 x 16 = 512 tiles
    (128 * 12, 256 * 11, 132, "gemm10_multicast"),  # exactly 132 tiles: a full wave
    (128 * 131, 256, 132, "gemm11_pingpong"),  # 131 tiles
    (128 * 11, 256 * 12 - 8, 132, "gemm10_multicast"),  # a ragged N still counts its last tile: 11 x 12 = 132
    (1024, 1024, 132, "gemm11_pingpong"),
    (1024, 1024, 16, "gemm10_multicast"),  # 32 tiles fill a 16-SM GPU
])
def test_on_sm_90_fewer_cooperative_tiles_than_sms_go_to_pingpong(m, n, sms, step):
    choice = explain(*ops(m, n, 512), arch=90, sms=sms)
    assert choice.step == step, choice
    assert any(f"{sms} SMs" in r for r in choice.reasons)


def test_fp8_goes_to_the_hopper_steps_with_their_fp8_config():
    a, b = ops(4096, 4096, 4096, torch.float8_e4m3fn, majors=("k", "k"))
    choice = explain(a, b, arch=90)
    assert choice.step == "gemm10_multicast" and choice.config == gemm10_multicast.FP8_CONFIG
    small = explain(*ops(256, 256, 256, torch.float8_e5m2, majors=("k", "k")), arch=90)
    assert small.step == "gemm11_pingpong" and small.config == gemm11_pingpong.FP8_CONFIG


@pytest.mark.parametrize("shape, majors", [((4096, 4096, 4095), ("k", "n")), ((4096, 4095, 4096), ("k", "n")),
                                           ((4095, 4096, 4096), ("m", "k")), ((100, 8, 7), ("k", "k"))])
def test_without_16_byte_vectors_step_2_takes_any_shape(shape, majors):
    for arch in (80, 90):
        choice = explain(*ops(*shape, majors=majors), arch=arch)
        assert choice.step == "gemm02_smem" and "no 16-byte vectors" in choice.reasons[-1], choice


def test_a_misaligned_base_rules_out_vectors_too():
    a = torch.empty(64 * 64 + 1, dtype=torch.float16)[1:].view(64, 64)  # 2 bytes past alignment
    b = torch.empty(64, 64, dtype=torch.float16)
    choice = explain(a, b, arch=90)
    assert choice.step == "gemm02_smem" and "a starts 2 bytes past a 16-byte boundary; gemm02_smem" in str(choice)


def test_an_epilogue_on_operands_no_fusing_step_takes_runs_step_2_then_torchs_epilogue():
    a, b = ops(512, 512, 511)
    choice = explain(a, b, epilogue=epilogue.Epilogue("relu"), arch=90)
    assert choice.step == "gemm02_smem"
    assert choice.reasons[-1] == ("no 16-byte vectors: a's contiguous extent is K=511 elements, not a multiple of 8 "
                                  "elements; gemm02_smem loads scalars, any shape, stride and alignment, and stores "
                                  "a @ b only: its float32 product goes to a buffer and torch computes the epilogue "
                                  "from it")
    assert explain(*ops(512, 512, 512), epilogue=epilogue.Epilogue("relu"), arch=90).step == "gemm11_pingpong"


@pytest.mark.parametrize("make, kwargs, match", [
    (lambda: ops(64, 64, 64), dict(arch=75), r"sm_75; every GEMM step needs sm_80 or newer.*torch.matmul\(a, b\)"),
    (lambda: ops(64, 64, 64), dict(arch=70), r"sm_70.*torch.matmul"),
    (lambda: ops(64, 64, 64, torch.float32), dict(arch=90), r"torch.float32, which no GEMM step takes.*torch.matmul"),
    (lambda: ops(64, 64, 64, torch.int8), dict(arch=90), r"torch.int8, which no GEMM step takes"),
    (lambda: ops(64, 64, 64, torch.float8_e4m3fn, ("k", "k")), dict(arch=89),
     r"wgmma, which only sm_90 has, and this is sm_89: use torch._scaled_mm"),
    (lambda: ops(64, 64, 64, torch.float8_e4m3fn, ("k", "n")), dict(arch=90),
     r"fp8 operands K-major only.*or use torch._scaled_mm"),
    (lambda: ops(64, 64, 64), dict(), r"a is on cpu, so no GPU says which arch.*arch=90"),
    (lambda: ops(64, 64, 64), dict(arch="90"), r"arch='90': give the compute capability as an int"),
    (lambda: ops(64, 64, 64), dict(arch=90, sms=0), r"sms=0: give the GPU's SM count"),
    (lambda: (torch.empty(64, 32, dtype=torch.half), torch.empty(16, 64, dtype=torch.half)), dict(arch=90),
     r"a's columns \(K=32\) must equal b's rows"),
    (lambda: (torch.empty(4, 4, 4, dtype=torch.half), torch.empty(4, 4, dtype=torch.half)), dict(arch=90),
     r"a must be a 2-D torch.Tensor, got shape \(4, 4, 4\)"),
    (lambda: ([[1.0]], torch.empty(4, 4)), dict(arch=90), r"a is \[\[1.0\]\] \(list\); pass a 2-D torch.Tensor"),
])
def test_where_no_step_fits_the_error_says_why_and_names_the_fallback(make, kwargs, match):
    with pytest.raises(ValueError, match=match):
        explain(*make(), **kwargs)


def test_a_config_names_its_step_and_is_checked_against_the_arch():
    a, b = ops(1024, 1024, 1024)
    choice = explain(a, b, arch=90, config=gemm10_multicast.Config(tile_n=128))
    assert choice.step == "gemm10_multicast" and choice.config.tile_n == 128
    assert explain(a, b, arch=80, config=gemm05_swizzle.Config(tile_k=32, stages=4)).step == "gemm05_swizzle"
    with pytest.raises(ValueError, match=r"gemm10_multicast.Config, which needs sm_90; this is sm_80"):
        explain(a, b, arch=80, config=gemm10_multicast.Config())
    with pytest.raises(ValueError, match=r"config=\{'tile_n': 128\}: pass a GEMM step's Config"):
        explain(a, b, arch=90, config={"tile_n": 128})
    # the step asked for cannot take it
    with pytest.raises(ValueError, match=r"K=60 elements, not a multiple of 8 elements"):
        explain(*ops(64, 64, 60), arch=90, config=gemm10_multicast.Config())


def test_gemm_refuses_cpu_tensors_and_says_what_to_do():
    with pytest.raises(ValueError, match=r"a is on cpu; cutecourse.gemm runs on the GPU: a = a.cuda\(\).*explain"):
        cutecourse.gemm(*ops(64, 64, 64))


def test_a_choice_prints_its_step_config_and_reasons():
    text = str(explain(*ops(1024, 1024, 1024), arch=90))
    assert text.splitlines()[0].startswith("gemm11_pingpong  Config(tile_m=128, tile_n=128")
    assert "  - 32 tiles of 128×256 < 132 SMs" in text


def test_a_k_tail_is_named_and_needs_no_other_step():
    choice = explain(*ops(4096, 4096, 4136), arch=90)
    assert choice.step == "gemm10_multicast"
    assert choice.reasons[-1] == ("K=4136 = 64 × 64 + 40: the last k-tile is partial, and the step fills the rest of "
                                  "it with zeros")
    assert not any("k-tile" in r for r in explain(*ops(4096, 4096, 4096), arch=90).reasons)
    assert "K=104 = 1 × 64 + 40: the last k-tile is partial" in str(explain(*ops(256, 256, 104), arch=80))


@pytest.mark.parametrize("m, n, k, sms, splits, cluster", [
    (128, 6144, 4096, 132, 2, (1, 2)),  # 48 tiles of 128×128, 64 k-tiles: 132 // 48 = 2; one tile row pairs along N
    (1024, 1024, 16384, 132, 2, (2, 1)),  # 64 tiles, 256 k-tiles
    (128, 4096, 14336, 132, 4, (1, 2)),  # 32 tiles, 224 k-tiles
    (64, 64, 4096, 132, 8, (1, 1)),  # one tile: the cap of 8
    (128, 6144, 640, 132, 2, (1, 2)),  # 10 k-tiles: 2 splits of 5
    (136, 1024, 512, 132, 2, (2, 1)),  # 16 tiles, 8 k-tiles: 2 splits of 4, the least a split keeps
])
def test_on_sm_90_few_tiles_and_a_long_k_split_k(m, n, k, sms, splits, cluster):
    choice = explain(*ops(m, n, k), arch=90, sms=sms)
    assert choice.step == "gemm11_pingpong", choice
    assert (choice.config.splits, choice.config.cluster_m, choice.config.cluster_n) == (splits, *cluster), choice
    assert choice.config == gemm11_pingpong.Config(splits=splits, cluster_m=cluster[0], cluster_n=cluster[1])


@pytest.mark.parametrize("m, n, k, sms, why", [
    (256, 8192, 8192, 132, "128 tiles: no idle SM for a second split"),
    (1024, 1024, 16384, 64, "64 tiles fill a 64-SM GPU"),
    (128, 6144, 448, 132, "7 k-tiles: a second split would keep 3"),
    (1024, 1024, 1024, 100, "64 tiles on 100 SMs: 100 // 64 = 1"),
])
def test_split_k_needs_idle_sms_and_four_k_tiles_a_split(m, n, k, sms, why):
    choice = explain(*ops(m, n, k), arch=90, sms=sms)
    assert choice.step == "gemm11_pingpong" and choice.config == gemm11_pingpong.Config(), why
    assert not any("split-K" in r for r in choice.reasons), choice


def test_split_k_is_for_16_bit_operands_on_the_model_s_path_only(monkeypatch):
    small = explain(*ops(256, 256, 4096, torch.float8_e4m3fn, majors=("k", "k")), arch=90)
    assert small.config == gemm11_pingpong.FP8_CONFIG  # fp8: not split
    assert explain(*ops(4096, 4096, 4096), arch=90).step == "gemm10_multicast"  # a full wave
    from pathlib import Path

    from cutecourse.kernels.gemm import winners

    monkeypatch.setattr(winners, "TABLE", Path(winners.__file__).with_name("winners.json"))  # the shipped table
    measured = explain(*ops(128, 6144, 4096), arch=90, sms=132)
    assert measured.config.splits == 1 and any(r.startswith("measured:") for r in measured.reasons), measured


def test_the_split_k_reason_names_tiles_sms_k_tiles_and_shares():
    choice = explain(*ops(128, 6144, 4096), arch=90, sms=132)
    assert ("48 tiles of 128×128 on 132 SMs, 64 k-tiles of 64: split-K, 2 splits of 32 k-tiles keep 96 SMs busy "
            "(cluster 1×2); the float32 partial tiles go to a workspace, which a second kernel sums in order and runs "
            "the epilogue on") in choice.reasons
    uneven = explain(*ops(128, 6144, 4136), arch=90, sms=132)  # 65 k-tiles, the last partial
    assert "65 k-tiles of 64: split-K, 2 splits of 32 or 33 k-tiles" in str(uneven)
    assert uneven.reasons[-1].startswith("K=4136 = 64 × 64 + 40: the last k-tile is partial")
