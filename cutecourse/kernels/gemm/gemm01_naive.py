"""GEMM, step 1: one output per thread, straight from global memory. The baseline the Tensor Core steps beat by
two orders of magnitude.

Thread t of a CTA of threads_m × threads_n threads computes ``C[m, n] = sum_k A[m, k] * B[n, k]`` in fp32, for
m = threads_m · bid.x + t // threads_n and n = threads_n · bid.y + t % threads_n, then rounds to C's dtype: the
CTA's tile of C is its block of threads. Any M, N, K and either major of A and B
work (a bounds check per thread, scalar loads). Each operand element is read from global memory (or L2) once per
thread that needs it: M·N·K loads of each operand, two FMAs' worth of data per FMA — the arithmetic intensity is
1/4 FLOP per byte, so this step is memory bound however fast the SMs are.

Config: threads_m × threads_n threads per CTA, at most 1024; threads_n ≥ 16 (the grid's y dimension counts N's
tiles).

    gemm(a, b, c)   # c = a @ b; a (M, K), b (K, N) float16/bfloat16; c (M, N) float32/float16/bfloat16
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import cutlass
import cutlass.cute as cute

from cutecourse.kernels.gemm import device, launcher


@dataclass(frozen=True)
class Config:
    threads_m: int = 16  # threads_m × threads_n threads per CTA, one output of C each: the CTA's tile of C
    threads_n: int = 16

    def __post_init__(self) -> None:
        if self.threads_m * self.threads_n > 1024 or self.threads_n < 16:
            raise ValueError(f"{self}: a CTA has at most 1024 threads, so threads_m * threads_n must be at most 1024, "
                             "and threads_n at least 16 (the grid's y dimension, N / threads_n CTAs, is at most 65535)")


@cute.kernel
def _kernel(mA: cute.Tensor, mB: cute.Tensor, mC: cute.Tensor, tiler: cutlass.Constexpr):
    tidx, _, _ = cute.arch.thread_idx()
    bidx, bidy, _ = cute.arch.block_idx()
    tile_m, tile_n = tiler
    m = bidx * tile_m + tidx // tile_n  # consecutive threads along N: their stores to row-major C coalesce
    n = bidy * tile_n + tidx % tile_n
    if m < mC.shape[0] and n < mC.shape[1]:
        acc = cutlass.Float32(0)
        for kk in cutlass.range(mA.shape[1]):
            acc += mA[m, kk].to(cutlass.Float32) * mB[n, kk].to(cutlass.Float32)
        mC[m, n] = acc.to(mC.element_type)


@cute.jit
def host(pA: cute.Pointer, pB: cute.Pointer, pC: cute.Pointer, m: cutlass.Int32, n: cutlass.Int32,
         k: cutlass.Int32, lda: cutlass.Int32, ldb: cutlass.Int32, ldc: cutlass.Int32, stream: Any,
         ops: cutlass.Constexpr, config: cutlass.Constexpr):
    mA, mB, mC = device.tensors(ops, pA, pB, pC, m, n, k, lda, ldb, ldc)
    tiler = (config.threads_m, config.threads_n)  # one output per thread
    threads = config.threads_m * config.threads_n

    tiles_m, tiles_n = (m + config.threads_m - 1) // config.threads_m, (n + config.threads_n - 1) // config.threads_n
    _kernel(mA, mB, mC, tiler).launch(grid=(tiles_m, tiles_n, 1), block=(threads, 1, 1), stream=stream)


gemm = launcher.Launcher(host, Config, vector=False, min_cc=80)
