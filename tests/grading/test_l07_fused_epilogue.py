"""Exercises 7.3 (a fused epilogue: row scale, beta · C, leaky ReLU) and 7.4 (a staged, vectorized store, warp by
warp): the solutions are kernel code only and pass the PTX checks for both dtypes and both archs; each mistake the PTX
can show fails them with a hint that names it without printing the answer (among them 7.3's row_scale by index
arithmetic, loaded once per accumulator, and 7.4's read-back of rows another warp staged, behind a warp barrier only,
found by following every thread's shared-memory addresses); other right answers pass; the mistakes only numbers can show
compile to PTX that passes, so that only the GPU judges fail them (shown on a GPU); the lesson's worked example and
the package's step-5 epilogue, submitted as the answers, fail the PTX checks.

Both answer cells run after the solutions notebook's given cell (the worked example's mainloop as functions); the
variants are made from the solutions by `edited`, so they follow them as they change."""

from __future__ import annotations

import inspect

import pytest

from cutecourse.grading import checks, harness
from cutecourse.grading import notebook as nbio
from cutecourse.grading.checks import l05_tiled_mma as L5
from cutecourse.grading.checks import l07_fused_epilogue as L7

from .submissions import ROOT, answer_from_file, edited, lesson_solution
from .test_no_copies import lines, occurs, tokens

LESSON = "07_epilogue"
FUSED, VECTOR = "fused_host", "vector_host"

pytestmark = pytest.mark.slow  # every PTX case compiles the kernel: about 1 s each


def given() -> str:
    """The solutions notebook's cell that both answers use: the mainloop and its host-side parts."""
    nb = nbio.load(ROOT / "solutions" / f"{LESSON}.ipynb")
    return next(nbio.source(cell) for cell in nb["cells"]
                if cell["cell_type"] == "code" and "def mainloop_atoms(" in nbio.source(cell))


def solution(exercise: str) -> str:
    """The answer cell of `exercise`, markers included."""
    return lesson_solution(LESSON, exercise)


def host(tmp_path, answer: str, name: str):
    """The host `name` of an answer cell, run after the given cell, as the grader runs them."""
    return answer_from_file(tmp_path, f"{given()}\n\n{answer}", name)


def region(source: str) -> str:
    return source[source.index(nbio.BEGIN):source.index(nbio.END)]


def with_region(source: str, body: str) -> str:
    """`source` with its answer region replaced by `body` (4-space indented kernel code)."""
    return source[:source.index(f"    {nbio.BEGIN}")] + body + source[source.index(f"    {nbio.END}"):]


#: The lesson's worked example (section 8): each accumulator, rounded, straight from its register to D.
WORKED_EPILOGUE = '''    tCgD, tCcD = thr_mma.partition_C(gD), thr_mma.partition_C(cD)
    for i in cutlass.range_constexpr(cute.size(acc)):
        if cute.elem_less(tCcD[i], mD.shape):
            tCgD[i] = acc[i].to(mD.element_type)
'''

