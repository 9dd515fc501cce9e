"""CuTe DSL kernels, one module per lesson step: the copy and transpose steps here, the GEMM ladder in
`cutecourse.kernels.gemm`.

Every module follows one skeleton: a config dataclass, a ``@cute.kernel`` with the device code, ``@cute.jit`` host
code that builds layouts and launches, and a launcher (`launch.Launcher`; the GEMM steps' `gemm.launcher.Launcher`
extends it) that takes torch tensors, validates them and caches one compiled kernel per configuration. Import the
modules directly; this package imports nothing heavy.
"""
