"""GEMM, step 1: one output per thread, straight from global memory. The baseline the Tensor Core steps beat by
two orders of magnitude.

Thread (x, y) of a 16 × 16 block computes ``C[m, n] = sum_k A[m, k] * B[n, k]`` in fp32, for m = 16·bid.y + y and
n = 16·bid.x + x, then rounds to C's dtype. Any M, N, K and either major of A and B work (a bounds check per thread,
scalar loads). Each operand element is read from global memory (or L2) once per thread that needs it: M·N·K loads
of each operand, two FMAs' worth of data per FMA — the arithmetic intensity is 1/4 FLOP per byte, so this step is
memory bound however fast the SMs are.

    gemm(a, b, c)   # c = a @ b; a (M, K), b (K, N) float16/bfloat16; c (M, N) float32/float16/bfloat16
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import cutlass
import cutlass.cute as cute

from cutecourse.kernels import gemm_launch


@dataclass(frozen=True)
class Config:
    block: int = 16  # threads per block side: block × block outputs per CTA


@cute.kernel
def _kernel(mA: cute.Tensor, mB: cute.Tensor, mC: cute.Tensor, block: cutlass.Constexpr[int]):
    tx, ty, _ = cute.arch.thread_idx()
    bx, by, _ = cute.arch.block_idx()
    m = by * block + ty
    n = bx * block + tx
    if m < mC.shape[0] and n < mC.shape[1]:
        acc = cutlass.Float32(0)
        for kk in cutlass.range(mA.shape[1]):
            acc += mA[m, kk].to(cutlass.Float32) * mB[n, kk].to(cutlass.Float32)
        mC[m, n] = acc.to(mC.element_type)


@cute.jit
def host(pA: cute.Pointer, pB: cute.Pointer, pC: cute.Pointer, m: cutlass.Int32, n: cutlass.Int32,
         k: cutlass.Int32, stream: Any, ops: cutlass.Constexpr, config: cutlass.Constexpr):
    mA, mB, mC = gemm_launch.tensors(ops, pA, pB, pC, m, n, k)
    b = config.block
    _kernel(mA, mB, mC, b).launch(grid=((n + b - 1) // b, (m + b - 1) // b, 1), block=(b, b, 1), stream=stream)


gemm = gemm_launch.Launcher(host, Config, step="gemm1_naive", vector=False, min_cc=80)