#: The package's step 5 (gemm05_swizzle) epilogue, adapted to the cell: the whole tile staged in sD, every thread of
#: the CTA reading back 16-byte row vectors of rows other warps wrote, hence its CTA barrier; its host's row-vector
#: copy built in the kernel, and predicate.per_vector_if (package code) written out.
GEMM05_EPILOGUE = '''    tCrC = cute.make_fragment_like(acc, mD.element_type)
    tCrC.store(acc.load().to(mD.element_type))
    cute.autovec_copy(tCrC, thr_mma.partition_C(sD))
    cute.arch.sync_threads()
    c_vector = 128 // mD.element_type.width
    lanes = TILE_N // c_vector
    tiled_copy_c = cute.make_tiled_copy_tv(
        cute.make_copy_atom(cute.nvgpu.CopyUniversalOp(), mD.element_type, num_bits_per_copy=128),
        cute.make_layout((THREADS // lanes, lanes), stride=(lanes, 1)), cute.make_layout((1, c_vector)))
    thr_copy_c = tiled_copy_c.get_slice(tidx)
    tCsC = thr_copy_c.partition_S(sD)
    tCgC = thr_copy_c.partition_D(gD)
    tCcC = thr_copy_c.partition_D(cD)
    tCrC_rows = cute.make_fragment_like(tCsC)
    cute.autovec_copy(tCsC, tCrC_rows)
    pred = cute.make_rmem_tensor(cute.make_layout((1, *tCcC.shape[1:])), cutlass.Boolean)
    for i in cutlass.range_constexpr(cute.size(pred)):
        pred[i] = cute.elem_less(cute.group_modes(tCcC, 1, 3)[(0, i)], mD.shape)
    cute.copy(tiled_copy_c, tCrC_rows, tCgC, pred=pred)
'''
#: gemm05's own lines of that epilogue, as the package has them (its names: sC, gC, cC).
GEMM05_LINES = ["cute.autovec_copy(tCrC, thr_mma.partition_C(sC))",
                "tCsC = thr_copy_c.partition_S(sC)", "tCgC = thr_copy_c.partition_D(gC)",
                "tCcC = thr_copy_c.partition_D(cC)",
                "tCrC_rows = cute.make_fragment_like(tCsC)", "cute.autovec_copy(tCsC, tCrC_rows)",
                "cute.make_layout((threads // lanes, lanes), stride=(lanes, 1)), cute.make_layout((1, c_vector)))"]

# --------------------------------------------------------------------------- 7.3's variants

SCALED = "x = tCrS.load() * acc.load() + beta * tCrC.load()"
BETA_IF = "    if beta != 0.0:  # decided at run time: with beta == 0, C is never read, so NaN in C cannot reach D\n"
C_READ = '''        for i in cutlass.range_constexpr(cute.size(acc)):
            if cute.elem_less(tCcD[i], mD.shape):
                tCrC[i] = tCgC[i].to(cutlass.Float32)
'''
D_STORE = '''        if cute.elem_less(tCcD[i], mD.shape):
            tCgD[i] = tCrD[i]
'''


DISTINCT_READ = """    for j in cutlass.range_constexpr(cute.size(scales)):
        if cute.elem_less(scale_rows[j], rows.shape):
            scale_regs[j] = scales[j]
"""
#: The scale of each accumulator read from row_scale at the accumulator's row, worked out from its coordinate.
INDEXED_READ = """    tCcD_all = thr_mma.partition_C(cD)
    tCrS = cute.make_fragment_like(acc)
    tCrS.fill(0.0)
    for i in cutlass.range_constexpr(cute.size(acc)):
        if cute.elem_less(tCcD_all[i], mD.shape):
            tCrS[i] = mRowScale[tCcD_all[i][0]]
"""
#: The broadcast view read at each of the thread's accumulators: the layout, without what its stride-0 modes say.
EVERY_ELEMENT_READ = """    tCcD_all = thr_mma.partition_C(cD)
    tCrS = cute.make_fragment_like(acc)
    tCrS.fill(0.0)
    for i in cutlass.range_constexpr(cute.size(acc)):
        if cute.elem_less(tCcD_all[i], mD.shape):
            tCrS[i] = tCgS[i]
"""
UNGUARDED_READ = """    for j in cutlass.range_constexpr(cute.size(scales)):
        scale_regs[j] = scales[j]
"""


def fused(*changes: tuple[str, str]) -> str:
    return edited(solution("7.3"), *changes)


def constexpr_scalars() -> str:
    """beta and slope as compile-time constants of the kernel and the host."""
    return fused(("beta: cutlass.Float32, slope: cutlass.Float32", "beta: cutlass.Constexpr, slope: cutlass.Constexpr"))


