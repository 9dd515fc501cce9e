"""Decode GEMV: ``y = x @ W.t()`` for a few rows of x (M ≤ 8) against weights W (N, K) stored as ``nn.Linear``
stores them, K-major. A variant beside the ladder, for the shapes a model's decode step runs (one token, or a few).

At M = 1 each weight is read once and used once: one FMA per two bytes read, where the Tensor Cores need hundreds
of FMAs per byte to be the limit. The product is then a read of W, and its speed is the memory's bandwidth reached,
which takes many bytes in flight from every SM at once. A 64-row wgmma tile would compute 63 rows of nothing, and a
few dozen tiles along N leave most SMs without a tile (lesson 8). So this kernel has no Tensor Cores and no shared
memory: warps stream rows of W with 16-byte loads, as many warps as the SMs hold.

Warp w of the grid takes rows ``w · rows_per_warp`` to ``w · rows_per_warp + rows_per_warp - 1`` of W (outputs n)
and walks K: lane l reads the 16-byte vectors l, l + 32, l + 64, ... of each of those rows and of each row of x (x is
a few KiB: every warp of an SM reads it, from L1), and keeps ``rows_m × rows_per_warp`` float32 sums. Then the warp
adds its 32 lanes' sums with butterfly shuffles (``shfl.sync.bfly``), and lane 0 runs the fused epilogue on each
output and stores it. The sums are in a fixed order: the result is the same on every run.

Config: ``warps`` per CTA; ``rows_per_warp`` rows of W each warp takes (x's loads are shared by them; one, the
default, ran fastest on an H100: benchmarks/RESULTS.md);
``rows_m``: the rows of x the kernel is compiled for, 1, 2, 4 or 8 (0: M rounded up to one of those at the call;
rows beyond M are computed on x's last row and not stored). B must be K-major (W as ``nn.Linear`` stores it, ``b =
W.t()``); its rows 16-byte aligned, as every vector step needs.

    gemm(x, W.t(), y)   # y = x @ W.t(); x (M ≤ 8, K), W (N, K) float16/bfloat16; y (M, N) float32/float16/bfloat16
    gemm(x, W.t(), y, epilogue=Epilogue("silu", bias="n"), bias=bias)   # y = SiLU(x @ W.t() + bias), one kernel
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import cutlass
import cutlass.cute as cute
import torch

from cutecourse.kernels.gemm import device, epilogue, launcher

WARP = cute.arch.WARP_SIZE
#: The rows of x a kernel is compiled for; the most a call may have.
ROWS_M = (1, 2, 4, 8)


@dataclass(frozen=True)
class Config:
    warps: int = 8  # warps per CTA
    rows_per_warp: int = 1  # rows of W (outputs along N) each warp computes
    rows_m: int = 0  # rows of x compiled for: 1, 2, 4 or 8; 0: M rounded up to one of them at the call

    def __post_init__(self) -> None:
        if not 1 <= self.warps <= 32 or not 1 <= self.rows_per_warp <= 8:
            raise ValueError(f"{self}: warps must be 1 to 32 (a CTA has at most 1024 threads) and rows_per_warp 1 "
                             "to 8")
        if self.rows_m not in (0, *ROWS_M):
            raise ValueError(f"{self}: rows_m must be 0 (M rounded up at the call) or one of {ROWS_M}")


@cute.kernel
def _kernel(mA: cute.Tensor, mB: cute.Tensor, mC: cute.Tensor, mSrc: cute.Tensor, mBias: cute.Tensor,
            mAux: cute.Tensor, alpha: cutlass.Float32, beta: cutlass.Float32, rows: cutlass.Constexpr,
            vector: cutlass.Constexpr, fused: cutlass.Constexpr):
    warps, rows_per_warp, rows_m = rows
    tidx, _, _ = cute.arch.thread_idx()
    bidx, _, _ = cute.arch.block_idx()
    lane = tidx % WARP
    first_n = (bidx * warps + tidx // WARP) * rows_per_warp
    m, k = mA.shape
    n = mB.shape[0]

    # 16-byte vectors along K: gA[(None, (i, v))] is vector v of x's row i, gB[(None, (j, v))] of W's row j.
    gA = cute.zipped_divide(mA, (1, vector))
    gB = cute.zipped_divide(mB, (1, vector))
    x = cute.make_rmem_tensor((vector,), mA.element_type)
    w = cute.make_rmem_tensor((rows_per_warp, vector), mB.element_type)
    acc = cute.make_rmem_tensor((rows_m, rows_per_warp), cutlass.Float32)
    acc.fill(0.0)
    for v in cutlass.range(lane, k // vector, WARP, unroll=2):
        for r in cutlass.range_constexpr(rows_per_warp):  # rows past N read W's last row, and are not stored
            w[r, None].store(gB[(None, (cutlass.min(first_n + r, n - 1), v))].load())
        for i in cutlass.range_constexpr(rows_m):  # rows past M read x's last row, and are not stored
            x.store(gA[(None, (cutlass.min(i, m - 1), v))].load())
            for r in cutlass.range_constexpr(rows_per_warp):
                for e in cutlass.range_constexpr(vector):
                    acc[i, r] += x[e].to(cutlass.Float32) * w[r, e].to(cutlass.Float32)

    # Each output's 32 partial sums, one a lane, added by butterfly shuffles; lane 0 stores it.
    for i in cutlass.range_constexpr(rows_m):
        for r in cutlass.range_constexpr(rows_per_warp):
            total = cute.arch.warp_reduction_sum(acc[i, r])
            if lane == 0:
                if i < m:
                    if first_n + r < n:
                        if cutlass.const_expr(not fused.identity):
                            total = epilogue.element(fused, total, (i, first_n + r), mSrc, mBias, mAux, alpha, beta)
                        mC[i, first_n + r] = total.to(mC.element_type)


@cute.jit
def host(pA: cute.Pointer, pB: cute.Pointer, pC: cute.Pointer, m: cutlass.Int32, n: cutlass.Int32,
         k: cutlass.Int32, lda: cutlass.Int32, ldb: cutlass.Int32, ldc: cutlass.Int32, stream: Any,
         pSrc: cute.Pointer, pBias: cute.Pointer, pAux: cute.Pointer,
         alpha: cutlass.Float32, beta: cutlass.Float32, ops: cutlass.Constexpr, config: cutlass.Constexpr,
         fused: cutlass.Constexpr):
    if cutlass.const_expr(ops.b_major != "k"):
        raise ValueError("b is N-major; gemv reads b K-major, b = W.t() for weights W (N, K) row-major as nn.Linear "
                         "stores them: pass b = b.t().contiguous().t(), or use cutecourse.gemm, which takes either "
                         "major")
    if cutlass.const_expr(config.rows_m == 0):
        raise ValueError(f"{config}: rows_m is set from M at the call; compile gemv.rows_for(config, m)")
    mA, mB, mC = device.tensors(ops, pA, pB, pC, m, n, k, lda, ldb, ldc)
    mSrc, mBias, mAux = epilogue.tensors(fused, pSrc, pBias, pAux, m, n)
    rows_n = config.warps * config.rows_per_warp  # rows of W per CTA
    _kernel(mA, mB, mC, mSrc, mBias, mAux, alpha, beta, (config.warps, config.rows_per_warp, config.rows_m),
            ops.vector, fused).launch(grid=((n + rows_n - 1) // rows_n, 1, 1), block=(WARP * config.warps, 1, 1),
                                      stream=stream)


def rows_for(config: Config, m: int) -> Config:
    """`config` with ``rows_m`` set for a call with `m` rows of x: M rounded up to one of `ROWS_M` where it is 0;
    a ValueError naming the fix where M is more than the kernel computes."""
    most = config.rows_m or ROWS_M[-1]
    if m > most:
        raise ValueError(f"a has M={m} rows; gemv computes at most {most} (Config(rows_m={config.rows_m})): with more "
                         "rows the weights are reused and the Tensor Cores win, so use cutecourse.gemm, which picks "
                         "a GEMM step")
    return config if config.rows_m else replace(config, rows_m=next(r for r in ROWS_M if r >= m))


class Launcher(launcher.Launcher):
    """The GEMM launcher, with ``rows_m`` resolved from a's rows before the checks and the compile (the host refuses
    an N-major b, as the checks found it, naming the fix)."""

    def plan(self, a: Any, b: Any, c: Any, config: Any, *args: Any, **kwargs: Any) -> launcher.Plan | None:
        if isinstance(config, Config) and isinstance(a, torch.Tensor) and a.dim() == 2:
            config = rows_for(config, a.shape[0])
        return super().plan(a, b, c, config, *args, **kwargs)


gemm = Launcher(host, Config, vector=True, min_cc=80, epilogue=True)
