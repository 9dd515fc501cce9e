"""The fragments' layouts print exactly what the CuTe DSL prints for the same instruction: the A/B/C TV layouts of
the mma.sync atoms and of TiledMMAs over several warp grids and permutations, the ldmatrix and stmatrix atoms'
source and destination layouts (every count, with and without .trans), and wgmma's accumulator for several N.

The DSL runs on this CPU inside ``@cute.jit`` (nothing is launched); one trace collects every string."""

from __future__ import annotations

import pytest

from cutecourse import fragments as F
from cutecourse.layout import make_layout

cute = pytest.importorskip("cutlass.cute", reason="the CuTe DSL is not installed")
import cutlass  # noqa: E402

#: (k, warp grid shape, warp grid stride or None, permutation_mnk): TiledMMAs of both atoms, the course's step 3
#: (2 x 2 warps, N permuted to 16 per warp), row-major warp grids, and no permutation at all.
TILED = [(16, (2, 2, 1), None, (32, 32, 16)), (16, (2, 2, 1), None, (None, None, None)),
         (16, (4, 1, 1), None, (64, 16, 16)), (16, (1, 4, 1), None, (16, 64, 32)),
         (8, (2, 4, 1), (4, 1, 0), (32, 64, 8)), (8, (1, 2, 1), None, (None, None, None)),
         (16, (2, 1, 1), None, (32, 16, 32)), (8, (2, 2, 1), (2, 1, 0), (32, 32, 8))]
WGMMA_NS = (8, 16, 24, 64, 128, 256)
DTYPES = {"float16": cutlass.Float16, "bfloat16": cutlass.BFloat16}


def _grid(shape, stride):
    return make_layout(shape, stride) if stride else make_layout(shape)


@cute.jit
def _dsl_strings(ab: cutlass.Constexpr, out: cutlass.Constexpr):
    for k in cutlass.range_constexpr(len(F.MMA_KS)):
        atom = cute.make_mma_atom(cute.nvgpu.warp.MmaF16BF16Op(ab, cutlass.Float32, (16, 8, F.MMA_KS[k])))
        out.append((str(atom.tv_layout_A), str(atom.tv_layout_B), str(atom.tv_layout_C)))
    for i in cutlass.range_constexpr(len(TILED)):
        k, shape, stride, perm = TILED[i]
        op = cute.nvgpu.warp.MmaF16BF16Op(ab, cutlass.Float32, (16, 8, k))
        grid = cute.make_layout(shape, stride=stride) if cutlass.const_expr(stride) else cute.make_layout(shape)
        if cutlass.const_expr(perm[0] is None):
            tiled = cute.make_tiled_mma(op, grid)
        else:
            tiled = cute.make_tiled_mma(op, grid, permutation_mnk=perm)
        out.append((str(tiled.tv_layout_A_tiled), str(tiled.tv_layout_B_tiled), str(tiled.tv_layout_C_tiled)))
    for i in cutlass.range_constexpr(len(F.LDMATRIX_COUNTS)):
        for transpose in cutlass.range_constexpr(2):
            x = F.LDMATRIX_COUNTS[i]
            ld = cute.make_copy_atom(cute.nvgpu.warp.LdMatrix8x8x16bOp(transpose == 1, x), ab)
            st = cute.make_copy_atom(cute.nvgpu.warp.StMatrix8x8x16bOp(transpose == 1, x), ab)
            out.append((str(ld.layout_src_tv), str(ld.layout_dst_tv), str(st.layout_src_tv), str(st.layout_dst_tv)))
    for i in cutlass.range_constexpr(len(WGMMA_NS)):
        op = cute.nvgpu.warpgroup.MmaF16BF16Op(ab, cutlass.Float32, (64, WGMMA_NS[i], 16),
                                               cute.nvgpu.warpgroup.OperandSource.SMEM,
                                               cute.nvgpu.OperandMajorMode.K, cute.nvgpu.OperandMajorMode.K)
        out.append(str(cute.make_mma_atom(op).tv_layout_C))


@pytest.fixture(scope="module", params=sorted(DTYPES))
def dsl(request):
    out: list = []
    _dsl_strings(DTYPES[request.param], out)
    return iter(out)


def eager_strings():
    out = []
    for k in F.MMA_KS:
        atom = F.mma_atom(k)
        out.append((str(atom.layout_a), str(atom.layout_b), str(atom.layout_c)))
    for k, shape, stride, perm in TILED:
        tiled = F.tiled_mma(F.mma_atom(k), _grid(shape, stride), perm)
        out.append((str(tiled.tv_layout_A_tiled), str(tiled.tv_layout_B_tiled), str(tiled.tv_layout_C_tiled)))
    for x in F.LDMATRIX_COUNTS:
        for transpose in (False, True):
            ld, st = F.ldmatrix(x, transpose), F.stmatrix(x, transpose)
            out.append((str(ld.layout_src), str(ld.layout_dst), str(st.layout_src), str(st.layout_dst)))
    for n in WGMMA_NS:
        out.append(str(F.wgmma_atom(n).layout_c))
    return out


def test_fragment_layouts_print_as_the_dsl_prints_them_for_fp16_and_bf16(dsl):
    want = list(dsl)
    got = eager_strings()
    assert len(got) == len(want)
    for i, (g, w) in enumerate(zip(got, want)):
        assert g == w, f"case {i}: eager {g} != DSL {w}"