#: name -> (variant, what its PTX check says). Each fails 7.3's PTX check.
FUSED_PTX_MISTAKES = {
    "the worked example's epilogue": (lambda: with_region(solution("7.3"), WORKED_EPILOGUE), "depends on neither"),
    "the package's step-5 epilogue": (lambda: with_region(solution("7.3"), GEMM05_EPILOGUE.replace("sD", "sA")),
                                      "depends on neither"),
    "row_scale not applied": (lambda: fused((SCALED, "x = acc.load() + beta * tCrC.load()")), "reads row_scale"),
    "C never added": (lambda: fused((SCALED, "x = tCrS.load() * acc.load()")), "reads C"),
    "beta and slope Constexpr": (constexpr_scalars, "runtime Float32"),
    "D stored without its predicate": (lambda: fused((D_STORE, "        tCgD[i] = tCrD[i]\n")),
                                       "stores are not behind a predicate"),
    "C read without its predicate": (lambda: fused((C_READ, C_READ.replace(
        "            if cute.elem_less(tCcD[i], mD.shape):\n                tCrC", "            tCrC"))),
        "reads are not behind a predicate"),
    "C read whatever beta is": (lambda: fused((BETA_IF, "    if True:\n")), "run whatever beta is"),
    "C read, then zeroed where beta is 0": (lambda: fused((BETA_IF, "    if True:\n"), (
        "    x = tCrS", "    if beta == 0.0:\n        tCrC.fill(0.0)\n    x = tCrS")), "run whatever beta is"),
    "row_scale by index arithmetic": (lambda: fused((DISTINCT_READ, INDEXED_READ)), "loaded 32 times a thread"),
    "row_scale read at every element of the view": (lambda: fused((DISTINCT_READ, EVERY_ELEMENT_READ)),
                                                    "loaded 32 times a thread"),
    "the distinct scales read without their predicate": (lambda: fused((DISTINCT_READ, UNGUARDED_READ)),
                                                         "reads are not behind a predicate"),
}


#: name -> (variant, what the GPU judge says). They compile to PTX that passes; only numbers show them.
FUSED_GPU_MISTAKES = {
    "a plain ReLU": (lambda: fused(("cute.where(x > 0.0, x, slope * x)", "cute.where(x > 0.0, x, 0.0 * x)")),
                     "plain ReLU"),
    "row_scale on beta · C too": (lambda: fused((SCALED, "x = tCrS.load() * (acc.load() + beta * tCrC.load())")),
                                  "row_scale multiplies beta · C too"),
}

# --------------------------------------------------------------------------- 7.4's variants

WARP_SYNC = "    cute.arch.sync_warp()"
STAGE = "    cute.autovec_copy(tCrD, thr_mma.partition_C(sD))"


def vector(*changes: tuple[str, str]) -> str:
    return edited(solution("7.4"), *changes)


#: name -> (variant, what its PTX check says). Each fails 7.4's PTX check.
VECTOR_PTX_MISTAKES = {
    "the worked example's epilogue": (lambda: with_region(solution("7.4"), WORKED_EPILOGUE), "st.global of [16] bits"),
    "the package's step-5 epilogue": (lambda: with_region(solution("7.4"), GEMM05_EPILOGUE), "CTA barrier"),
    "a CTA barrier": (lambda: vector((WARP_SYNC, "    cute.arch.sync_threads()")), "CTA barrier"),
    "no barrier": (lambda: vector((WARP_SYNC, "    pass")), "nothing orders the staged writes"),
    "8-byte vectors": (lambda: vector(("num_bits_per_copy=128", "num_bits_per_copy=64"),
                                      ("lanes = TILE_N // VEC", "lanes = TILE_N // (VEC // 2)"),
                                      ("cute.make_layout((1, VEC)))", "cute.make_layout((1, VEC // 2)))")),
                       "st.global of [64] bits"),
    "stores without their predicate": (lambda: vector(("tDrD, tDgD, pred=pred)", "tDrD, tDgD)")),
                                       "not behind a predicate"),
    "step 5's CTA-wide read-back behind a warp barrier": (
        lambda: with_region(solution("7.4"), GEMM05_EPILOGUE.replace("sync_threads()", "sync_warp()")),
        "that warp 1 wrote"),
    "the warp barrier before the staging": (
        lambda: vector((WARP_SYNC, "    pass  #"), (STAGE, WARP_SYNC + "\n" + STAGE)),
        "nothing orders the staged writes"),
    "each band read back from another warp's rows": (
        lambda: vector(("cute.local_tile(sD, band, (warp, 0))", "cute.local_tile(sD, band, (WARPS_M - 1 - warp, 0))")),
        "that warp 3 wrote"),
}


