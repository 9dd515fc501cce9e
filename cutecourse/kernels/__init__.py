"""CuTe DSL kernels, one module per lesson step.

Every module follows one skeleton: a config dataclass, a ``@cute.kernel`` with the device code, ``@cute.jit``
host code that builds layouts and launches, and a launcher that takes torch tensors, validates them and caches one
compiled kernel per configuration. Import the modules directly; this package imports nothing heavy.
"""

#: The GEMM steps of lessons 5-8, in order: each module adds one idea to the one before (README, "The GEMM steps").
GEMM_STEPS = ("gemm1_naive", "gemm2_smem", "gemm3_mma", "gemm4_multistage", "gemm5_wgmma", "gemm6_warpspecialized")
