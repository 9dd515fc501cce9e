"""cutecourse.fragments without the DSL: every docstring example runs, the lane tables agree with the PTX ISA's own
formulas for mma.sync and ldmatrix (written here as the ISA states them, independently of the layouts), ldmatrix.x4
lands exactly on mma.sync's A fragment when lane 8j + r points at A's rows in the seed's order, stmatrix undoes
ldmatrix, and bad arguments are refused with the fix."""

from __future__ import annotations

import doctest

import numpy as np
import pytest

from cutecourse import fragments as F
from cutecourse.fragments import atoms, lanes


@pytest.mark.parametrize("module", [F, atoms, lanes])
def test_docstring_examples_run(module):
    result = doctest.testmod(module)
    assert result.attempted > 0 and result.failed == 0


def ptx_isa_mma(k: int):
    """The PTX ISA's fragment formulas for mma.m16n8k{k} (f16/bf16 inputs, f32 accumulators), per lane."""
    a = []
    b = []
    c = []
    for lane in range(32):
        g, t = lane >> 2, lane % 4
        # A: a_i for i < 4 (k8) or 8 (k16): row g + 8 for i in {2,3,6,7}; column 2t + (i & 1) + 8 for i >= 4.
        a.append([(g + 8 * ((i >> 1) & 1), 2 * t + (i & 1) + 8 * (i >> 2)) for i in range(k // 2)])
        # B: b_i: row (k) 2t + (i & 1) + 8 for i >= 2, column (n) g.  Stored as (n, k).
        b.append([(g, 2 * t + (i & 1) + 8 * (i >> 1)) for i in range(k // 4)])
        # C: c_i: row g + 8 for i >= 2, column 2t + (i & 1).
        c.append([(g + 8 * (i >> 1), 2 * t + (i & 1)) for i in range(4)])
    return np.array(a), np.array(b), np.array(c)


@pytest.mark.parametrize("k", F.MMA_KS)
def test_mma_fragments_are_the_ptx_isa_formulas(k):
    got = F.mma_fragments(F.mma_atom(k))
    a, b, c = ptx_isa_mma(k)
    assert np.array_equal(got["A"], a) and np.array_equal(got["B"], b) and np.array_equal(got["C"], c)


def test_a_wrong_layout_is_caught_by_the_isa_formulas():
    swapped = atoms.Layout(((4, 8), (2, 2, 2)), ((32, 1), (16, 128, 8)))  # v1 and v2 exchanged
    assert not np.array_equal(F.coords(swapped, (16, 16)), ptx_isa_mma(16)[0])


@pytest.mark.parametrize("x", F.LDMATRIX_COUNTS)
@pytest.mark.parametrize("transpose", [False, True])
def test_ldmatrix_is_the_ptx_isa_rule(x, transpose):
    rows = np.random.default_rng(x + 10 * transpose).integers(0, 2**16, size=(32, 8))
    got = F.simulate_ldmatrix(rows, x, transpose)
    for lane in range(32):
        for j in range(x):
            for h in range(2):
                # matrix j's row r is the row at lane 8j + r's address; lane gets row lane//4, columns 2(lane%4)+h
                # (transposed: row 2(lane%4)+h, column lane//4).
                r, col = (2 * (lane % 4) + h, lane // 4) if transpose else (lane // 4, 2 * (lane % 4) + h)
                assert got[lane, j, h] == rows[8 * j + r, col]
    assert np.array_equal(F.address_lanes(F.ldmatrix(x, transpose)), np.arange(8 * x).reshape(x, 8))


def test_ldmatrix_x4_feeds_mma_a_directly_in_the_seeds_order():
    """The seed's table: matrix j's rows (lanes 8j..8j+7) are A rows 8(j%2)+r at columns 8(j//2)..+7; then lane t's
    register j holds exactly mma.sync's a_{2j}, a_{2j+1}."""
    A = np.arange(16 * 16).reshape(16, 16)
    rows = np.stack([A[8 * (lane // 8 % 2) + lane % 8, 8 * (lane // 16): 8 * (lane // 16) + 8] for lane in range(32)])
    regs = F.simulate_ldmatrix(rows, 4).reshape(32, 8)
    frag = F.mma_fragments(F.mma_atom(16))["A"]
    assert np.array_equal(regs, A[frag[..., 0], frag[..., 1]])
    assert regs[5].tolist() == [A[1, 2], A[1, 3], A[9, 2], A[9, 3], A[1, 10], A[1, 11], A[9, 10], A[9, 11]]


@pytest.mark.parametrize("x", F.LDMATRIX_COUNTS)
@pytest.mark.parametrize("transpose", [False, True])
def test_stmatrix_writes_what_ldmatrix_reads_back(x, transpose):
    regs = np.random.default_rng(7).integers(0, 2**16, size=(32, x, 2))
    rows = F.simulate_stmatrix(regs, x, transpose)
    assert rows.shape == (8 * x, 8) and np.array_equal(F.simulate_ldmatrix(rows, x, transpose), regs)


def test_wgmma_accumulator_stacks_four_warps_of_the_mma_c_fragment():
    c16 = F.mma_fragments(F.mma_atom(16))["C"]
    for n in (8, 64, 256):
        got = F.coords(F.wgmma_atom(n).layout_c, (64, n))
        for warp in range(4):
            for rep in range(n // 8):
                mine = got[32 * warp: 32 * warp + 32, 4 * rep: 4 * rep + 4]
                assert np.array_equal(mine, c16 + [16 * warp, 8 * rep])


def test_owners_inverts_coords_and_reports_the_first_of_shared_cells():
    tiled = F.tiled_mma(F.mma_atom(16), (2, 2, 1), (32, 32, 16))
    own = F.owners(tiled.tv_layout_A_tiled, (32, 16))
    at = F.coords(tiled.tv_layout_A_tiled, (32, 16))
    for m, k in [(0, 0), (17, 9), (31, 15)]:
        t, v = own[m, k]
        assert at[t, v].tolist() == [m, k] and t < 64  # warps 0 and 1 (M) hold A; 2 and 3 repeat them
    assert (own >= 0).all()


@pytest.mark.parametrize("call, message", [
    (lambda: F.mma_atom(32), "k=16"), (lambda: F.wgmma_atom(12), "multiple of 8"),
    (lambda: F.ldmatrix(3), "1, 2 or 4"), (lambda: F.stmatrix(4, transpose=1), "True (.trans) or False"),
    (lambda: F.coords(F.mma_atom(16).layout_a, (16, 8)), "outside the 16x8 tile"),
    (lambda: F.simulate_ldmatrix(np.zeros((8, 8)), 4), "lanes 0-31"),
    (lambda: F.simulate_ldmatrix(np.zeros((32, 4)), 1), "(lanes, 8)"),
    (lambda: F.simulate_stmatrix(np.zeros((32, 2)), 1), "(32, 1, 2)"),
    (lambda: F.tiled_mma(F.mma_atom(16), (2, 2)), "three modes"),
    (lambda: F.tiled_mma(F.mma_atom(16), (2, 2, 1), (24, 32, 16)), "multiple of the atom's 16 x 2"),
    (lambda: F.tiled_mma(F.wgmma_atom(64)), "mma.sync MmaAtom"),
    (lambda: F.address_lanes(F.mma_atom(16)), "CopyAtom"),
])
def test_bad_arguments_name_the_argument_and_the_fix(call, message):
    with pytest.raises(ValueError, match=None) as info:
        call()
    assert message in str(info.value), str(info.value)


def test_fragments_import_without_torch_or_the_dsl_and_load_numpy_only_for_the_tables():
    import subprocess
    import sys

    code = ("import sys, cutecourse.fragments as F; F.mma_atom(16); F.tiled_mma(F.mma_atom(8)); "
            "assert not {'numpy', 'torch', 'cutlass', 'ipywidgets'} & set(sys.modules), sorted(sys.modules); "
            "F.coords(F.mma_atom(16).layout_c, (16, 8)); assert 'numpy' in sys.modules and 'torch' not in sys.modules")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr


def test_the_lazy_names_are_exactly_the_lanes_modules_public_names():
    from cutecourse import fragments

    assert set(fragments._LANES) == set(lanes.__all__)
