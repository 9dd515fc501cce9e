"""Lesson 5's kernel exercises, 5.5 (an M-major A on m16n8k8 atoms, three k-blocks per K tile) and 5.6 (a batched
GEMM with an N-major B): each classic mistake fails the PTX check on any machine, with a hint that names it (the check
follows every mma.sync to the k-block it reads), while right variants of the mainloop pass; on a GPU the solutions
earn every point, and a kernel whose mistake only its numbers show keeps only its PTX points. (The package's step 3
as the answers: test_lesson_05.py.)"""

from __future__ import annotations

import pytest

from cutecourse.grading import checks, reports, results

from .submissions import answer_from_file, assert_failed, edited, grade_lesson, lesson_solution, statuses

pytestmark = pytest.mark.slow
LESSON = "05_tiled_mma"
GPU_HIDDEN = {"5.5": "k8_gemm_on_random_ragged_shapes", "5.6": "batched_gemm_on_random_ragged_batches"}
GPU_CHECKS = {"5.5": "k8_gemm", "5.6": "bgemm"}


def solution(exercise: str) -> str:
    return lesson_solution(LESSON, exercise)


K8_LOOP = """        for kb in cutlass.range_constexpr(k_blocks):  # three k-blocks of 8: the MMA's K
            cute.copy(s2r_a, tXsA[None, None, kb], tXrA[None, None, kb])
            cute.copy(s2r_b, tXsB[None, None, kb], tXrB[None, None, kb])
            cute.gemm(tiled_mma, acc, tCrA[None, None, kb], tCrB[None, None, kb], acc)
"""
# 5.5's mistakes. Every k-block's MMA reads A's first k-block (the others are loaded, their registers unread).
K8_A_OF_K_BLOCK_0 = edited(solution("5.5"), ("tCrA[None, None, kb], tCrB", "tCrA[None, None, 0], tCrB"))
# Every k-block's registers are loaded from B's first k-block in shared memory.
K8_B_FROM_K_BLOCK_0 = edited(solution("5.5"), ("tXsB[None, None, kb]", "tXsB[None, None, 0]"))
# The k-block loop stops one short: two k-blocks of the tile's three.
K8_LAST_K_BLOCK_LOST = edited(solution("5.5"), ("for kb in cutlass.range_constexpr(k_blocks):",
                                                "for kb in cutlass.range_constexpr(k_blocks - 1):"))
# Step 3's ldmatrix.x4 on the m16n8k8 atom: a warp's A and B per k-block are fewer matrices, so x4 repeats them.
K8_X4 = edited(solution("5.5"), ("LdMatrix8x8x16bOp(True, 2)", "LdMatrix8x8x16bOp(True, 4)"),
               ("LdMatrix8x8x16bOp(False, 2)", "LdMatrix8x8x16bOp(False, 4)"))
# 5.6's: every k-block's MMA reads A's first k-block.
BATCHED_A_OF_K_BLOCK_0 = edited(solution("5.6"), ("tCrA[None, None, kb], tCrB", "tCrA[None, None, 0], tCrB"))
# 5.6 that reads each CTA's batch of A and B but writes every batch's C into batch 0: right PTX, wrong numbers.
BATCHED_C_OF_BATCH_0 = edited(solution("5.6"), ("mC[None, None, bidz]\n", "mC[None, None, 0]\n"))


@pytest.mark.parametrize("source, check, host, hint", [
    (K8_A_OF_K_BLOCK_0, "k8_ptx", "tc_host", "multiplies A's k-block [0] by B's k-block ["),
    (K8_B_FROM_K_BLOCK_0, "k8_ptx", "tc_host", "by B's k-block [0]: each cute.gemm must read"),
    (K8_LAST_K_BLOCK_LOST, "k8_ptx", "tc_host", "read its k-blocks as {0: 16, 1: 16}"),
    (K8_X4, "k8_ptx", "tc_host", "how many 8 x 8 matrices"),
    (BATCHED_A_OF_K_BLOCK_0, "bgemm_ptx", "batched_host", "multiplies A's k-block [0] by B's k-block [1]:"),
], ids=["k8-A-of-k-block-0", "k8-B-from-k-block-0", "k8-last-k-block-lost", "k8-x4", "batched-A-of-k-block-0"])
def test_the_ptx_checks_fail_the_classic_mistakes_with_a_hint(capsys, tmp_path, source, check, host, hint):
    assert getattr(checks, check)(answer_from_file(tmp_path, source, host)) is False
    line = capsys.readouterr().out.strip().splitlines()[-1]
    assert line.startswith(f"✗ {check}: ") and hint in line, line


