"""Datasheet figures of the GPUs the course talks about, each with its source.

All Tensor Core figures are **dense** (NVIDIA's datasheets print the 2:4-sparse figure, twice as large, with an
asterisk; we halve it). Formats a GPU's Tensor Cores do not support are ``None``. Tensor Core FLOP/s are with FP32
accumulation (for FP8 too, where the vendor distinguishes).

>>> SPECS["A100 SXM"].fp16_tflops
312.0
>>> SPECS["A100 SXM"].fp8_tflops is None
True
"""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class GPUSpec:
    """One GPU: its chip resources and its vendor peaks.

    Units: clocks in MHz, smem and register file in KiB per SM, bandwidth in TB/s, peaks in TFLOP/s.
    ``smem_kib_per_sm`` is the largest shared-memory carve-out of one SM; ``sources`` names the documents.

    The two peaks assume different clocks. FP32 is ``sms × FP32 lanes × 2 × boost_mhz``. The Tensor Core peaks are
    ``sms × tc_flops_per_clk × tensor_mhz``, where ``tc_flops_per_clk`` is one SM's dense FP16 FLOPs per clock with
    FP32 accumulation; on the H100 and H200 the vendor computes them at 1830 MHz, not at the 1980 MHz boost.
    """

    name: str
    arch: str  # the compile target, e.g. "sm_90"
    sms: int
    boost_mhz: int | None
    smem_kib_per_sm: int
    regs_kib_per_sm: int
    bandwidth_tbs: float
    fp32_tflops: float
    tf32_tflops: float | None
    fp16_tflops: float | None
    bf16_tflops: float | None
    fp8_tflops: float | None
    sources: str
    note: str = ""
    tensor_mhz: int | None = None  # the clock the Tensor Core peaks assume (None: not published)
    tc_flops_per_clk: int | None = None  # dense FP16 FLOPs per SM per clock, FP32 accumulate (None: not published)

    def tensor_peak(self) -> float | None:
        """The FP16 Tensor Core peak rebuilt from the chip, in TFLOP/s: SMs × FLOPs per SM per clock × clock.

        >>> round(SPECS["H100 SXM"].tensor_peak(), 1)  # 132 × 4096 × 1830 MHz; the datasheet says 989.5
        989.4
        """
        if self.tensor_mhz is None or self.tc_flops_per_clk is None:
            return None
        return self.sms * self.tc_flops_per_clk * self.tensor_mhz / 1e6

    def peak(self, fmt: str) -> float | None:
        """Peak TFLOP/s of `fmt` ('fp32', 'tf32', 'fp16', 'bf16', 'fp8'); None where unsupported.

        >>> SPECS["H100 SXM"].peak("fp8")
        1979.0
        """
        if fmt not in ("fp32", "tf32", "fp16", "bf16", "fp8"):
            raise ValueError(f"fmt={fmt!r} is not a format here; use one of 'fp32', 'tf32', 'fp16', 'bf16', 'fp8'")
        return getattr(self, f"{fmt}_tflops")

    def ridge(self, fmt: str = "fp16") -> float | None:
        """The roofline's ridge point for `fmt`: peak FLOP/s ÷ bandwidth, in FLOP per byte."""
        peak = self.peak(fmt)
        return None if peak is None else peak / self.bandwidth_tbs


_REGS = 256  # 65536 32-bit registers per SM on every arch since Kepler (GK110 had 64K too) = 256 KiB