def band_stored_elsewhere() -> str:
    """Each warp stores its band at the rows of the warp opposite (w -> 3 - w): staged and read back right, stored
    wrong; no race, the same numbers every run."""
    return vector(("cute.local_tile(gD, band, (warp, 0))", "cute.local_tile(gD, band, (WARPS_M - 1 - warp, 0))"),
                  ("cute.local_tile(cD, band, (warp, 0))", "cute.local_tile(cD, band, (WARPS_M - 1 - warp, 0))"))


VECTOR_GPU_MISTAKES = {"each band stored at another warp's rows": (band_stored_elsewhere, "wrong places")}

EVERY = {**{f"7.3 {k}": v for k, (v, _) in {**FUSED_PTX_MISTAKES, **FUSED_GPU_MISTAKES}.items()},
         **{f"7.4 {k}": v for k, (v, _) in {**VECTOR_PTX_MISTAKES, **VECTOR_GPU_MISTAKES}.items()}}


def test_the_checks_are_registered_for_the_hosts_the_exercises_name():
    for ptx, gemm, target in (("fused_epilogue_ptx", "fused_epilogue_gemm", FUSED),
                              ("vector_store_ptx", "vector_store_gemm", VECTOR)):
        ptx, gemm = checks.REGISTRY[ptx], checks.REGISTRY[gemm]
        assert (ptx.target, ptx.via, ptx.gpu) == (target, "ptx", None)
        assert (gemm.target, gemm.via, gemm.gpu) == (target, "launch", 80)
        assert dict(ptx.options) == dict(gemm.options) == {"vector": 8}
        assert {case[0] for case in ptx.cases()} == {"sm_80", "sm_90a"}


def test_the_cells_tile_constants_are_the_checks():
    assert f"TILE_M, TILE_N, TILE_K = {L7.TILE_M}, {L7.TILE_N}, {L7.TILE_K}" in given()
    assert f"WARPS_M, WARPS_N = {L7.WARPS_M}, 1" in given()


def test_the_hidden_shapes_are_ragged_and_cover_beta_zero_and_both_signs():
    shapes = [s[:3] for s in L7.FUSED_SHAPES] + L7.VECTOR_SHAPES
    assert all(n % 8 == 0 and k % 8 == 0 for _, n, k in shapes)
    assert any(m % L7.TILE_M for m, _, _ in shapes) and any(n % L7.TILE_N for _, n, _ in shapes)
    assert any(k < L7.TILE_K for _, _, k in shapes) and any(k > 2 * L7.TILE_K for _, _, k in shapes)
    betas, slopes = [s[3] for s in L7.FUSED_SHAPES], [s[4] for s in L7.FUSED_SHAPES]
    assert 0.0 in betas and min(betas) < 0 < max(betas) and 0.0 in slopes
    band = L7.TILE_M // L7.WARPS_M
    assert any(m % L7.TILE_M and m % L7.TILE_M % band for m, _, _ in L7.VECTOR_SHAPES), "M cutting through a band"


def test_the_fused_cases_poison_c_exactly_where_beta_is_zero():
    import numpy as np

    from cutecourse.grading import wire

    for case in L7.fused_cases(1, L7.FUSED_CHECK_SHAPES, "bfloat16"):
        c = wire.decode(case[2]["$tensor"]["array"])
        scale = wire.decode(case[3]["$tensor"]["array"])
        m = c.shape[0]
        assert np.isnan(c).all() if case[5] == 0.0 else np.isfinite(c).all()
        assert scale.shape == (L7.padded(m),) and np.isfinite(scale[:m]).all() and np.isnan(scale[m:]).all()


@pytest.mark.parametrize("name", ["7.3", "7.4", *EVERY])
def test_every_answer_cell_is_kernel_code_only(name):
    source = solution(name) if name in ("7.3", "7.4") else EVERY[name]()
    assert harness.restricted(source, ["cutlass.utils"]) is None
    assert harness.restricted(given()) is None  # the given cell keeps the rules too


@pytest.mark.parametrize("exercise, check, name", [("7.3", "fused_epilogue_ptx", FUSED),
                                                   ("7.4", "vector_store_ptx", VECTOR)])
