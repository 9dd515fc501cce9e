"""Lesson 6 (shared-memory layouts and async pipelines): a partly right submission scores exactly its points; every
check and hidden test fails a wrong answer, with a hint that points at the mistake without printing the answer; an
answer that calls what its exercise forbids scores 0 there; the package's own rules and kernels submitted as answers
(step 5's swizzle rule, steps 9-11's stage count, steps 4 and 7 as the kernels) earn nothing; an answer that hangs
scores 0 at the grader's timeout and the rest of the submission is still graded; and on a GPU the solutions' kernels
earn every point, while a deadlocked TMA pipeline scores its PTX points only, within the timeout, the rest of its
submission keeps its points, and the next submission's kernel runs on the GPU as usual.

(The kernels' classic mistakes, one by one, are in test_l06_cp_async.py and test_l06_tma_pipeline.py.)"""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest

from cutecourse import env
from cutecourse.grading import checks, grader, reports, results
from cutecourse.grading.checks import l06_smem_pipelines as L

from .forbidden_calls import assert_forbidden_calls_score_zero, assert_right_but_forbidden
from .submissions import answer_from_file, assert_failed, grade_lesson, lesson_solution, outputs, statuses
from .test_l06_cp_async import GEMM04_MAINLOOP, prefetch_one_short, with_mainloop, without_wait
from .test_l06_hopper_exercises import RS_WRONG, STORE_WRONG
from .test_l06_tma_pipeline import WRONG as TMA_WRONG

LESSON = "06_smem_pipelines"
GPU80, GPU90 = env.gpu_missing(80) is None, env.gpu_missing(90) is None

pytestmark = pytest.mark.slow


def solution(exercise: str) -> str:
    return lesson_solution(LESSON, exercise)


def submit(tmp_path: Path, answers: dict[str, str], **kwargs) -> grader.Report:
    return grade_lesson(tmp_path, LESSON, answers, timeout=kwargs.pop("timeout", 300), **kwargs)


# Each wrong answer makes one classic mistake; the check's hint points at it.
WRONG = {
    # step 5's rule for 16-bit elements applied to every width: M = 3 whatever the element, so for 32-bit elements
    # the XOR lands on 32-byte chunks and the column reads still collide
    "6.1": """
def choose_swizzle(row_elements, element_bits):
    chunks = min(row_elements * element_bits // 8, 128) // 16
    return chunks.bit_length() - 1, 3, 3
""",
    # every tile starts the ring again at slot 0, phase 0, as one tile's loop would: right for the first tile only
    "6.2": """
def ring_schedule(tile_k_tiles, stages):
    return [{"k_tiles": [(kt % stages, kt // stages % 2, (kt // stages + 1) % 2, (kt - 1) % stages if kt else None)
                         for kt in range(k)], "drain": (k - 1) % stages if k else None} for k in tile_k_tiles]
""",
    # steps 9-11's own count (as many stages as fit one CTA beside the epilogue's buffer, less a kilobyte): blind to
    # the arch and to CTAs per SM
    "6.3": """
from cutecourse.hw import ARCH_LIMITS
def max_stages(tile_m, tile_n, tile_k, element_bits, arch, epilogue_bytes, ctas_per_sm):
    stage_bytes = (tile_m + tile_n) * tile_k * element_bits // 8
    return (ARCH_LIMITS[arch].smem_per_block_max - 1024 - epilogue_bytes) // stage_bytes
""",
    # no cp.async.wait_group: the barrier orders the threads, not their copies
    "6.4": without_wait(solution("6.4")),
    # the consumers never wait for full: wgmma reads slots TMA has not written
    "6.5": TMA_WRONG["no_full_wait"],
    # A's registers reloaded after a wait that leaves the last batch running (the package's steps' wait_group(1))
    "6.6": RS_WRONG["wait_one"],
    # slab 1 overwrites the one buffer while slab 0's store may still read it
    "6.7": STORE_WRONG["no_read_wait"],
}
#: What each wrong answer's check says (the hidden tests use the same hints).
HINTS = {"6.1": "wavefronts (the fewest possible is", "6.2": "race: ", "6.3": "do not fit",
         "6.4": "no cp.async.wait_group", "6.5": "the hand-off needs one on each side",
         "6.6": "with a warpgroup.wait_group(1) before it", "6.7": "overwrites sC while slab 0"}