# Right mainloops other than the solution's: every k-block's fragments loaded before the first MMA; the next
# k-block's loaded while the current one multiplies; one register buffer reused for every k-block.
K8_RIGHT = {
    "all loads first": """        cute.copy(s2r_a, tXsA, tXrA)
        cute.copy(s2r_b, tXsB, tXrB)
        for kb in cutlass.range_constexpr(k_blocks):
            cute.gemm(tiled_mma, acc, tCrA[None, None, kb], tCrB[None, None, kb], acc)
""",
    "one k-block ahead": """        cute.copy(s2r_a, tXsA[None, None, 0], tXrA[None, None, 0])
        cute.copy(s2r_b, tXsB[None, None, 0], tXrB[None, None, 0])
        for kb in cutlass.range_constexpr(k_blocks):
            if cutlass.const_expr(kb + 1 < k_blocks):
                cute.copy(s2r_a, tXsA[None, None, kb + 1], tXrA[None, None, kb + 1])
                cute.copy(s2r_b, tXsB[None, None, kb + 1], tXrB[None, None, kb + 1])
            cute.gemm(tiled_mma, acc, tCrA[None, None, kb], tCrB[None, None, kb], acc)
""",
    "one buffer": """        for kb in cutlass.range_constexpr(k_blocks):
            cute.copy(s2r_a, tXsA[None, None, kb], tXrA[None, None, 0])
            cute.copy(s2r_b, tXsB[None, None, kb], tXrB[None, None, 0])
            cute.gemm(tiled_mma, acc, tCrA[None, None, 0], tCrB[None, None, 0], acc)
""",
}


@pytest.mark.parametrize("loop", sorted(K8_RIGHT))
def test_right_mainloops_other_than_the_solutions_pass_the_ptx_check(tmp_path, loop):
    source = edited(solution("5.5"), (K8_LOOP, K8_RIGHT[loop]))
    assert checks.k8_ptx.run(answer_from_file(tmp_path, source, "tc_host")).startswith(checks.PASS)


def test_the_gpu_tests_kernels_are_what_the_ptx_checks_say(tmp_path):
    """On any machine: the kernel whose numbers alone are wrong passes its PTX check (so only the GPU can fail it); the
    k-block mistake of the GPU test below fails its PTX check too."""
    assert checks.bgemm_ptx(answer_from_file(tmp_path, BATCHED_C_OF_BATCH_0, "batched_host")) is True
    assert checks.k8_ptx(answer_from_file(tmp_path, K8_LAST_K_BLOCK_LOST, "tc_host")) is False


@pytest.mark.gpu(80)
def test_on_a_gpu_the_solutions_kernels_earn_every_point(tmp_path):
    report = grade_lesson(tmp_path, LESSON, {"5.5": solution("5.5"), "5.6": solution("5.6")}, timeout=300,
                          exercises={"5.5", "5.6"})
    assert report.exercises()["5.5"] == (6.0, 6.0) and report.exercises()["5.6"] == (6.0, 6.0), reports.summary(report)
    state = statuses(report)
    for name in [f"hidden test_{t}" for t in GPU_HIDDEN.values()] + [f"check {c}" for c in GPU_CHECKS.values()]:
        assert state[name] == results.PASSED, (name, reports.summary(report))


@pytest.mark.gpu(80)
def test_on_a_gpu_the_classic_mistakes_lose_their_gpu_points(tmp_path):
    """5.5 that loses a k-block fails everything, its GPU check on the numbers; 5.6 whose every batch writes C's
    batch 0 keeps its PTX points only."""
    report = grade_lesson(tmp_path, LESSON, {"5.5": K8_LAST_K_BLOCK_LOST, "5.6": BATCHED_C_OF_BATCH_0}, timeout=300,
                          exercises={"5.5", "5.6"})
    assert_failed(report, list(GPU_HIDDEN.values()), list(GPU_CHECKS.values()))
    assert report.exercises()["5.5"] == (0.0, 6.0) and report.exercises()["5.6"] == (2.0, 6.0), reports.summary(report)
    output = {t.name.split(" (")[0]: t.output for t in report.tests}
    assert "products are missing" in output[f"check {GPU_CHECKS['5.5']}"]
    assert "read its k-blocks" in output[f"hidden test_{GPU_HIDDEN['5.5']}"]
    assert "never written" in output[f"hidden test_{GPU_HIDDEN['5.6']}"]
