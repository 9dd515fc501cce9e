"""Exercise 8.4, the capstone (split-K with a deterministic reduction): the solution is kernel code only and passes
the PTX check for both dtypes and both archs; each mistake the PTX can show (the races on the workspace and on the
arrival's flag, floating-point atomics, no arrival count) fails it with a hint that names the mistake without
printing the answer; the mistakes only numbers can show (the reduction in another order, the last CTA's own
registers first, a slice omitted, slices rounded before the sum, another K partition) compile to PTX that passes,
and the judge names each one on outputs made here, then on a GPU from the kernels themselves; the package's own
GEMM and the lesson's worked example, submitted as the answer, fail the PTX check; the step-5 wrapper the speed
judgement times is the package's step, exported as a module; and on a GPU the grader's launcher times a module and
judges what its last timed launch left, so a kernel that never resets its counters fails there.

The variants are made from the solution by `edited`, so they follow it as it changes."""

from __future__ import annotations

import dataclasses
import re

import numpy as np
import pytest

from cutecourse.grading import checks, harness, modules, sandbox, wire
from cutecourse.grading import notebook as nbio
from cutecourse.grading.checks import l05_tiled_mma as L5
from cutecourse.grading.checks import l08_splitk as L

from .submissions import answer_from_file, assert_kernel_checks, edited, lesson_solution
from .test_lesson_06 import cell_constants
from .test_no_copies import lines, notebook_texts, occurs, tokens

LESSON = "08_dispatch_profiling"
HOST = "splitk_host"


def solution() -> str:
    """8.4's answer cell, markers included."""
    return lesson_solution(LESSON, "8.4")


def region(source: str) -> str:
    return source[source.index(nbio.BEGIN):source.index(nbio.END)]


FIRST_BARRIER = ("    # Arrive: every warp's stores first (the barrier), then one thread releases them (the fence) and "
                 "counts.\n    cute.arch.sync_threads()\n")
RELEASE = "        cute.arch.fence_acq_rel_gpu()\n        counter = "
ATOMIC = 'arrived[0] = cute.arch.atomic_add(counter, cutlass.Int32(1), sem="acq_rel", scope="gpu")'
SECOND_BARRIER = "    cute.arch.sync_threads()\n    if arrived[0] == splits - 1:"
ACQUIRE = "        cute.arch.fence_acq_rel_gpu()  # acquire: the other CTAs' slices, as they released them\n"
STORE = """    tCgW = slice_of(split)
    for i in cutlass.range_constexpr(cute.size(acc)):
        if cute.elem_less(tCcD[i], mD.shape):
            tCgW[i] = acc[i]"""
SUM = "        for s in range(splits):  # split 0 first, whichever CTA arrived last: the same sum every run\n"
ADD = "                    acc[i] = acc[i] + tCgS[i]"


def relaxed(source: str) -> str:
    return edited(source, (ATOMIC, ATOMIC.replace('sem="acq_rel"', 'sem="relaxed"')))


#: name -> (variant, what its PTX check says). Each fails the PTX check.
PTX_MISTAKES = {
    # a race on the workspace: thread 0 counts the CTA as arrived while other warps may still be storing
    "no barrier before the arrival": (lambda: edited(solution(), (FIRST_BARRIER, "")),
                                      "no CTA barrier between the workspace stores and the atomic add"),
    # a race on the workspace: nothing makes the stores visible before the count that announces them
    "no release": (lambda: relaxed(edited(solution(), (RELEASE, "        counter = "))),
                   "nothing orders the workspace stores before the arrival"),
    # a race on the flag: threads read the old count before thread 0 has written it
    "no barrier after the arrival": (lambda: edited(solution(), (SECOND_BARRIER, "    if arrived[0] == splits - 1:")),
                                     "no CTA barrier between the atomic add and the reads"),
    "no acquire": (lambda: relaxed(edited(solution(), (ACQUIRE, ""))),
                   "nothing orders the reads of the other slices after the arrival"),
    # the last split reduces, whether or not the others have stored: no count at all
    "split S - 1 reduces without counting": (lambda: edited(solution(), (ATOMIC, "arrived[0] = split")),
                                             "nothing counts the arrivals"),
    # the partials added into one slice as they come
    "floating-point atomics": (lambda: edited(solution(), (STORE, STORE.replace("slice_of(split)", "slice_of(0)")
                                                           .replace("tCgW[i] = acc[i]", "cute.arch.atomic_add("
                                                                    "tCgW.iterator + cute.crd2idx(i, tCgW.layout), "
                                                                    "acc[i])"))),
                               "adds floating-point values with atomics"),
}