#: Where the hidden test's first failing case shows the mistake another way: 6.1's 8-bit elements, whose 16-byte
#: vector M = 3 splits.
HIDDEN_HINTS = dict(HINTS, **{"6.1": "splits the 16-byte vector"})
CPU_HIDDEN = {"6.1": "choose_swizzle_for_every_row_length_and_element_width",
              "6.2": "ring_schedule_for_random_rings", "6.3": "max_stages_for_random_tiles_on_every_arch",
              "6.4": "multistage_mainloop_ptx_for_both_dtypes_and_archs", "6.5": "tma_pipeline_ptx_for_both_dtypes",
              "6.6": "wgmma_rs_ptx_for_both_dtypes", "6.7": "tma_store_epilogue_ptx_for_both_dtypes"}
CHECKS = {"6.1": "choose_swizzle", "6.2": "ring_schedule", "6.3": "max_stages", "6.4": "cp_async_ptx",
          "6.5": "tma_ptx", "6.6": "rs_ptx", "6.7": "tma_store_ptx"}
GPU_HIDDEN = {"6.4": "multistage_gemm_on_random_ragged_shapes", "6.5": "tma_pipeline_gemm_on_random_ragged_shapes",
              "6.6": "wgmma_rs_gemm_on_random_ragged_and_long_shapes",
              "6.7": "tma_store_epilogue_gemm_on_random_ragged_shapes"}
GPU_CHECKS = {"6.4": "cp_async_gemm", "6.5": "tma_gemm", "6.6": "rs_gemm", "6.7": "tma_store_gemm"}


@pytest.fixture(scope="module")
def wrong_report(tmp_path_factory) -> grader.Report:
    return submit(tmp_path_factory.mktemp("wrong"), WRONG)


def test_every_check_and_hidden_test_fails_on_a_wrong_answer(wrong_report):
    assert wrong_report.score == 0, reports.summary(wrong_report)
    assert_failed(wrong_report, list(CPU_HIDDEN.values()), list(CHECKS.values()))


def test_each_failure_says_what_is_wrong(wrong_report):
    output = outputs(wrong_report)
    for exercise in HINTS:
        for test, hint in ((f"check {CHECKS[exercise]}", HINTS[exercise]),
                           (f"hidden test_{CPU_HIDDEN[exercise]}", HIDDEN_HINTS[exercise])):
            assert hint in output[test], (test, output[test])


def test_the_cpu_checks_hints_do_not_print_the_answer(capsys, tmp_path):
    """Each check fails its wrong answer in one line that names the mistake, and the line holds none of the right
    values it was compared with."""
    right, wrong = (answer_from_file(tmp_path, source, "choose_swizzle") for source in (solution("6.1"), WRONG["6.1"]))
    failing = next(case for case in checks.choose_swizzle.cases() if right(*case) != wrong(*case))
    secrets = {
        # the right swizzle of the case the check fails on, as the learner would write it
        "6.1": ["S<{},{},{}>".format(*right(*failing)), str(tuple(right(*failing)))],
        # where the right plan puts the k-tile the wrong answer fails on (tile 1's second: slot 0, on its third use)
        "6.2": ["slot 0", "full[0]", "third"],
        "6.3": [rf"\b{L.reference_max_stages(*case)} stages" for case in checks.max_stages.cases()],
    }
    for exercise, fn in (("6.1", "choose_swizzle"), ("6.2", "ring_schedule"), ("6.3", "max_stages")):
        assert getattr(checks, CHECKS[exercise])(answer_from_file(tmp_path, WRONG[exercise], fn)) is False
        line = capsys.readouterr().out
        assert line.startswith(f"✗ {CHECKS[exercise]}: ") and line.count("\n") == 1 and HINTS[exercise] in line, line
        hint = line.split(": ", 2)[2]
        leaked = [s for s in secrets[exercise] if (re.search(s, hint) if s.startswith("\\b") else s in hint)]
        assert not leaked, (exercise, leaked, hint)


def test_a_wrong_swizzle_each_way_is_caught():
    """The swizzle judge fails each way of getting it wrong: no swizzle, the DSL's byte-unit S<3,4,3> taken for
    element units, a shift that reads the wrong row bits, and one that splits a 16-byte vector."""
    for value, hint in (((0, 4, 3), "8 wavefronts"), ((3, 4, 3), "wavefronts"), ((3, 3, 4), "wavefronts"),
                        ((3, 2, 3), "splits the 16-byte vector"), ((3, 3), "three ints")):
        problem = L.swizzle_hint(64, 16, value)
        assert problem is not None and hint in problem, (value, problem)
    assert L.swizzle_hint(64, 16, (3, 3, 3)) is None and L.swizzle_hint(16, 32, (2, 2, 3)) is None


