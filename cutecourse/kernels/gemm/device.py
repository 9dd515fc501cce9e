"""What the GEMM steps' ``@cute.jit`` host code and ``@cute.kernel`` device code share: the cutlass type of a dtype,
the layouts of A, B and C over the raw pointers, each CTA's tiles of them, the operand copies of the SM80 steps, and
the predicated store of the accumulators.

A step calls these by module (``device.cta_tiles(...)``), so that its diff against the step before shows where the
shared code runs; `cutecourse.kernels.gemm.operands` checks the torch tensors before any of it is traced.
"""

from __future__ import annotations

from typing import Any

import cutlass
import cutlass.cute as cute

from cutecourse.kernels.gemm.operands import Operands

_DTYPES = {"float32": cutlass.Float32, "float16": cutlass.Float16, "bfloat16": cutlass.BFloat16,
           "float8_e4m3fn": cutlass.Float8E4M3FN, "float8_e5m2": cutlass.Float8E5M2}


def dtype(name: str) -> Any:
    """The cutlass type of a dtype name ("bfloat16" -> cutlass.BFloat16)."""
    return _DTYPES[name]


def tensors(ops: Operands, pA: Any, pB: Any, pC: Any, m: Any, n: Any, k: Any, lda: Any, ldb: Any, ldc: Any
            ) -> tuple[Any, Any, Any]:
    """Inside ``@cute.jit``: A (M, K), B (N, K) and C (M, N) as CuTe tensors over the pointers, with the strides the
    table in `operands`' docstring gives and the leading dimensions the call passed (``a = wide[:, :K]`` has
    ``lda = wide.stride(0)``, not K: a padded leading dimension is only another stride; C is column-major where
    ``ops.c_major`` is "m"). Leading dimensions are promised divisible by ``ops.vector``."""
    def lead(x: Any) -> Any:
        return cute.assume(x, divby=ops.vector) if ops.vector > 1 else x

    c_vector = 16 // (dtype(ops.c).width // 8) if ops.vector > 1 else 1
    a_layout = cute.make_layout((m, k), stride=(lead(lda), 1) if ops.a_major == "k" else (1, lead(lda)))
    b_layout = cute.make_layout((n, k), stride=(lead(ldb), 1) if ops.b_major == "k" else (1, lead(ldb)))
    ld_c = cute.assume(ldc, divby=c_vector) if c_vector > 1 else ldc
    c_layout = cute.make_layout((m, n), stride=(ld_c, 1) if ops.c_major == "n" else (1, ld_c))
    return cute.make_tensor(pA, a_layout), cute.make_tensor(pB, b_layout), cute.make_tensor(pC, c_layout)


@cute.jit
def cta_tiles(mA: cute.Tensor, mB: cute.Tensor, mC: cute.Tensor, tiler: cute.Tile, coord: cute.Coord):
    """Inside a kernel: the CTA at `coord` = (m-tile, n-tile, None)'s tiles of a (bm, bn, bk) `tiler`: gA (bm, bk,
    k-tiles), gB (bn, bk, k-tiles) and gC (bm, bn), then their identity twins cA, cB, cC, which hold each element's
    coordinate in the whole matrix (for predicates at the M, N and K tails)."""
    identities = [cute.make_identity_tensor(t.shape) for t in (mA, mB, mC)]
    projections = ((1, None, 1), (None, 1, 1), (1, 1, None)) * 2
    return tuple(cute.local_tile(t, tiler, coord, proj=p) for t, p in zip((mA, mB, mC, *identities), projections))


def tiled_copy_ab(atom: Any, major_is_k: bool, rows: int, tile_k: int, threads: int, vector: int = 8
                  ) -> cute.TiledCopy:
    """Host side: a tiled copy of a (rows, tile_k) tile of A or B with `atom` (universal copies or ``cp.async``) of
    `vector` elements (8 16-bit elements: 16 bytes) along the operand's contiguous mode, the threads next to each
    other along it too, so that a warp reads neighbouring addresses (whole 32-byte sectors)."""
    if major_is_k:
        lanes = tile_k // vector
        return cute.make_tiled_copy_tv(atom, cute.make_layout((threads // lanes, lanes), stride=(lanes, 1)),
                                       cute.make_layout((1, vector)))
    lanes = rows // vector
    return cute.make_tiled_copy_tv(atom, cute.make_layout((lanes, threads // lanes), stride=(1, lanes)),
                                   cute.make_layout((vector, 1)))


@cute.jit
def store_inside(acc: cute.Tensor, tCgC: cute.Tensor, tCcC: cute.Tensor, shape: cute.Shape):
    """The simplest epilogue, inside a kernel: each of this thread's accumulators `acc`, rounded to C's dtype, goes
    straight from its register to `tCgC` if its coordinate (`tCcC`, the same partition of an identity tensor) lies
    inside `shape`. One element at a time: a whole-fragment conversion (``acc.load().to(...)``) let LLVM hoist the
    conversions above a ``wgmma.wait_group``, reading accumulators the Tensor Cores were still writing."""
    for i in cutlass.range(cute.size(acc), unroll_full=True):
        if cute.elem_less(tCcC[i], shape):
            tCgC[i] = acc[i].to(tCgC.element_type)
