"""Hardware facts and models for lesson 1: GPU specs, Tensor Core generations, roofline, occupancy; and the models
the pictures of :mod:`cutecourse.viz` draw, each in its module: ``banks`` (shared-memory banks and wavefronts, on a
layout read as a 2-D tile by ``tile``) and ``pipeline`` (a ring of stages feeding the math, simulated).

Pure Python, no dependencies: ``import cutecourse.hw`` loads neither numpy nor torch.

>>> from cutecourse import hw
>>> hw.SPECS["H100 SXM"].sms
132
>>> hw.cta_tile_intensity(128, 128, 32, elem_bytes=2)
64.0
>>> hw.occupancy(256, 128, 48 * 1024, "sm_80").blocks_per_sm
2
"""

from cutecourse.hw.occupancy import ARCH_LIMITS, ArchLimits, Occupancy, occupancy
from cutecourse.hw.roofline import (attainable_tflops, cta_tile_intensity, gemm_bytes, gemm_decomposition, gemm_flops,
                                    gemm_intensity, ridge_point)
from cutecourse.hw.specs import SPECS, GPUSpec, spec_table
from cutecourse.hw.tensor_cores import GENERATIONS, TensorCoreGen, generation_table

__all__ = ["ARCH_LIMITS", "ArchLimits", "Occupancy", "occupancy", "attainable_tflops", "cta_tile_intensity",
           "gemm_bytes", "gemm_decomposition", "gemm_flops", "gemm_intensity", "ridge_point", "SPECS", "GPUSpec",
           "spec_table", "GENERATIONS", "TensorCoreGen", "generation_table"]
