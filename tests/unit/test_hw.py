"""cutecourse.hw: datasheet consistency, roofline and intensity formulas, the occupancy calculator's limits."""

from __future__ import annotations

import doctest
import importlib
import math

import pytest

from cutecourse import hw
from cutecourse.hw import banks, measured, pipeline, roofline, specs, tensor_cores, tile

from .test_light_imports import run_hidden

# `cutecourse.hw.occupancy` is the function (re-exported by the package); the module is reached by its full name.
occ_module = importlib.import_module("cutecourse.hw.occupancy")


@pytest.mark.parametrize("module", [hw, specs, roofline, occ_module, tensor_cores, measured, tile, banks, pipeline])
def test_docstring_examples(module):
    result = doctest.testmod(module)
    assert result.failed == 0 and result.attempted > 0


def test_spec_table_has_every_gpu_of_the_lesson_with_a_source():
    for name in ("V100 SXM2", "A100 SXM", "H100 SXM", "H200", "B200", "L4", "RTX 4090", "T4"):
        spec = hw.SPECS[name]
        assert "NVIDIA" in spec.sources and "(20" in spec.sources, name
        assert spec.regs_kib_per_sm == 256
    assert {n for n, s in hw.SPECS.items() if s.fp8_tflops is None} == {"V100 SXM2", "T4", "A100 SXM"}
    assert {n for n, s in hw.SPECS.items() if s.bf16_tflops is None} == {"V100 SXM2", "T4"}


def test_dense_tensor_peaks_are_consistent():
    for spec in hw.SPECS.values():
        if spec.bf16_tflops is not None:
            assert spec.bf16_tflops == spec.fp16_tflops  # same datapath for both 16-bit formats
            assert spec.tf32_tflops == pytest.approx(spec.fp16_tflops / 2, rel=0.01)
        if spec.fp8_tflops is not None:
            assert spec.fp8_tflops == pytest.approx(2 * spec.fp16_tflops, rel=0.01)


@pytest.mark.parametrize("name,cores_per_sm", [("A100 SXM", 64), ("H100 SXM", 128), ("L4", 128), ("RTX 4090", 128),
                                               ("V100 SXM2", 64), ("T4", 64)])
def test_fp32_peak_is_sms_times_cores_times_clock(name, cores_per_sm):
    s = hw.SPECS[name]
    assert 2 * s.sms * cores_per_sm * s.boost_mhz * 1e6 / 1e12 == pytest.approx(s.fp32_tflops, rel=0.02)


def test_tensor_core_peak_is_sms_times_flops_per_clock_times_its_own_clock():
    """The datasheets' Tensor Core peaks are rebuilt from the chip at `tensor_mhz`; on the H100/H200 that is 1830 MHz,
    and at the 1980 MHz boost (the FP32 peak's clock) the product would be 8% too high."""
    rebuilt = {n: s for n, s in hw.SPECS.items() if s.tensor_peak() is not None}
    assert set(hw.SPECS) - set(rebuilt) == {"B200"}  # its clock is not published
    for name, s in rebuilt.items():
        assert s.tensor_peak() == pytest.approx(s.fp16_tflops, rel=0.005), name
    h100 = hw.SPECS["H100 SXM"]
    assert (h100.tensor_mhz, h100.boost_mhz) == (1830, 1980)
    assert h100.sms * h100.tc_flops_per_clk * h100.boost_mhz / 1e6 == pytest.approx(1070.5, rel=1e-3)


def test_peak_rejects_an_unknown_format():
    with pytest.raises(ValueError, match="fmt='fp4'"):
        hw.SPECS["B200"].peak("fp4")


def test_generations_run_volta_to_blackwell_with_their_instructions():
    assert [g.name for g in hw.GENERATIONS] == ["Volta", "Turing", "Ampere", "Hopper", "Blackwell"]
    text = hw.generation_table()
    for needle in ("m8n8k4", "m16n8k8", "m16n8k16", "m64nNk16", "tcgen05", "cp.async", "TMA", "TMEM"):
        assert needle in text


def test_tensor_cores_per_sm_two_per_scheduler_on_volta_and_turing():
    assert {g.name: (g.per_sm, g.per_subpartition) for g in hw.GENERATIONS} == {
        "Volta": (8, 2), "Turing": (8, 2), "Ampere": (4, 1), "Hopper": (4, 1), "Blackwell": (4, 1)}
    assert "leader CTA" in hw.GENERATIONS[-1].issued_by


