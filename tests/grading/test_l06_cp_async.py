"""Exercise 6.4 (the cp.async multistage mainloop): the solution is kernel code only and passes the PTX check for
both dtypes and both archs; each classic mistake the PTX can show fails it with a hint that names the mistake
without printing the answer; the mistakes only numbers can show compile to PTX that passes, so that only the GPU
test fails them; the package's own step-4 mainloop, pasted into the cell, fails the PTX check (adapted) or the
trace (verbatim); and on a GPU the solution computes the GEMM and the deterministic mistake does not.

The kernel variants are made from the solution by `edited`, so they follow it as it changes."""

from __future__ import annotations

import inspect
import pytest

from cutecourse.grading import checks, harness
from cutecourse.grading import notebook as nbio
from cutecourse.grading.checks import l05_tiled_mma as L5
from cutecourse.grading.checks import l06_cp_async as L6

from .submissions import answer_from_file, assert_kernel_checks, edited, lesson_solution
from .test_no_copies import lines, occurs, tokens

LESSON = "06_smem_pipelines"
HOST = "multistage_host"

pytestmark = pytest.mark.slow  # every PTX case compiles the kernel: 1-3 s each


def solution() -> str:
    """6.4's answer cell, markers included."""
    return lesson_solution(LESSON, "6.4")


WAIT = "cute.arch.cp_async_wait_group(STAGES - 2)"
LOOP = "    for kt in range(k_tiles):\n"
BARRIER = "        cute.arch.sync_threads()\n"
COMMIT = "        cute.arch.cp_async_commit_group()  # one group per K tile, even an empty one\n"


def without_wait(source: str) -> str:
    """The solution with its wait's line removed (the barrier stays)."""
    kept = [line for line in source.splitlines(keepends=True) if WAIT not in line]
    assert len(kept) == len(source.splitlines()) - 1, "the solution no longer waits once; update this test"
    return "".join(kept)


def region(source: str) -> str:
    return source[source.index(nbio.BEGIN):source.index(nbio.END)]


#: The package's step 4 (gemm04_multistage) mainloop: registers double-buffered across K tiles (the next tile's
#: first k-block loaded before the last MMAs of this one), hence a second wait and barrier inside every tile.
GEMM04_MAINLOOP = '''    ### BEGIN SOLUTION
    copy_k_tile(tiled_copy_g2s, tAgA, tAsA, tAcA, mA.shape, 0, 0)
    copy_k_tile(tiled_copy_g2s, tBgB, tBsB, tBcB, mB.shape, 0, 0)
    cute.arch.cp_async_commit_group()
    for s in cutlass.range_constexpr(1, STAGES - 1):
        if s < k_tiles:
            copy_k_tile(tiled_copy_g2s, tAgA, tAsA, tAcA, mA.shape, s, s)
            copy_k_tile(tiled_copy_g2s, tBgB, tBsB, tBcB, mB.shape, s, s)
        cute.arch.cp_async_commit_group()
    cute.arch.cp_async_wait_group(STAGES - 2)
    cute.arch.sync_threads()
    cute.copy(tiled_copy_s2r_a, tCsA[None, None, 0, 0], tCrA_view[None, None, 0])
    cute.copy(tiled_copy_s2r_b, tCsB[None, None, 0, 0], tCrB_view[None, None, 0])
    read = cutlass.Int32(0)
    for kt in range(k_tiles):
        nxt = read + 1
        if nxt == STAGES:
            nxt = cutlass.Int32(0)
        for kb in cutlass.range_constexpr(k_blocks):
            stage = read
            if kb == k_blocks - 1:
                stage = nxt
                cute.arch.cp_async_wait_group(STAGES - 2)
                cute.arch.sync_threads()
            kn = (kb + 1) % k_blocks
            cute.copy(tiled_copy_s2r_a, tCsA[None, None, kn, stage], tCrA_view[None, None, kn])
            cute.copy(tiled_copy_s2r_b, tCsB[None, None, kn, stage], tCrB_view[None, None, kn])
            if kb == 0:
                write = read - 1
                if read == 0:
                    write = cutlass.Int32(STAGES - 1)
                if kt + STAGES - 1 < k_tiles:
                    copy_k_tile(tiled_copy_g2s, tAgA, tAsA, tAcA, mA.shape, kt + STAGES - 1, write)
                    copy_k_tile(tiled_copy_g2s, tBgB, tBsB, tBcB, mB.shape, kt + STAGES - 1, write)
                cute.arch.cp_async_commit_group()
            cute.gemm(tiled_mma, acc, tCrA[None, None, kb], tCrB[None, None, kb], acc)
        read = nxt
'''
#: gemm04's own lines of that mainloop (its names: `stages`, tCrA_copy_view), as the package has them.
GEMM04_LINES = ["if kb == k_blocks - 1:", "cute.arch.cp_async_wait_group(stages - 2)", "kn = (kb + 1) % k_blocks",
                "cute.copy(tiled_copy_s2r_a, tCsA[None, None, kn, stage], tCrA_copy_view[None, None, kn])",
                "write = read - 1", "write = cutlass.Int32(stages - 1)", "read = nxt"]