def own_registers_first() -> str:
    """The last CTA keeps its own partial in its registers and adds the other slices to it: the sum starts from
    whichever split arrived last."""
    own = ADD.replace("acc[i] = acc[i] + tCgS[i]", "if s != split:\n                        acc[i] = acc[i] + tCgS[i]")
    return edited(solution(), ("        acc.fill(0.0)\n        for s", "        for s"), (ADD, own))


#: Mistakes only numbers show: they compile to what the PTX check wants. name -> (variant, what the judge says)
GPU_MISTAKES = {
    "reversed order": (lambda: edited(solution(), (SUM, SUM.replace("range(splits)", "range(splits - 1, -1, -1)"))),
                       "from the last split to the first"),
    "the last CTA's own registers first": (lambda: own_registers_first(), "whichever CTA arrives last"),
    "the last slice omitted": (lambda: edited(solution(), (SUM, SUM.replace("range(splits)", "range(splits - 1)"))),
                               "not the fp32 sum of the workspace's slices"),
    "slices rounded before the sum": (lambda: edited(solution(), (ADD, ADD.replace(
        "tCgS[i]", "tCgS[i].to(mD.element_type).to(cutlass.Float32)"))), "already rounded"),
    "even slices, the remainder dropped": (lambda: edited(solution(), (
        "    k_first = split * k_tiles // splits\n    k_stop = (split + 1) * k_tiles // splits",
        "    k_first = split * (k_tiles // splits)\n    k_stop = k_first + k_tiles // splits")),
        "is not the product of split"),
}


def with_region(source: str, kernel: str, host: str) -> str:
    """`source` with its kernel's answer region replaced by `kernel` and the host's by `host`."""
    first, rest = source.split(f"    {nbio.BEGIN}", 1)
    _, rest = rest.split(f"    {nbio.END}", 1)
    between, rest = rest.split(f"    {nbio.BEGIN}", 1)
    _, after = rest.split(f"    {nbio.END}", 1)
    return f"{first}{kernel}{between}{host}{after}"


#: The ladder's own GEMM in the cell: the given mainloop (step 5's) over every k-tile, one CTA a tile, D stored from
#: the registers, as step 5 does, and no workspace, count or split.
PACKAGE_GEMM = '''    mainloop(tiled_mma, acc, tiled_copy_g2s, tiled_copy_s2r_a, tiled_copy_s2r_b, mA, mB, gA, gB,
             cA, cB, sA, sB, tidx, 0, k_tiles)
    tCgD = thr_mma.partition_C(gD)
    for i in cutlass.range_constexpr(cute.size(acc)):
        if cute.elem_less(tCcD[i], mD.shape):
            tCgD[i] = acc[i].to(mD.element_type)
'''
PACKAGE_GRID = "    grid = ((mD.shape[0] + TILE_M - 1) // TILE_M, (mD.shape[1] + TILE_N - 1) // TILE_N, 1)\n"


def package_gemm() -> str:
    return with_region(solution(), PACKAGE_GEMM, PACKAGE_GRID)