def test_gemm_intensity_of_a_square_fp16_gemm_is_n_over_3():
    for n in (64, 1000, 4096):
        assert hw.gemm_intensity(n, n, n, elem_bytes=2) == pytest.approx(n / 3)
    assert hw.gemm_bytes(10, 20, 30, 2, c_bytes=4, read_c=True) == (300 + 600) * 2 + 200 * 8


def test_cta_tile_intensity_does_not_depend_on_bk():
    assert hw.cta_tile_intensity(128, 128, 32) == hw.cta_tile_intensity(128, 128, 64) == 64.0
    assert hw.cta_tile_intensity(128, 256, 64, elem_bytes=1) == pytest.approx(2 * 128 * 256 / 384)


def test_multicast_in_a_cluster_divides_the_shared_tiles_traffic():
    assert hw.cta_tile_intensity(128, 256, 32, cluster=(2, 1)) == 128.0  # B shared by the 2 CTAs along M
    assert hw.cta_tile_intensity(128, 256, 32, cluster=(1, 2)) == pytest.approx(2 * 128 * 256 / ((64 + 256) * 2))
    assert hw.cta_tile_intensity(64, 64, 16, 1, cluster=(2, 2)) == 2 * hw.cta_tile_intensity(64, 64, 16, 1)
    for bad in ((0, 1), (2,), (1.5, 1), [2, 1]):
        with pytest.raises(ValueError, match="cluster="):
            hw.cta_tile_intensity(128, 128, 32, cluster=bad)


def test_measured_figures_say_where_and_how():
    assert measured.GPU == "NVIDIA H200" and measured.DATE == "2026-11-30"
    for key, m in measured.H200.items():
        assert m.value > 0 and m.unit and "RESULTS.md" in m.command, key
    assert measured.table().splitlines()[0] == "measured on an NVIDIA H200 (driver 580.159.04), 2026-11-30:"


def test_roofline_bends_at_the_ridge_point():
    ridge = hw.ridge_point(312.0, 2.039)
    assert hw.attainable_tflops(312.0, 2.039, ridge / 2) == pytest.approx(156.0)
    assert hw.attainable_tflops(312.0, 2.039, ridge * 2) == 312.0


@pytest.mark.parametrize("call,name", [
    (lambda: hw.gemm_flops(0, 4, 4), "m=0"), (lambda: hw.cta_tile_intensity(128, -1, 32), "bn=-1"),
    (lambda: hw.attainable_tflops(1, 0, 1), "bandwidth_tbs=0"),
    (lambda: hw.gemm_decomposition(64, 64, 64, cta=(128, 128, 32), warp=(48, 64, 32)), "cta=128, warp=48"),
])
def test_bad_inputs_raise_value_errors_that_name_the_argument(call, name):
    with pytest.raises(ValueError, match=name):
        call()


def test_gemm_decomposition_counts_the_mmas_of_the_whole_gemm():
    d = hw.gemm_decomposition(1000, 1000, 1000, cta=(128, 128, 32), warp=(64, 64, 32), instruction=(16, 8, 16))
    assert d["ctas"] == 8 * 8 and d["warps_per_cta"] == 4 and d["k_steps"] == 32
    assert d["total_mma"] * 2 * 16 * 8 * 16 >= hw.gemm_flops(1000, 1000, 1000)  # edge tiles pad the work


@pytest.mark.parametrize("threads,regs,smem,arch,blocks,binding", [
    (256, 32, 0, "sm_80", 8, ("threads", "registers")),      # 100% occupancy
    (128, 64, 0, "sm_80", 8, ("registers",)),                # 2048 regs/warp → 32 warps
    (256, 33, 0, "sm_80", 6, ("registers",)),                # 33 rounds up to 40 per thread
    (256, 32, 41 * 1024, "sm_80", 3, ("smem",)),             # 41 KiB + 1 KiB reserved → 164 // 42
    (32, 16, 0, "sm_90", 32, ("blocks",)),                   # tiny blocks hit the 32-block cap
    (1024, 32, 0, "sm_75", 1, ("threads",)),                 # Turing holds 1024 threads per SM
    (32, 32, 0, "sm_89", 24, ("blocks",)),                   # Ada: 24 blocks per SM
    (128, 168, 0, "sm_90", 3, ("registers",)),               # 168·32 = 5376 regs/warp → 12 warps
])
def test_occupancy_matches_the_cuda_calculator(threads, regs, smem, arch, blocks, binding):
    got = hw.occupancy(threads, regs, smem, arch)
    assert (got.blocks_per_sm, got.binding) == (blocks, binding), str(got)
    warps_per_sm = hw.ARCH_LIMITS[arch].max_threads_per_sm // 32
    assert got.occupancy == pytest.approx(blocks * math.ceil(threads / 32) / warps_per_sm)