def test_the_solutions_pass_the_ptx_checks_for_both_dtypes_and_archs(tmp_path, exercise, check, name):
    line = checks.REGISTRY[check].run(host(tmp_path, solution(exercise), name))
    assert line == f"{checks.PASS} {check}: all {len(L5.CHECK_PTX_CASES)} cases pass", line


PTX_MISTAKES = [("7.3", "fused_epilogue_ptx", FUSED, k, *v) for k, v in FUSED_PTX_MISTAKES.items()] + \
               [("7.4", "vector_store_ptx", VECTOR, k, *v) for k, v in VECTOR_PTX_MISTAKES.items()]


@pytest.mark.parametrize("exercise, check, name, mistake, variant, hint", PTX_MISTAKES,
                         ids=[f"{e} {k}" for e, _, _, k, _, _ in PTX_MISTAKES])
def test_each_mistake_the_ptx_shows_fails_the_ptx_check_with_its_hint(tmp_path, exercise, check, name, mistake,
                                                                     variant, hint):
    line = checks.REGISTRY[check].run(host(tmp_path, variant(), name))
    assert line.startswith(f"{checks.FAIL} {check}: ") and hint in line, line
    (said,) = lines(line)
    assert not [statement for statement in lines(region(solution(exercise))) if statement in said], line


GPU_MISTAKES = [("7.3", "fused_epilogue_ptx", FUSED, k, v) for k, (v, _) in FUSED_GPU_MISTAKES.items()] + \
               [("7.4", "vector_store_ptx", VECTOR, k, v) for k, (v, _) in VECTOR_GPU_MISTAKES.items()]


#: Right answers written otherwise than the solution: beta tested inside each element's guard, and the scales' rows
#: taken from D's own identity tensor (coordinates (m, 0) in the broadcast view), compared with D's shape.
OTHER_RIGHT = {
    "beta tested inside the element guard": (BETA_IF + C_READ, """    for i in cutlass.range_constexpr(cute.size(acc)):
        if cute.elem_less(tCcD[i], mD.shape):
            if beta != 0.0:
                tCrC[i] = tCgC[i].to(cutlass.Float32)
"""),
    "the scales' rows from D's identity tensor": (
        "    cS = cute.make_tensor(rows.iterator, cute.make_layout(mD.shape, stride=(rows.stride[0], 0)))\n",
        "    whole = cute.make_identity_tensor(mD.shape)\n"
        "    cS = cute.make_tensor(whole.iterator, cute.make_layout(mD.shape, stride=(whole.stride[0], 0)))\n"),
}


@pytest.mark.parametrize("change", OTHER_RIGHT, ids=list(OTHER_RIGHT))
def test_other_right_answers_pass_the_ptx_check(tmp_path, change):
    answer = fused(OTHER_RIGHT[change])
    if change == "the scales' rows from D's identity tensor":
        answer = answer.replace("cute.elem_less(scale_rows[j], rows.shape)", "cute.elem_less(scale_rows[j], mD.shape)")
    line = checks.REGISTRY["fused_epilogue_ptx"].run(host(tmp_path, answer, FUSED))
    assert line.startswith(checks.PASS), line


#: Right 7.4s written otherwise than the solution: the staging one 2-byte value at a time, and the lanes of the band's
#: copy numbered down the rows first (lane l reads row l % 4): the simulation follows both and finds each warp reading
#: back only what it wrote.
OTHER_RIGHT_STORES = {
    "staged one value at a time": (
        STAGE + "\n",
        "    tCsD = thr_mma.partition_C(sD)\n"
        "    for i in cutlass.range_constexpr(cute.size(tCrD)):\n"
        "        tCsD[i] = tCrD[i]\n"),
    "lanes down the rows first": ("cute.make_layout((32 // lanes, lanes), stride=(lanes, 1))",
                                  "cute.make_layout((32 // lanes, lanes), stride=(1, 32 // lanes))"),
}


@pytest.mark.parametrize("change", OTHER_RIGHT_STORES, ids=list(OTHER_RIGHT_STORES))
def test_other_right_stores_pass_the_ptx_check(tmp_path, change):
    line = checks.REGISTRY["vector_store_ptx"].run(host(tmp_path, vector(OTHER_RIGHT_STORES[change]), VECTOR))
    assert line.startswith(checks.PASS), line