def with_mainloop(source: str, mainloop: str) -> str:
    return source[:source.index(f"    {nbio.BEGIN}")] + mainloop + source[source.index(f"    {nbio.END}"):]


def gemm04_adapted() -> str:
    return with_mainloop(solution(), GEMM04_MAINLOOP)


def gemm04_verbatim() -> str:
    """gemm04's mainloop as the package has it (`stages` spelled as the cell's constant): its names are not the
    cell's."""
    from cutecourse.kernels.gemm import gemm04_multistage

    package = inspect.getsource(gemm04_multistage)
    start = package.index("    cute.copy(tiled_copy_a, tAgA[None, None, None, 0]")
    body = package[start:package.index("    # Epilogue")].replace("stages", "STAGES")
    return with_mainloop(solution(), f"    {nbio.BEGIN}\n{body}")


#: name -> (variant, what its PTX check says). Each fails the PTX check.
PTX_MISTAKES = {
    "no wait": (lambda: without_wait(solution()), "nothing waits for the copies"),
    "wait_group(STAGES - 1)": (lambda: edited(solution(), (WAIT, WAIT.replace("- 2", "- 1"))),
                               "leaves 2 commit groups in flight"),
    "wait_group(0)": (lambda: edited(solution(), (WAIT, "cute.arch.cp_async_wait_group(0)")), "a stage fewer"),
    "the package's gemm04, adapted": (gemm04_adapted, "waits once per K tile"),
    "the wait hoisted out of the loop": (lambda: edited(without_wait(solution()), (LOOP, f"    {WAIT}\n{LOOP}")),
                                         "the wait sits outside the K loop"),
    "the refill before the barrier": (lambda: edited(solution(), (BARRIER, ""), (COMMIT, f"{COMMIT}{BARRIER}")),
                                      "before the barrier after its wait"),
    "wait_group(0), and a wait_group 1 outside": (lambda: edited(solution(), (WAIT, "cute.arch.cp_async_wait_group(0)"),
                                                                 (LOOP, f"    {WAIT}\n{LOOP}")),
                                                  "waits once per K tile"),
    "the package's gemm04, verbatim": (gemm04_verbatim, "is not defined"),
}


def prefetch_one_short() -> str:
    """The refill copies tile kt + STAGES - 2 into the freed slot: from tile STAGES - 1 on, every slot read holds the
    tile before the one expected (deterministic: one tile counted twice, the last never)."""
    return edited(solution(), ("fetch = kt + STAGES - 1", "fetch = kt + STAGES - 2"),
                  ("fetch, fetch % STAGES)", "fetch, (kt + STAGES - 1) % STAGES)"))


def refill_slot_being_read() -> str:
    """The refill goes into the slot this tile is read from (a race), and the freed slot is never refilled."""
    return edited(solution(), ("fetch, fetch % STAGES)", "fetch, kt % STAGES)"))