@pytest.mark.parametrize("args,name", [((0, 32, 0), "threads_per_block=0"), ((2048, 32, 0), "threads_per_block=2048"),
                                       ((128, 256, 0), "regs_per_thread=256"), ((128, 32, 300_000), "smem_per_block"),
                                       ((128, 32, -1), "smem_per_block=-1"), ((128.0, 32, 0), "threads_per_block")])
def test_occupancy_rejects_impossible_blocks(args, name):
    with pytest.raises(ValueError, match=name):
        hw.occupancy(*args, "sm_90")


def test_occupancy_rejects_an_unknown_arch_and_accepts_custom_limits():
    with pytest.raises(ValueError, match="arch='sm_42'"):
        hw.occupancy(128, 32, 0, "sm_42")
    custom = hw.ArchLimits(**{**hw.ARCH_LIMITS["sm_90"].as_dict(), "max_blocks_per_sm": 2})
    assert hw.occupancy(128, 32, 0, custom).binding == ("blocks",)


@pytest.mark.parametrize("text, bits, access, expected", [
    ("(8,64):(64,1)", 16, banks.LDMATRIX_8x8, 8),
    ("S<3,3,3> o 0 o (8,64):(64,1)", 16, banks.LDMATRIX_8x8, 1),
    ("(8,64):(64,1)", 16, banks.WARP_128BIT_STORE, 4),
    ("(8,64):(1,8)", 16, banks.WARP_128BIT_STORE, 32),
    ("(8,32):(32,1)", 32, banks.LDMATRIX_8x8, 8),
    ("(8,32):(33,1)", 32, banks.LDMATRIX_8x8, 4),  # padding one word: row r covers banks r..r+3, so bank 3 is 4-way
    ("(32,32):(32,1)", 32, [[(r, 0) for r in range(32)]], 32),  # a warp reading one column: the classic 32-way
    ("(32,32):(33,1)", 32, [[(r, 0) for r in range(32)]], 1),   # padded: conflict-free
    ("(32,32):(32,1)", 32, [[(0, c) for c in range(32)]], 1),   # one row: conflict-free
    ("(32,32):(32,1)", 32, [[(0, 0)] * 32], 1),                 # broadcast: one word
])
def test_wavefronts_follow_the_bank_model(text, bits, access, expected):
    assert banks.wavefronts(text, bits, access) == expected


def test_wavefronts_rejects_a_tile_too_small_for_the_access():
    with pytest.raises(ValueError, match="wavefronts: ldmatrix 8x8 .* needs a tile of at least 8 rows"):
        banks.wavefronts("(4,64):(64,1)", 16, banks.LDMATRIX_8x8)


def test_the_models_load_without_the_pictures():
    out = run_hidden("""
        import sys
        import cutecourse.hw.banks, cutecourse.hw.pipeline
        drawing = sorted(m for m in sys.modules if m.startswith("cutecourse.viz"))
        assert not drawing, drawing
    """)
    assert out.returncode == 0, out.stderr


def test_spec_for_finds_the_datasheet_row_of_torch_device_names():
    assert specs.spec_for("NVIDIA H100 80GB HBM3").name == "H100 SXM"
    assert specs.spec_for("NVIDIA A100-SXM4-80GB").name == "A100 SXM"
    assert specs.spec_for("NVIDIA L4").name == "L4" and specs.spec_for("NVIDIA B200").name == "B200"
    assert specs.spec_for("Tesla V100-SXM2-32GB").name == "V100 SXM2"
    assert specs.spec_for("Some Future GPU") is None
    # another model that shares a word or a prefix, or another form factor of the same chip, has no row
    for other in ("NVIDIA GeForce RTX 3090", "NVIDIA L40S", "NVIDIA H100 PCIe", "NVIDIA H100 NVL",
                  "NVIDIA A100-PCIE-40GB", "NVIDIA GH200 480GB"):
        assert specs.spec_for(other) is None, other