@pytest.mark.parametrize("exercise, check, name, mistake, variant", GPU_MISTAKES,
                         ids=[f"{e} {k}" for e, _, _, k, _ in GPU_MISTAKES])
def test_the_mistakes_only_numbers_show_compile_to_ptx_that_passes(tmp_path, exercise, check, name, mistake,
                                                                   variant):
    line = checks.REGISTRY[check].run(host(tmp_path, variant(), name))
    assert line.startswith(checks.PASS), line


def test_the_adapted_epilogue_is_the_packages_step_5():
    from cutecourse.kernels.gemm import gemm05_swizzle

    package, adapted = tokens(inspect.getsource(gemm05_swizzle)), tokens(GEMM05_EPILOGUE)
    for line in GEMM05_LINES:
        assert occurs(tokens(line), package), f"gemm05 no longer has {line!r}; update GEMM05_EPILOGUE"
        assert occurs(tokens(line.replace("threads", "THREADS")), adapted), line


def test_the_worked_example_epilogue_is_the_lessons(tmp_path):
    """WORKED_EPILOGUE is what section 8 of the lesson shows (once the lesson notebook is built)."""
    path = ROOT / "notebooks" / f"{LESSON}.ipynb"
    if not path.exists():
        pytest.skip("notebooks/07_epilogue.ipynb is not built yet")
    shown = [tokens(nbio.source(cell)) for cell in nbio.load(path)["cells"]]
    assert any(occurs(tokens(WORKED_EPILOGUE), t) for t in shown)


def test_the_hints_name_the_mistakes_only_numbers_show():
    """The GPU judge's diagnosis, fed what each GPU mistake computes (no GPU needed: the judge is plain numpy)."""
    import numpy as np

    (case,) = L7.fused_cases(5, [(70, 72, 40, 0.75, 0.2)], "float16")
    variants = L7.fused_variants(case)
    assert L7.fused_hint(case, variants[""]) is None
    for mistake, got in variants.items():
        if mistake:
            hint = L7.fused_hint(case, got.astype(np.float32))
            assert hint is not None and mistake in hint, (mistake, hint)
    (zero,) = L7.fused_cases(6, [(70, 72, 40, 0.0, 0.2)], "float16")
    assert "must not be read" in L7.fused_hint(zero, np.full((70, 72), np.nan, np.float32))
    (plain,) = L7.vector_cases(7, [(70, 72, 40)], "bfloat16")
    ref = L7.input_of(plain) @ L7.input_of(plain[1:]).T
    assert L7.vector_hint(plain, ref) is None and "wrong places" in L7.vector_hint(plain, ref[::-1])
    assert "never written" in L7.vector_hint(plain, np.where(np.arange(70)[:, None] < 64, ref, np.nan))


@pytest.mark.gpu(80)
@pytest.mark.parametrize("exercise, check, name", [("7.3", "fused_epilogue_gemm", FUSED),
                                                   ("7.4", "vector_store_gemm", VECTOR)])
def test_on_a_gpu_the_solutions_compute_their_epilogues(tmp_path, exercise, check, name):
    line = checks.REGISTRY[check].run(host(tmp_path, solution(exercise), name))
    assert line.startswith(checks.PASS), line


GPU_JUDGED = [("fused_epilogue_gemm", FUSED, k, *v) for k, v in FUSED_GPU_MISTAKES.items()] + \
             [("vector_store_gemm", VECTOR, k, *v) for k, v in VECTOR_GPU_MISTAKES.items()]


@pytest.mark.gpu(80)
@pytest.mark.parametrize("check, name, mistake, variant, hint", GPU_JUDGED, ids=[g[2] for g in GPU_JUDGED])
def test_on_a_gpu_the_mistakes_only_numbers_show_fail_with_their_hint(tmp_path, check, name, mistake, variant, hint):
    line = checks.REGISTRY[check].run(host(tmp_path, variant(), name))
    assert line.startswith(f"{checks.FAIL} {check}: ") and hint in line, line