def test_the_ring_model_catches_a_race_and_a_deadlock_each_way(tmp_path):
    tiles, stages = [3, 0, 5, 2], 4

    def ring(consumer=lambda u: u % 2, producer=lambda u: (u + 1) % 2, slot=lambda g: g % 4,
             release=lambda g, j: (g - 1) % 4 if j else None, drain=lambda g: (g - 1) % 4):
        plans, g = [], 0
        for k in tiles:
            steps = []
            for j in range(k):
                steps.append((slot(g), consumer(g // stages), producer(g // stages), release(g, j)))
                g += 1
            plans.append({"k_tiles": steps, "drain": drain(g) if k else None})
        return plans

    def hint(plan):
        return L.ring_hint(tiles, stages, plan)

    assert hint(ring()) is None
    assert "deadlock" in hint(ring(producer=lambda u: u % 2))
    assert "race: the consumer" in hint(ring(consumer=lambda u: (u + 1) % 2, producer=lambda u: (u + 1) % 2))
    assert "race: the producer" in hint(ring(producer=lambda u: 1))
    assert "race" in hint(ring(slot=lambda g: 0))
    assert "slot 4 is not one of" in hint(ring(slot=lambda g: g % 5))
    # the hand-backs: the slot still being read, one twice, one never, one the consumer has not read
    assert "may still be running" in hint(ring(release=lambda g, j: g % 4))
    assert "holds no k-tile the consumer has read" in hint(ring(release=lambda g, j: (g - 1) % 4 if g else None))
    twice = [{"k_tiles": [(0, 0, 1, None), (1, 0, 1, 0)], "drain": 0}]  # slot 0 handed back twice, slot 1 never
    assert "a second time" in L.ring_hint([2], 4, twice)
    assert "never released" in hint(ring(drain=lambda g: None))
    assert "holds no k-tile the consumer has read" in hint(ring(release=lambda g, j: (g + 1) % 4 if j else None))
    assert "expected a dict" in hint([{"k_tiles": []}] * len(tiles))
    assert "tile 0 has 3 k-tile(s)" in hint([{"k_tiles": [(0, 0, 1, None)], "drain": None}] * len(tiles))
    # every tile from slot 0, phase 0: right for one tile, a race once a second tile follows
    reset = answer_from_file(tmp_path, WRONG["6.2"], "ring_schedule")
    assert L.ring_hint([5], 4, reset([5], 4)) is None and "race" in L.ring_hint([3, 5], 2, reset([3, 5], 2))


# --------------------------------------------------------------------------- a partly right submission

# 6.3 answered only for the check's visible cases: the check passes, the hidden test does not.
HARD_CODED_6_3 = "def max_stages(tile_m, tile_n, tile_k, element_bits, arch, epilogue_bytes, ctas_per_sm):\n" \
                 "    return {\n" + "".join(f"        {case!r}: {L.reference_max_stages(*case)},\n"
                                            for case in checks.max_stages.cases()) + \
                 "    }.get((tile_m, tile_n, tile_k, element_bits, arch, epilogue_bytes, ctas_per_sm), 1)\n"
#: The package's step 4 mainloop in 6.4's cell, and the package's step 7 as 6.5 (test_l06_*: both compute the
#: right GEMM; both fail the PTX checks).
GEMM04_AS_6_4 = with_mainloop(solution("6.4"), GEMM04_MAINLOOP)
STEP7_AS_6_5 = TMA_WRONG["step7"]


@pytest.fixture(scope="module")
def partial_report(tmp_path_factory) -> grader.Report:
    """6.1 right, 6.2 wrong, 6.3 hard-coded (check only), and as the kernels the package's own steps 4 and 7."""
    return submit(tmp_path_factory.mktemp("partial"), {
        "6.1": solution("6.1"), "6.2": WRONG["6.2"], "6.3": HARD_CODED_6_3, "6.4": GEMM04_AS_6_4, "6.5": STEP7_AS_6_5})


def test_partly_right_submission_scores_exactly_its_points(partial_report):
    got = {e: partial_report.exercises()[e][0] for e in ("6.1", "6.2", "6.3", "6.4", "6.5")}
    assert got == {"6.1": 3.0, "6.2": 0.0, "6.3": 1.0, "6.4": 0.0, "6.5": 0.0}, reports.summary(partial_report)


def test_the_packages_own_kernels_earn_no_kernel_points(partial_report):
    state = statuses(partial_report)
    for exercise in ("6.4", "6.5"):
        assert state[f"hidden test_{CPU_HIDDEN[exercise]}"] == results.FAILED, reports.summary(partial_report)
    output = outputs(partial_report)
    assert "waits once per K tile" in output[f"hidden test_{CPU_HIDDEN['6.4']}"]
    assert "CTAs of 128 threads" in output[f"hidden test_{CPU_HIDDEN['6.5']}"]


def test_step_5s_rule_and_the_persistent_steps_stage_count_are_what_the_package_has():
    """WRONG's 6.1 and 6.3 are the package's own: step 5's swizzle bits for a row (16-bit only) and steps 9-11's
    count of stages (as many as fit beside the epilogue's buffer, if any, less a kilobyte); submitted, they fail
    (above)."""
    from cutecourse.kernels.gemm import GEMM_STEPS, steps

    assert "cute.make_swizzle(bits, 3, 3)" in steps.source(5)
    count = re.compile(r"stages = config\.stages or \(SMEM_BYTES - 1024( - \w+)?\) // stage_bytes")
    assert [n for n in range(1, len(GEMM_STEPS) + 1) if count.search(steps.source(n))] == [9, 10, 11]


# Right answers through what 6.1 and 6.3 forbid: the course's wavefront counter and occupancy calculator.
CALLS_PACKAGE = {
    "6.1": """
from cutecourse import viz
from cutecourse.layout import Layout, make_composed_layout, make_swizzle
def choose_swizzle(row_elements, element_bits):
    tile = Layout((16, row_elements), (row_elements, 1))
    vector = 128 // element_bits
    reads = [[(8 * g + r, c * vector + j) for r in range(8) for j in range(vector)]
             for g in range(2) for c in range(row_elements // vector)]
    for b in range(4):
        s = make_composed_layout(make_swizzle(b, vector.bit_length() - 1, 3), 0, tile)
        if all(viz.wavefronts(s, element_bits, [p]) == 1 for p in reads):
            return (b, vector.bit_length() - 1, 3)
""",
    "6.3": """
from cutecourse import hw
def max_stages(tile_m, tile_n, tile_k, element_bits, arch, epilogue_bytes, ctas_per_sm):
    limits, stage = hw.ARCH_LIMITS[arch], (tile_m + tile_n) * tile_k * element_bits // 8
    fixed = epilogue_bytes + (1024 if arch == "sm_90" else 0)
    best = 0
    for s in range(1, 64):
        smem = s * stage + fixed
        if smem > limits.smem_per_block_max or hw.occupancy(128, 32, smem, arch).limits["smem"] < ctas_per_sm:
            break
        best = s
    return best
""",
}


@pytest.mark.parametrize("exercise", sorted(CALLS_PACKAGE))
def test_calling_the_package_would_be_right_and_calls_what_the_exercise_forbids(tmp_path, exercise):
    assert_right_but_forbidden(tmp_path, LESSON, exercise, CALLS_PACKAGE[exercise])


def test_a_submission_that_calls_the_package_scores_zero(tmp_path):
    assert_forbidden_calls_score_zero(tmp_path, LESSON, CALLS_PACKAGE)


def test_a_tma_pipeline_built_on_the_dsls_pipeline_classes_scores_zero(tmp_path):
    report = submit(tmp_path, {"6.5": TMA_WRONG["pipeline_classes"]}, exercises={"6.5"})
    assert report.exercises()["6.5"][0] == 0.0, reports.summary(report)
    output = outputs(report)
    assert "`cutlass.pipeline` is not available" in output[f"hidden test_{CPU_HIDDEN['6.5']}"]


def test_an_answer_that_hangs_scores_zero_at_the_timeout_and_the_rest_is_graded(tmp_path):
    hang = "def ring_schedule(tile_k_tiles, stages):\n    while True:\n        pass\n"
    start = time.monotonic()
    report = submit(tmp_path, {"6.1": solution("6.1"), "6.2": hang}, timeout=20, exercises={"6.1", "6.2"})
    assert report.exercises()["6.2"] == (0.0, 3.0) and report.exercises()["6.1"] == (3.0, 3.0), \
        reports.summary(report)
    output = outputs(report)
    assert "timed out" in output[f"hidden test_{CPU_HIDDEN['6.2']}"], output[f"hidden test_{CPU_HIDDEN['6.2']}"]
    # The notebook's cell hit its limit: nbval interrupted it (its own words), or stopped the kernel, or the grade's
    # deadline came first (the grader's words); which one depends on the machine's load.
    assert re.search(r"ran out of time|Timeout of 20 seconds exceeded", output["check ring_schedule"]), \
        output["check ring_schedule"]
    assert time.monotonic() - start < 240


# --------------------------------------------------------------------------- on a GPU


@pytest.mark.gpu(90)
def test_on_a_gpu_the_solutions_kernels_earn_every_point(tmp_path):
    kernels = ("6.4", "6.5", "6.6", "6.7")
    report = submit(tmp_path, {e: solution(e) for e in kernels}, exercises=set(kernels))
    assert all(report.exercises()[e] == (6.0, 6.0) for e in kernels), reports.summary(report)
    state = statuses(report)
    for name in [f"hidden test_{t}" for t in GPU_HIDDEN.values()] + [f"check {c}" for c in GPU_CHECKS.values()]:
        assert state[name] == results.PASSED, (name, reports.summary(report))


@pytest.mark.gpu(90)
def test_on_a_gpu_a_deadlocked_pipeline_scores_its_ptx_points_and_the_grading_goes_on(tmp_path):
    """6.5's empty barrier counts 8 arrivals (one per warp) where 2 come (one per warpgroup): the ring wraps and the
    producer waits forever. The check and the hidden GPU test each stop it at their timeout, the report is written,
    and 6.4's kernel in the same submission keeps every point. The next submission's kernel then runs on the GPU as
    usual: one that prefetches a tile short gets its numbers judged wrong, not a dead context."""
    start = time.monotonic()
    report = submit(tmp_path, {"6.4": solution("6.4"), "6.5": TMA_WRONG["count"]}, timeout=30,
                    exercises={"6.4", "6.5"})
    assert report.exercises()["6.5"] == (2.0, 6.0) and report.exercises()["6.4"] == (6.0, 6.0), \
        reports.summary(report)
    output = outputs(report)
    assert "timed out" in output[f"check {GPU_CHECKS['6.5']}"], output[f"check {GPU_CHECKS['6.5']}"]
    assert "deadlock" in output[f"hidden test_{GPU_HIDDEN['6.5']}"], output[f"hidden test_{GPU_HIDDEN['6.5']}"]
    assert time.monotonic() - start < 400
    (tmp_path / "after").mkdir()
    after = submit(tmp_path / "after", {"6.4": prefetch_one_short()}, exercises={"6.4"})
    assert after.exercises()["6.4"] == (2.0, 6.0), reports.summary(after)
    assert "relative error" in outputs(after)[
        f"hidden test_{GPU_HIDDEN['6.4']}"]


#: 6.4 with its swizzle counted in the wrong unit: M = 2 keeps 4 16-bit elements together, not a 16-byte vector, so
#: the swizzle moves half-vectors and every cp.async and ldmatrix row lands 8 bytes off its alignment.
WRONG_SWIZZLE_6_4 = solution("6.4").replace("cute.make_swizzle(3, 3, 3)", "cute.make_swizzle(3, 2, 3)")


@pytest.mark.gpu(80)
def test_on_a_gpu_a_wrong_swizzle_fails_the_gemm_and_the_grader_survives(tmp_path):
    assert WRONG_SWIZZLE_6_4 != solution("6.4")
    report = submit(tmp_path, {"6.4": WRONG_SWIZZLE_6_4}, exercises={"6.4"})
    assert report.exercises()["6.4"][0] <= 2.0, reports.summary(report)
    state = statuses(report)
    assert state[f"hidden test_{GPU_HIDDEN['6.4']}"] == results.FAILED, reports.summary(report)
    assert state[f"check {GPU_CHECKS['6.4']}"] == results.FAILED, reports.summary(report)


def cell_constants(source: str) -> dict[str, object]:
    """The names an answer cell binds to literals, or to arithmetic of earlier ones, at its top level."""
    import ast

    found: dict[str, object] = {}
    for node in ast.parse(source).body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            try:
                value = eval(compile(ast.Expression(node.value), "<cell>", "eval"), {"__builtins__": {}}, dict(found))
            except (NameError, TypeError, AttributeError):
                continue
            target = node.targets[0]
            names = [t.id for t in target.elts] if isinstance(target, ast.Tuple) else [target.id]
            found.update(zip(names, value if isinstance(target, ast.Tuple) else [value]))
    return found


def test_the_checks_tile_and_stage_constants_are_the_answer_cells():
    """The kernel checks restate the cells' tile, stage and thread counts (their shapes are chosen against them: K
    below one tile, rings that wrap); a change in a cell must show here."""
    from cutecourse.grading.checks import l06_cp_async as L4, l06_tma_pipeline as TMA

    for exercise, module, names in (("6.4", L4, ("TILE_M", "TILE_N", "TILE_K", "STAGES")),
                                    ("6.5", TMA, ("TMA_TILE_K", "TMA_STAGES", "TMA_THREADS"))):
        cell = cell_constants(solution(exercise))
        assert {n: getattr(module, n) for n in names} == {n: cell[n] for n in names}, exercise