def lesson_demo() -> str:
    """The lesson's worked example (section 7: the column sums, reduced by the last block in block order), with a host
    of the exercise's signature that launches it over the workspace's first slice."""
    cell = next(t for t in notebook_texts(LESSON) if "def column_sums_kernel(" in t)
    kernel = cell[cell.index("COLUMNS = 128"):cell.index("stand_ins = ")]
    return f"""import cutlass
import cutlass.cute as cute

{kernel}
@cute.jit
def splitk_host(mA: cute.Tensor, mB: cute.Tensor, mD: cute.Tensor, mWork: cute.Tensor, mCount: cute.Tensor,
                stream):
    column_sums(mWork[0, None, None], mWork[1, None, None], mWork[2, 0, None], mCount)
"""


#: The code a learner can read nearest to the answer, submitted as it, and what the PTX check says of it.
NOT_THE_ANSWER = {"the package's GEMM": (package_gemm, "never reads blockIdx.z"),
                  "the lesson's worked example": (lesson_demo, "no mma.sync.m16n8k16")}


def variant(name: str) -> str:
    everything = {**PTX_MISTAKES, **GPU_MISTAKES, **NOT_THE_ANSWER}
    return solution() if name == "solution" else everything[name][0]()


pytestmark = pytest.mark.slow  # every PTX case compiles the kernel: several seconds each


def test_the_checks_are_registered_for_the_host_the_exercise_names():
    assert_kernel_checks("splitk", HOST)


def test_the_cells_constants_are_the_checks():
    cell = cell_constants(solution())
    assert {n: cell[n] for n in ("TILE_M", "TILE_N", "TILE_K", "STAGES")} == \
        {"TILE_M": L.TILE_M, "TILE_N": L.TILE_N, "TILE_K": L.TILE_K, "STAGES": L.STAGES}
    assert cell["VEC"] == L.VECTOR


