"""Lesson 1's grading: a partly right submission scores exactly its points; every check and hidden test fails on a
wrong answer (and a wrong answer's hint does not give the right one away)."""

from __future__ import annotations

import textwrap

import pytest

from cutecourse.grading import checks, reports

from .conftest import assert_failed, grade_lesson

LESSON = "01_gpu_hierarchy_tensor_cores"

pytestmark = pytest.mark.slow

RIGHT = {
    "1.1": """
        def gemm_intensity(m, n, k, elem_bytes):
            return 2 * m * n * k / ((m * k + k * n + m * n) * elem_bytes)
        """,
}
# Each wrong answer makes one classic mistake; the check's hint names it.
WRONG = {
    "1.1": """
        def gemm_intensity(m, n, k, elem_bytes):
            return 2 * m * n * k / ((m * k + k * n) * elem_bytes)  # forgets to write C
        """,
    "1.2": """
        def cta_tile_intensity(bm, bn, bk, elem_bytes):
            return bm * bn * bk / ((bm * bk + bk * bn) * elem_bytes)  # a multiply-add as one FLOP
        """,
    "1.3": """
        import math
        def blocks_per_sm(threads, regs_per_thread, smem_bytes, limits):
            warps = math.ceil(threads / 32)
            smem = smem_bytes + limits["smem_reserved_per_block"]
            return min(limits["max_threads_per_sm"] // (32 * warps), limits["max_blocks_per_sm"],
                       limits["regs_per_sm"] // (32 * regs_per_thread) // warps,  # no per-warp rounding
                       limits["smem_per_sm"] // smem)
        """,
    "1.4": """
        def binding_limits(threads, regs_per_thread, smem_bytes, limits):
            return ("registers",)
        """,
}
# Right on the check's fixed cases only: earns the check point, not the hidden tests.
HARD_CODED_1_2 = """
    def cta_tile_intensity(bm, bn, bk, elem_bytes):
        if (bm, bn) == (128, 256):
            return 2 * 128 * 256 / (384 * 2)
        return {128: 64.0, 64: 16.0, 256: 2 * 256 * 128 / 384, 16: 2 * 16 * 256 / (272 * 2)}.get(bm, 1.0)
    """


def test_the_hard_coded_answer_really_passes_only_the_visible_cases():
    namespace: dict = {}
    exec(textwrap.dedent(HARD_CODED_1_2), namespace)
    assert checks.cta_tile_intensity.run(namespace["cta_tile_intensity"]).startswith(checks.PASS)
    assert namespace["cta_tile_intensity"](96, 96, 32, 2) != 48.0


@pytest.mark.parametrize("exercise,check", [("1.1", "gemm_intensity"), ("1.2", "cta_tile_intensity"),
                                            ("1.3", "blocks_per_sm"), ("1.4", "binding_limits")])
def test_every_check_fails_a_wrong_answer_with_a_hint(exercise, check):
    namespace: dict = {}
    exec(textwrap.dedent(WRONG[exercise]), namespace)
    line = checks.REGISTRY[check].run(namespace[check])
    assert line.startswith(checks.FAIL), line
    hints = {"1.1": "writing C", "1.2": "two FLOPs", "1.3": "reg_alloc_unit", "1.4": "more than one limit"}
    assert hints[exercise] in line, line


def test_partly_right_submission_scores_exactly_its_points(tmp_path):
    # 1.1 right (1 check + 2 hidden), 1.2 hard-coded (check only), 1.3 wrong, 1.4 untouched.
    report = grade_lesson(tmp_path, LESSON, {"1.1": RIGHT["1.1"], "1.2": HARD_CODED_1_2, "1.3": WRONG["1.3"]})
    got = {e: p for e, p in report.exercises().items()}
    check_point, most = 1.0, 3.0  # the check's point counts with or without jupyter
    assert got == {"1.1": (check_point + 2, most), "1.2": (check_point, most), "1.3": (0.0, most),
                   "1.4": (0.0, most)}, reports.summary(report)
    assert report.score == 2 * check_point + 2


def test_every_check_and_hidden_test_fails_on_wrong_answers(tmp_path):
    report = grade_lesson(tmp_path, LESSON, WRONG)
    assert_failed(report, ["gemm_intensity_on_random_shapes", "cta_tile_intensity_on_random_tiles",
                           "blocks_per_sm_on_random_kernels_and_archs", "binding_limits_on_random_kernels_and_archs"],
                  ["gemm_intensity", "cta_tile_intensity", "blocks_per_sm", "binding_limits"])
    assert report.score == 0