#: Mistakes only a GPU shows: they compile to the instructions the PTX check wants.
GPU_MISTAKES = {"prefetch one tile short": prefetch_one_short, "refill the slot being read": refill_slot_being_read}


def test_the_checks_are_registered_for_the_host_the_exercise_names():
    assert_kernel_checks("cp_async", HOST)


def test_the_hidden_shapes_are_ragged_and_span_the_ring():
    k_tiles = [-(-k // L6.TILE_K) for _, _, k in L6.SHAPES]
    assert all(n % 8 == 0 and k % 8 == 0 for _, n, k in L6.SHAPES)
    assert min(k_tiles) == 1 and any(k < L6.TILE_K for _, _, k in L6.SHAPES), "K below one tile"
    assert max(k_tiles) > 2 * L6.STAGES, "K over 2 * STAGES tiles: the ring wraps twice"
    assert any(k % L6.TILE_K for _, _, k in L6.SHAPES if k > 2 * L6.STAGES * L6.TILE_K), "a ragged K tail"
    assert any(m % L6.TILE_M for m, _, _ in L6.SHAPES) and any(n % L6.TILE_N for _, n, _ in L6.SHAPES)


@pytest.mark.parametrize("name", ["solution", *PTX_MISTAKES, *GPU_MISTAKES])
def test_every_answer_cell_is_kernel_code_only(name):
    source = solution() if name == "solution" else {**{k: v for k, (v, _) in PTX_MISTAKES.items()},
                                                    **GPU_MISTAKES}[name]()
    assert harness.restricted(source) is None


def test_the_solution_passes_the_ptx_check_for_both_dtypes_and_archs(tmp_path):
    line = checks.cp_async_ptx.run(answer_from_file(tmp_path, solution(), HOST))
    assert line == f"{checks.PASS} cp_async_ptx: all {len(L5.CHECK_PTX_CASES)} cases pass", line


@pytest.mark.parametrize("name", sorted(PTX_MISTAKES))
def test_each_mistake_the_ptx_shows_fails_the_ptx_check_with_its_hint(tmp_path, name):
    variant, hint = PTX_MISTAKES[name]
    line = checks.cp_async_ptx.run(answer_from_file(tmp_path, variant(), HOST))
    assert line.startswith(f"{checks.FAIL} cp_async_ptx: ") and hint in line, line
    (said,) = lines(line)  # the line as tokens, like the answer's statements below
    assert not [statement for statement in lines(region(solution())) if statement in said], line


@pytest.mark.parametrize("name", sorted(GPU_MISTAKES))
def test_the_mistakes_only_numbers_show_compile_to_ptx_that_passes(tmp_path, name):
    line = checks.cp_async_ptx.run(answer_from_file(tmp_path, GPU_MISTAKES[name](), HOST))
    assert line.startswith(checks.PASS), line


def test_the_adapted_mainloop_is_the_packages_step_4():
    from cutecourse.kernels.gemm import gemm04_multistage

    package, adapted = tokens(inspect.getsource(gemm04_multistage)), tokens(GEMM04_MAINLOOP)
    for line in GEMM04_LINES:
        assert occurs(tokens(line), package), f"gemm04 no longer has {line!r}; update GEMM04_MAINLOOP"
        assert occurs(tokens(line), adapted), line


@pytest.mark.gpu(80)
def test_on_a_gpu_the_solution_computes_the_gemm(tmp_path):
    line = checks.cp_async_gemm.run(answer_from_file(tmp_path, solution(), HOST))
    assert line.startswith(checks.PASS), line


@pytest.mark.gpu(80)
def test_on_a_gpu_a_prefetch_one_tile_short_gets_wrong_numbers(tmp_path):
    line = checks.cp_async_gemm.run(answer_from_file(tmp_path, prefetch_one_short(), HOST))
    assert line.startswith(checks.FAIL) and "relative error" in line and "slot" in line, line