def test_the_slices_cover_k_once_and_differ_by_at_most_a_k_tile():
    for k in (8, 24, 32, 320, 1000, 1056, 16384):
        for splits in range(1, 12):
            bounds = L.slice_bounds(k, splits)
            assert bounds[0][0] == 0 and bounds[-1][1] == k and len(bounds) == splits
            assert all(hi == lo for (_, hi), (lo, _) in zip(bounds, bounds[1:]))
            sizes = [-(-(hi - lo) // L.TILE_K) for lo, hi in bounds]
            assert max(sizes) - min(sizes) <= 1


def test_the_hidden_shapes_have_uneven_and_empty_slices_and_ragged_tiles():
    k_tiles = [(-(-k // L.TILE_K), s) for _, _, k, s in L.SHAPES]
    assert any(kt % s for kt, s in k_tiles), "split counts that do not divide the k-tiles"
    assert any(s > kt for kt, s in k_tiles), "more splits than k-tiles: empty slices"
    assert any(s == 1 for _, s in k_tiles) and max(s for _, s in k_tiles) >= 7
    assert all(n % 8 == 0 and k % 8 == 0 for _, n, k, _ in L.SHAPES)
    assert any(m % L.TILE_M for m, _, _, _ in L.SHAPES) and any(n % L.TILE_N for _, n, _, _ in L.SHAPES)


def test_the_cancelling_case_cancels_exactly():
    case = L.cancelling_case(1, 130, 72, 3, 2, "bfloat16")
    a, b = checks.input_of(case), checks.input_of(case[1:])
    (lo0, hi0), (lo1, hi1), _ = L.slice_bounds(a.shape[1], 3)
    first, second = a[:, lo0:hi0] @ b[:, lo0:hi0].T, a[:, lo1:hi1] @ b[:, lo1:hi1].T
    assert np.array_equal(first, -second) and np.all(np.abs(first) == 2.0**16 * (hi0 - lo0))
    assert np.array_equal(first.astype(np.float32).astype(np.float64), first)  # exact in fp32


def simulated(case, order=None, round_slices=False, partition=None):
    """(D, workspace) as a kernel would leave them: the slices in fp32 from float64, D their fp32 sum in `order`."""
    m, n, k, splits = L.shape_of(case)
    a, b = checks.input_of(case), checks.input_of(case[1:])
    bounds = partition or L.slice_bounds(k, splits)
    work = np.stack([(a[:, lo:hi] @ b[:, lo:hi].T).astype(np.float32) for lo, hi in bounds])
    dtype = case[2]["$poisoned"]["dtype"]
    total = np.zeros((m, n), np.float32)
    for s in (range(splits) if order is None else order):
        total = total + (checks.rounded(work[s], dtype).astype(np.float32) if round_slices else work[s])
    return checks.rounded(total, dtype), work


def test_the_judge_names_each_mistake_only_numbers_show():
    case = L.cancelling_case(3, 200, 136, 3, 2, "bfloat16")
    assert L.gemm_hint(case, *simulated(case)) is None
    assert "from the last split to the first" in L.gemm_hint(case, *simulated(case, order=[2, 1, 0]))
    assert "whichever CTA arrives last" in L.gemm_hint(case, *simulated(case, order=[2, 0, 1]))
    assert "not the fp32 sum" in L.gemm_hint(case, *simulated(case, order=[0, 1]))
    normal = L.cases(4, [(130, 72, 640, 4)], "bfloat16")[0]  # slices that do not cancel: rounding each one shows
    assert L.gemm_hint(normal, *simulated(normal)) is None
    assert "already rounded" in L.gemm_hint(normal, *simulated(normal, round_slices=True))
    d, work = simulated(case)
    work[1, 5, 7] = np.nan
    assert "slice 1 were never written" in L.gemm_hint(case, d, work)
    d, work = simulated(case)
    d[3, 4] = np.nan
    assert "elements of D were never written" in L.gemm_hint(case, d, work)
    uneven = L.cases(5, [(100, 72, 320, 3)], "float16")[0]  # 10 k-tiles: 3, 3, 4
    assert L.gemm_hint(uneven, *simulated(uneven)) is None
    wrong = simulated(uneven, partition=[(0, 96), (96, 192), (192, 288)])
    assert "is not the product of split 2" in L.gemm_hint(uneven, *wrong)


@pytest.mark.parametrize("name", ["solution", *PTX_MISTAKES, *GPU_MISTAKES, *NOT_THE_ANSWER])
def test_every_answer_cell_is_kernel_code_only(name):
    assert harness.restricted(variant(name)) is None


def test_the_solution_passes_the_ptx_check_for_both_dtypes_and_archs(tmp_path):
    line = checks.splitk_ptx.run(answer_from_file(tmp_path, solution(), HOST))
    assert line == f"{checks.PASS} splitk_ptx: all {len(L5.CHECK_PTX_CASES)} cases pass", line


@pytest.mark.parametrize("name", sorted([*PTX_MISTAKES, *NOT_THE_ANSWER]))
def test_each_mistake_the_ptx_shows_and_the_code_nearest_the_answer_fail_the_ptx_check(tmp_path, name):
    hint = {**PTX_MISTAKES, **NOT_THE_ANSWER}[name][1]
    line = checks.splitk_ptx.run(answer_from_file(tmp_path, variant(name), HOST))
    assert line.startswith(f"{checks.FAIL} splitk_ptx: ") and hint in line, line
    (said,) = lines(line)  # the hint holds no statement of the answer
    assert not [statement for statement in lines(region(solution())) if statement in said], line


#: The PTX check on one of its cases. The mistakes that only numbers show change which slices are summed, in what order
#: and after what rounding, the same in every dtype and arch; the solution passes the check's cases above (and the
#: hidden test's whole grid in its grade).
ONE_CASE_PTX = dataclasses.replace(checks.splitk_ptx, cases=lambda: [L.ptx_case("bfloat16", "sm_90a")])


@pytest.mark.parametrize("name", sorted(GPU_MISTAKES))
def test_the_mistakes_only_numbers_show_compile_to_ptx_that_passes(tmp_path, name):
    line = ONE_CASE_PTX.run(answer_from_file(tmp_path, variant(name), HOST))
    assert line == f"{checks.PASS} splitk_ptx: all 1 cases pass", line


def test_the_package_gemm_is_step_5s_mainloop_and_the_demo_is_the_lessons():
    """The given mainloop is step 5's (so PACKAGE_GEMM is the package's GEMM in the cell), and lesson_demo() takes its
    kernel from the lesson notebook."""
    from cutecourse.kernels.gemm import steps

    package = tokens(steps.source(5))
    for line in ("if kb == k_blocks - 1:", "kn = (kb + 1) % k_blocks", "write = read - 1", "read = nxt"):
        assert occurs(tokens(line), package) and line in solution(), line
    assert "def column_sums_kernel(" in lesson_demo()


def test_the_step_wrapper_is_the_package_step_compiled_as_a_module():
    value, _ = sandbox.execute(L.step_host(), [wire.argument("sm_80"), *L.ptx_case("bfloat16", "sm_80")[1:]],
                               "module", {"vector": L.VECTOR})
    module = modules.read(value)
    assert module.sm == 80 and len(module.kernels) == 1 and "ldmatrix" in module.ptx
    assert re.search(r"mma\.sync\.aligned\.m16n8k16", module.ptx) and "%ctaid.z" not in module.ptx


def test_the_speed_hint_passes_the_margin_and_names_what_to_look_at():
    assert L.speed_hint(L.SPEED_MARGIN, 4) is None and L.speed_hint(2.0, 4) is None
    hint = L.speed_hint(0.8, 4)
    assert "0.80×" in hint and f"{L.SPEED_MARGIN}×" in hint and "last CTA" in hint


# --------------------------------------------------------------------------- on a GPU


@pytest.mark.gpu(80)
def test_on_a_gpu_the_solution_computes_the_gemm(tmp_path):
    line = checks.splitk_gemm.run(answer_from_file(tmp_path, solution(), HOST))
    assert line.startswith(checks.PASS), line


@pytest.mark.gpu(80)
@pytest.mark.parametrize("name", sorted(GPU_MISTAKES))
def test_on_a_gpu_the_mistakes_only_numbers_show_fail_with_their_hint(tmp_path, name):
    line = checks.splitk_gemm.run(answer_from_file(tmp_path, variant(name), HOST))
    assert line.startswith(checks.FAIL) and GPU_MISTAKES[name][1] in line, line


NO_RESET = ("            mCount[tm, tn] = 0  # ready for the next launch", "            arrived[0] = 0")


@pytest.mark.gpu(80)
def test_on_a_gpu_the_launcher_times_a_module_and_judges_its_last_launch(tmp_path):
    """The grader's launcher, in this process: `repeat` returns milliseconds per launch and the outputs of the last
    timed launch, the outputs poisoned again before; a kernel that never resets its counters is right once, then
    never reduces again."""
    import torch

    from cutecourse.grading import launcher

    torch.zeros(1, device="cuda")  # a context for the driver calls
    case = L.cases(7, [(256, 264, 2048, 3)], "float16")[0]

    def module(source: str):
        host = answer_from_file(tmp_path, source, HOST)
        value, _ = sandbox.execute(host, [wire.argument(None), *case], "module", {"vector": L.VECTOR})
        return modules.read(value)

    right, stale = module(solution()), module(edited(solution(), NO_RESET))
    outputs, ms = launcher.run(right.object, list(case), L.VECTOR, repeat=5)
    assert ms is not None and ms > 0 and L.gemm_hint(case, *outputs) is None
    outputs, ms = launcher.run(stale.object, list(case), L.VECTOR)
    assert ms is None and L.gemm_hint(case, *outputs) is None  # right on its first launch
    outputs, _ = launcher.run(stale.object, list(case), L.VECTOR, repeat=3)
    assert "elements of D were never written" in L.gemm_hint(case, *outputs)