SPECS: dict[str, GPUSpec] = {s.name: s for s in (
    GPUSpec("V100 SXM2", "sm_70", 80, 1530, 96, _REGS, 0.90, 15.7, None, 125.0, None, None,
            "NVIDIA Tesla V100 GPU Architecture whitepaper (2017); NVIDIA V100 Tensor Core GPU datasheet (2020)",
            "first Tensor Cores: FP16 inputs only", tensor_mhz=1530, tc_flops_per_clk=1024),
    GPUSpec("T4", "sm_75", 40, 1590, 64, _REGS, 0.32, 8.1, None, 65.0, None, None,
            "NVIDIA T4 Tensor Core GPU datasheet (2019); NVIDIA Turing GPU Architecture whitepaper (2018)",
            "FP16 figure is mixed precision (FP16 inputs, FP32 accumulate)", tensor_mhz=1590, tc_flops_per_clk=1024),
    GPUSpec("A100 SXM", "sm_80", 108, 1410, 164, _REGS, 2.039, 19.5, 156.0, 312.0, 312.0, None,
            "NVIDIA A100 Tensor Core GPU datasheet (2021, 80GB SXM); "
            "NVIDIA A100 Tensor Core GPU Architecture whitepaper (2020)", tensor_mhz=1410, tc_flops_per_clk=2048),
    GPUSpec("L4", "sm_89", 58, 2040, 100, _REGS, 0.30, 30.3, 60.0, 121.0, 121.0, 242.5,
            "NVIDIA L4 Tensor Core GPU datasheet (2023)", "datasheet prints sparse 120/242/242/485; halved",
            tensor_mhz=2040, tc_flops_per_clk=1024),
    GPUSpec("RTX 4090", "sm_89", 128, 2520, 100, _REGS, 1.008, 82.6, 82.6, 165.2, 165.2, 330.3,
            "NVIDIA Ada GPU Architecture whitepaper (2022), appendix table for GeForce RTX 4090",
            "GeForce: FP32-accumulate Tensor rates are half the FP16-accumulate ones (330.3 FP16, 660.6 FP8)",
            tensor_mhz=2520, tc_flops_per_clk=512),
    GPUSpec("H100 SXM", "sm_90", 132, 1980, 228, _REGS, 3.35, 67.0, 494.5, 989.5, 989.5, 1979.0,
            "NVIDIA H100 Tensor Core GPU datasheet (2023); NVIDIA H100 Tensor Core GPU Architecture whitepaper (2022)",
            "datasheet prints sparse 989/1979/1979/3958; halved; Tensor Core peaks at 1830 MHz",
            tensor_mhz=1830, tc_flops_per_clk=4096),
    GPUSpec("H200", "sm_90", 132, 1980, 228, _REGS, 4.8, 67.0, 494.5, 989.5, 989.5, 1979.0,
            "NVIDIA H200 Tensor Core GPU datasheet (2024)",
            "the H100's GH100 chip with 141 GB HBM3e: same peaks, 43% more bandwidth",
            tensor_mhz=1830, tc_flops_per_clk=4096),
    GPUSpec("B200", "sm_100", 148, None, 228, _REGS, 8.0, 75.0, 1125.0, 2250.0, 2250.0, 4500.0,
            "NVIDIA HGX B200 datasheet (2024), 8-GPU figures ÷ 8; NVIDIA Blackwell Architecture Technical Brief (2024)",
            "clock not published; plus 256 KiB of Tensor Memory (TMEM) per SM; FP4 (not shown) doubles FP8"),
)}


def spec_table(names: list[str] | None = None) -> str:
    """The specs as a fixed-width text table ('—' marks an unsupported format, '?' an unpublished figure). "MHz boost"
    is the clock of the FP32 peak, "MHz TC" the clock of the Tensor Core peaks.

    >>> print(spec_table(["T4"]).splitlines()[2])
    T4   sm_75   40   1590  1590    64   256  0.32      8.1      —   65.0      —      —
    """
    rows = [SPECS[n] for n in (names or list(SPECS))]
    head = ("GPU", "arch", "SMs", "MHz", "MHz", "smem", "regs", "TB/s", "FP32", "TF32", "FP16", "BF16", "FP8")
    units = ("", "", "", "boost", "TC", "KiB", "KiB", "", "TFLOP/s", "dense", "dense", "dense", "dense")

    def cell(value: object, blank: str) -> str:
        if value is None:
            return blank
        if isinstance(value, float):
            return f"{value:g}" if value >= 1000 else f"{value:.1f}" if value >= 1 else f"{value:.2f}"
        return str(value)

    body = [[s.name, s.arch, cell(s.sms, "?"), cell(s.boost_mhz, "?"), cell(s.tensor_mhz, "?"),
             cell(s.smem_kib_per_sm, "?"), cell(s.regs_kib_per_sm, "?"), f"{s.bandwidth_tbs:.2f}",
             cell(s.fp32_tflops, "?"),
             cell(s.tf32_tflops, "—"), cell(s.fp16_tflops, "—"), cell(s.bf16_tflops, "—"), cell(s.fp8_tflops, "—")]
            for s in rows]
    widths = [max(len(r[i]) for r in [list(head), list(units)] + body) for i in range(len(head))]
    fmt = lambda r: "  ".join(v.ljust(w) if i < 2 else v.rjust(w) for i, (v, w) in enumerate(zip(r, widths)))  # noqa: E731
    return "\n".join(fmt(r).rstrip() for r in [list(head), list(units)] + body)


def spec_for(device_name: str) -> GPUSpec | None:
    """The datasheet entry for a device name as torch reports it (e.g. 'NVIDIA H100 80GB HBM3'), or None.

    Every word of the entry's name but its form factor must be a whole word of the device name, so an RTX 3090 is
    not an RTX 4090 nor an L40S an L4. The table's rows are the SXM parts (or the only form a GPU comes in), so a
    device named PCIe or NVL, which runs at other clocks and bandwidths, has no row.

    >>> spec_for("NVIDIA H200").name, spec_for("Tesla T4").name, spec_for("NVIDIA GeForce RTX 4090").name
    ('H200', 'T4', 'RTX 4090')
    >>> spec_for("NVIDIA GeForce RTX 3090"), spec_for("NVIDIA L40S"), spec_for("NVIDIA H100 PCIe")
    (None, None, None)
    """
    words = set(re.split(r"[^0-9A-Z]+", device_name.upper()))
    if words & {"PCIE", "NVL"}:
        return None
    for name, spec in SPECS.items():
        if all(w in words for w in name.upper().split() if not w.startswith("SXM")):
            return spec
    return None
