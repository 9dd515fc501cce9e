"""Lesson 1's grading: a partly right submission scores exactly its points; every check and hidden test fails on a
wrong answer (and a wrong answer's hint does not give the right one away); a submission that calls the package's
own functions instead of doing the arithmetic scores nothing for those exercises."""

from __future__ import annotations

import textwrap

import pytest

from cutecourse.grading import checks, reports

from .forbidden_calls import assert_forbidden_calls_score_zero, assert_right_but_forbidden
from .submissions import assert_failed, grade_lesson

LESSON = "01_gpu_hierarchy_tensor_cores"

pytestmark = pytest.mark.slow

RIGHT = {
    "1.1": """
        import math
        def min_n_compute_bound(m, k, elem_bytes, peak_tflops, bandwidth_tbs):
            r = peak_tflops / bandwidth_tbs * elem_bytes
            if 2 * m * k <= r * (m + k):
                return None
            return max(1, math.ceil(r * m * k / (2 * m * k - r * (m + k))))
        """,
}
# Each wrong answer makes one classic mistake; the check's hint names it.
WRONG = {
    "1.1": """
        import math
        def min_n_compute_bound(m, k, elem_bytes, peak_tflops, bandwidth_tbs):
            r = peak_tflops / bandwidth_tbs * elem_bytes  # forgets to write C: bytes = b (MK + KN)
            return max(1, math.ceil(r * m * k / (2 * m * k - r * k))) if 2 * m * k > r * k else None
        """,
    "1.2": """
        def cluster_tile_intensity(bm, bn, bk, cluster_m, cluster_n, elem_bytes):
            return 2 * bm * bn * bk / ((bm * bk + bk * bn) * elem_bytes)  # no multicast
        """,
    "1.3": """
        import math
        def blocks_per_sm(threads, regs_per_thread, smem_bytes, limits):
            warps = math.ceil(threads / 32)
            smem = smem_bytes + limits["smem_reserved_per_block"]
            return min(limits["max_threads_per_sm"] // (32 * warps), limits["max_blocks_per_sm"],
                       limits["regs_per_sm"] // (32 * regs_per_thread) // warps,  # no per-warp rounding
                       limits["smem_per_sm"] // smem if smem else limits["max_blocks_per_sm"])
        """,
    "1.4": """
        import math
        def wave_efficiency(m, n, bm, bn, sms, blocks_per_sm):
            tiles = math.ceil(m / bm) * math.ceil(n / bn)
            return m * n / (tiles * bm * bn)  # forgets the partly empty last wave
        """,
}
# Right on the check's fixed cases only: earns the check point, not the hidden tests.
HARD_CODED_1_2 = """
    def cluster_tile_intensity(bm, bn, bk, cluster_m, cluster_n, elem_bytes):
        return {(128, 128): 256 / 3, (256, 128): 1024 / 3, (128, 256): 256 / 3, (64, 64): 25.6,
                (128, 192): 768 / 7, (192, 128): 1536 / 7}.get((bm, bn), 1.0)
    """
# What a learner who calls the course's reference gets: right answers, each through a function the exercise forbids.
CALLS_PACKAGE = {
    "1.1": """
        from cutecourse import hw
        def min_n_compute_bound(m, k, elem_bytes, peak_tflops, bandwidth_tbs):
            ridge = hw.ridge_point(peak_tflops, bandwidth_tbs)
            if hw.gemm_intensity(m, 2**62, k, elem_bytes) < ridge:
                return None
            lo, hi = 1, 2**62  # the intensity grows with N: bisect for the first N at the ridge
            while lo < hi:
                mid = (lo + hi) // 2
                lo, hi = (lo, mid) if hw.gemm_intensity(m, mid, k, elem_bytes) >= ridge else (mid + 1, hi)
            return lo
        """,
    "1.2": """
        from cutecourse import hw
        def cluster_tile_intensity(bm, bn, bk, cluster_m, cluster_n, elem_bytes):
            return hw.cta_tile_intensity(bm, bn, bk, elem_bytes, cluster=(cluster_m, cluster_n))
        """,
    "1.3": """
        from cutecourse import hw
        def blocks_per_sm(threads, regs_per_thread, smem_bytes, limits):
            return hw.occupancy(threads, regs_per_thread, smem_bytes, hw.ArchLimits(**limits)).blocks_per_sm
        """,
    "1.4": """
        import math
        from cutecourse import hw
        def wave_efficiency(m, n, bm, bn, sms, blocks_per_sm):
            tiles = hw.gemm_decomposition(m, n, 1, cta=(bm, bn, 1), warp=(bm, bn, 1), instruction=(1, 1, 1))["ctas"]
            slots = sms * blocks_per_sm
            return m * n / (math.ceil(tiles / slots) * slots * bm * bn)
        """,
}
TARGETS = {"1.1": "min_n_compute_bound", "1.2": "cluster_tile_intensity", "1.3": "blocks_per_sm",
           "1.4": "wave_efficiency"}


