"""The GEMM ladder of lessons 5-8: eleven steps (`GEMM_STEPS`), each a module that adds one idea to the one before, and
what the steps share.

==================  ==================================================================================================
module              what it holds
==================  ==================================================================================================
``gemmNN_*``        a step: a ``Config``, the ``@cute.kernel``, the ``@cute.jit`` host and its launcher
                    (``gemm = launcher.Launcher(host, Config, ...)``)
``device``          the helpers the steps' ``@cute.jit`` and ``@cute.kernel`` code calls: layouts over the pointers,
                    each CTA's tiles, the operand copies, the predicated store
``operands``        launch-time validation of the torch tensors: dtypes, shapes, majors, alignment, the GPU's arch
``launcher``        the launcher every step is called through: compile once per configuration, call with pointers
``plans``           the bounded cache of each call's verdict (the launchers' and ``cutecourse.gemm``'s)
``tolerances``      how close to float64 torch a GEMM's output must be (the tests, checks and benchmarks read it)
``epilogue``        the fused epilogue ``D = act(alpha · acc + beta · C + bias)`` (every step from 5 on)
``fp8``             per-tensor fp8 scaling around steps 10 and 11
``splitk``          split-K for step 11: the workspace of partial tiles, the in-order reduction, step 11's launcher
``gemv``            beside the ladder: the decode GEMV, a few rows of x against K-major weights (no Tensor Cores)
``steps``           each step's diff against the one before (reads the sources as text)
==================  ==================================================================================================

Import the modules directly (``from cutecourse.kernels.gemm import gemm05_swizzle``); this package imports nothing
heavy.
"""

#: The steps, in order: each module adds one idea to the one before (README, "The GEMM steps";
#: `cutecourse.kernels.gemm.steps.diff(n)` shows step n against step n - 1).
GEMM_STEPS = ("gemm01_naive", "gemm02_smem", "gemm03_mma", "gemm04_multistage", "gemm05_swizzle", "gemm06_tma",
              "gemm07_wgmma", "gemm08_warpspecialized", "gemm09_persistent", "gemm10_multicast", "gemm11_pingpong")
#: Kernels beside the ladder that `cutecourse.gemm` may run, each a module like a step's (a ``Config``, the host and
#: its launcher ``gemm``): the decode GEMV (`gemv`).
VARIANTS = ("gemv",)
#: Every kernel module `cutecourse.gemm`, its tables and the tuner's cache may name.
KERNELS = GEMM_STEPS + VARIANTS
