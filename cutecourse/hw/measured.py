"""Figures measured on a real GPU, stored so that lesson 1 can show them on a machine without one.

Each comes from a run recorded in ``benchmarks/RESULTS.md`` (same date, GPU, driver and command), and lesson 1's
``%%gpu`` cell measures the first three again, with :mod:`cutecourse.bench.measure`, wherever a GPU exists.

>>> H200["copy_tbs"].value
4.189
>>> print(H200["matmul_fp16_tflops"])
torch.matmul 8192³ fp16, random normal, median of 20: 741.9 TFLOP/s
"""

from __future__ import annotations

from dataclasses import dataclass

#: Where and when the figures below were measured.
GPU = "NVIDIA H200"
DRIVER = "580.159.04"
DATE = "2026-11-30"


@dataclass(frozen=True)
class Measurement:
    """One measured figure: what it is, its value and unit, and the command that measured it (in RESULTS.md)."""

    what: str
    value: float
    unit: str
    command: str

    def __str__(self) -> str:
        return f"{self.what}: {self.value:g} {self.unit}"


_CELL = "lesson 1's %%gpu cell as a script: cutecourse.bench.measure (RESULTS.md, 'lessons 1-3 on the GPU')"
_GEMM = "python3 benchmarks/gemm.py (each kernel settled 1 s; RESULTS.md, 'GEMM steps 1-6: the recorded run')"
_CLOCKS = "nvidia-smi during 1.5 s of back-to-back GEMMs (RESULTS.md, 'GEMM step 6 at 4096³', diagnosis 1)"
_NCU = ("ncu --clock-control none ..., one launch (RESULTS.md, 'GEMM step 6 at 4096³'; the launching script "
        "of then is now cutecourse bench gemm --ncu)")

H200: dict[str, Measurement] = {
    "copy_tbs": Measurement("device copy of 1 GiB, bytes read + written", 4.189, "TB/s", _CELL),
    "matmul_fp16_tflops": Measurement("torch.matmul 8192³ fp16, random normal, median of 20", 741.9, "TFLOP/s", _CELL),
    "matmul_bf16_tflops": Measurement("torch.matmul 8192³ bf16, random normal, median of 20", 771.1, "TFLOP/s", _CELL),
    "settled_fp16_tflops": Measurement("torch.matmul 8192³ fp16 after 1 s of the same work", 661.6, "TFLOP/s", _GEMM),
    "settled_fp16_mhz": Measurement("SM clock during that run (nvidia-smi, median)", 1425, "MHz", _GEMM),
    "settled_mhz_low": Measurement("lowest settled SM clock of torch.matmul over the run's shapes", 1425, "MHz",
                                   _GEMM),
    "settled_mhz_high": Measurement("highest settled SM clock of torch.matmul over the run's shapes", 1635, "MHz",
                                    _GEMM),
    "settled_watts": Measurement("board power of GEMMs at 4096³ run back to back (limit 700 W)", 690, "W", _CLOCKS),
    "cublas_4096_us": Measurement("cuBLAS bf16 4096³, one launch under Nsight Compute", 177.3, "µs", _NCU),
    "cublas_4096_l2_sectors": Measurement("its L2 read sectors (32 bytes each)", 27.4e6, "sectors", _NCU),
    "cublas_4096_dram_sectors": Measurement("its DRAM read sectors (32 bytes each)", 4.67e6, "sectors", _NCU),
}


def table(figures: dict[str, Measurement] | None = None) -> str:
    """The figures as text, under a line saying where and when they were measured."""
    figures = H200 if figures is None else figures
    lines = [f"measured on an {GPU} (driver {DRIVER}), {DATE}:"]
    lines += [f"  {m}" for m in figures.values()]
    return "\n".join(lines)