def function(source: str, name: str):
    namespace: dict = {}
    exec(textwrap.dedent(source), namespace)  # noqa: S102 - our own test code
    return namespace[name]


def test_the_hard_coded_answer_really_passes_only_the_visible_cases():
    fn = function(HARD_CODED_1_2, "cluster_tile_intensity")
    assert checks.cluster_tile_intensity.run(fn).startswith(checks.PASS)
    assert fn(96, 96, 32, 1, 1, 2) != 48.0


@pytest.mark.parametrize("exercise, hint", [("1.1", "writing C"), ("1.2", "multicast"), ("1.3", "reg_alloc_unit"),
                                            ("1.4", "last wave")])
def test_every_check_fails_a_wrong_answer_with_a_hint(exercise, hint):
    name = TARGETS[exercise]
    line = checks.REGISTRY[name].run(function(WRONG[exercise], name))
    assert line.startswith(checks.FAIL) and hint in line, line


def test_the_checks_hints_name_more_mistakes():
    """1.1 on a GEMM that is never compute-bound, and rounding down; 1.2 with the cluster's counts swapped."""
    never = """
        import math
        def min_n_compute_bound(m, k, elem_bytes, peak_tflops, bandwidth_tbs):
            r = peak_tflops / bandwidth_tbs * elem_bytes  # never None: |...| hides a GEMM that cannot get there
            return max(1, math.ceil(r * m * k / abs(2 * m * k - r * (m + k))))
        """
    assert "return None" in checks.min_n_compute_bound.run(function(never, "min_n_compute_bound"))
    floor = RIGHT["1.1"].replace("math.ceil", "math.floor")
    assert "round the bound up" in checks.min_n_compute_bound.run(function(floor, "min_n_compute_bound"))
    swapped = """
        def cluster_tile_intensity(bm, bn, bk, cluster_m, cluster_n, elem_bytes):
            return 2 * bm * bn * bk / ((bm * bk / cluster_m + bk * bn / cluster_n) * elem_bytes)
        """
    assert "the other count" in checks.cluster_tile_intensity.run(function(swapped, "cluster_tile_intensity"))


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
    assert_failed(report, ["min_n_compute_bound_on_random_gemms_and_gpus",
                           "cluster_tile_intensity_on_random_tiles_and_clusters",
                           "blocks_per_sm_on_random_kernels_and_archs", "wave_efficiency_on_random_gemms_and_gpus"],
                  list(TARGETS.values()))
    assert report.score == 0


@pytest.mark.parametrize("exercise", sorted(CALLS_PACKAGE))
def test_calling_the_package_would_be_right_and_calls_what_the_exercise_forbids(exercise, tmp_path):
    """Without the grader's enforcement these answers pass (so the next test can fail), and each calls a function
    its exercise's metadata forbids."""
    assert_right_but_forbidden(tmp_path, LESSON, exercise, CALLS_PACKAGE[exercise])


def test_a_submission_that_calls_the_package_scores_zero(tmp_path):
    assert_forbidden_calls_score_zero(tmp_path, LESSON, CALLS_PACKAGE)
