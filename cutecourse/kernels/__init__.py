"""CuTe DSL kernels, one module per lesson step.

Every module follows one skeleton: a config dataclass, a ``@cute.kernel`` with the device code, ``@cute.jit`` host
code that builds layouts and launches, and a launcher (`launch.Launcher`; the GEMM steps' `gemm_launch.Launcher`
extends it) that takes torch tensors, validates them and caches one compiled kernel per configuration. Import the
modules directly; this package imports nothing heavy.
"""

#: The GEMM ladder of lessons 5-8, in order: each module adds one idea to the one before (README, "The GEMM steps";
#: `cutecourse.kernels.steps.diff(n)` shows step n against step n - 1).
GEMM_STEPS = ("gemm01_naive", "gemm02_smem", "gemm03_mma", "gemm04_multistage", "gemm05_swizzle", "gemm06_wgmma",
              "gemm07_warpspecialized", "gemm08_persistent", "gemm09_multicast", "gemm10_pingpong")
