"""Lesson 8 (kernel composition, dispatch and profiling): three CPU exercises and the capstone, a split-K GEMM with a
deterministic reduction. A partly right submission scores exactly its points; the package's own rules submitted as
the answers (steps 9-11's row-grouped raster, step 10's persistent grid, the dispatcher's 16-byte-or-scalar rule) and
a split-K whose CTAs arrive before their warps have stored (a race on the workspace) fail every check and hidden
test they can, with a hint that points at the mistake without printing the answer; each classic mistake of the CPU
exercises, one by one, fails its exercise's check (where the check's cases can show it) and its hidden test; the
package's GEMM and the lesson's worked example submitted as the capstone earn no kernel points; and the solutions
pass every check and hidden test, on a GPU every point of the capstone.

The mistakes one by one run the lesson's hidden tests in this process, through a stand-in for the `learner` fixture
that calls the answer here with the same wire round trip and error text (milliseconds per mistake); the graded
submissions show the same through the grader. The capstone's mistakes one by one are in test_l08_splitk.py."""

from __future__ import annotations

import importlib.util
import re
import signal
from pathlib import Path
from typing import Any, Callable

import pytest

from cutecourse import env
from cutecourse.grading import checks, grader, reports, results, sandbox, wire
from cutecourse.grading.checks import l08_dispatch as L

from .submissions import (ROOT, answer_from_file, assert_failed, edited, exercise_report, grade_lesson, hard_coded,
                          lesson_solution, outputs, solution_report, statuses)
from .test_l08_splitk import GPU_MISTAKES, NOT_THE_ANSWER, PTX_MISTAKES
from .test_no_copies import occurs, tokens

LESSON = "08_dispatch_profiling"
EXERCISES = {"8.1", "8.2", "8.3", "8.4"}
CPU_EXERCISES = {"8.1", "8.2", "8.3"}
CHECKS = {"8.1": "raster", "8.2": "persistent_grid", "8.3": "choose", "8.4": "splitk_ptx"}
FUNCTIONS = {"8.1": "raster", "8.2": "persistent_grid", "8.3": "choose"}  # the CPU checks call them by name
CPU_HIDDEN = {"8.1": "raster_computes_every_tile_once_on_random_grids_and_descends_huge_ones",
              "8.2": "persistent_grid_on_random_problems_gpus_and_clusters",
              "8.3": "choose_on_random_problems_and_its_refusals",
              "8.4": "splitk_ptx_for_both_dtypes_and_archs"}
GPU_CHECKS = {"8.4": "splitk_gemm"}
GPU_HIDDEN = {"8.4": "splitk_gemm_on_random_ragged_shapes_and_split_counts"}
SPEED_HIDDEN = {"8.4": "splitk_outruns_step_5_on_a_deep_k_problem"}
#: The capstone's points: its two checks, its PTX test, its GPU test and the speed judgement.
CAPSTONE_POINTS = 1 + 1 + 1 + 3 + 2
GPU80 = env.gpu_missing(80) is None


def solution(exercise: str) -> str:
    return lesson_solution(LESSON, exercise)


def submit(tmp_path: Path, answers: dict[str, str], exercises: set[str] = EXERCISES) -> grader.Report:
    return grade_lesson(tmp_path, LESSON, answers, timeout=120, exercises=exercises)


# --------------------------------------------------------------------------- the package's rules as answers

#: Steps 9-11's raster (`_tile_coord`: groups of group_m tile rows, column by column inside a group), in Python, with
#: step 9's default group of 8 rows.
PACKAGE_RASTER = """
def raster(work, tiles_m, tiles_n):
    group_m = 8
    per_group = group_m * tiles_n
    first_m = (work // per_group) * group_m
    rows = min(tiles_m - first_m, group_m)
    r = work % per_group
    return first_m + r % rows, r // rows
"""
#: Step 10's host sizes its balanced grid by these lines, with no limit on co-resident clusters (its caller passes a
#: smaller `sms` for 2 x 2 clusters); the efficiency added as the exercise defines it.
PACKAGE_GRID = """
def persistent_grid(m, n, tile_m, tile_n, sms, cluster_m, cluster_n, max_clusters=None):
    clusters_m = (m + tile_m * cluster_m - 1) // (tile_m * cluster_m)
    clusters_n = (n + tile_n * cluster_n - 1) // (tile_n * cluster_n)
    fit = sms // (cluster_m * cluster_n)
    rounds = (clusters_m * clusters_n + fit - 1) // fit
    persistent = (clusters_m * clusters_n + rounds - 1) // rounds
    tiles = ((m + tile_m - 1) // tile_m) * ((n + tile_n - 1) // tile_n)
    return persistent, rounds, tiles / (rounds * persistent * cluster_m * cluster_n)
"""
#: The lines of the package's code that PACKAGE_RASTER and PACKAGE_GRID copy, and where they are.
PACKAGE_LINES = {
    "cutecourse/kernels/gemm/gemm09_persistent.py": ["per_group = group_m * tiles_n",
                                                     "first_m = (work // per_group) * group_m",
                                                     "r = work % per_group", "return first_m + r % rows, r // rows"],
    "cutecourse/kernels/gemm/gemm10_multicast.py": ["rounds = (clusters_m * clusters_n + fit - 1) // fit",
                                                    "persistent = (clusters_m * clusters_n + rounds - 1) // rounds"],
}

# Each wrong answer makes one classic mistake; the check's hint points at it.
WRONG = {
    "8.1": PACKAGE_RASTER,
    "8.2": PACKAGE_GRID,
    # the package's dispatcher knows 16-byte vectors or scalars, nothing between: here with the table's names
    "8.3": edited(solution("8.3"), ("for v in (1, 2, 4, 8, 16)", "for v in (1, 16 // element_bytes)")),
    # a race on the workspace: thread 0 counts its CTA as arrived while other warps may still be storing
    "8.4": PTX_MISTAKES["no barrier before the arrival"][0](),
}
#: What each wrong answer's check says, and its hidden test (which sees a whole grid of 8.1's order).
HINTS = {"8.1": "is not the tile of work item", "8.2": "(max_clusters)", "8.3": "not only 16 bytes or scalars",
         "8.4": "no CTA barrier between the workspace stores and the atomic add"}
HIDDEN_HINTS = dict(HINTS, **{"8.1": "grouped raster, groups of 2 tile rows"})


def test_the_package_answers_are_the_packages_code():
    for path, lines in PACKAGE_LINES.items():
        source = tokens((ROOT / path).read_text(encoding="utf-8"))
        for line in lines:
            assert occurs(tokens(line), source), f"{path} no longer has {line!r}; update PACKAGE_RASTER/GRID"
    for answer, path in ((PACKAGE_RASTER, "cutecourse/kernels/gemm/gemm09_persistent.py"),
                         (PACKAGE_GRID, "cutecourse/kernels/gemm/gemm10_multicast.py")):
        assert all(line in answer for line in PACKAGE_LINES[path])


@pytest.mark.slow  # torch and the kernels' modules, a few seconds
def test_the_packages_dispatcher_knows_only_16_byte_vectors_or_scalars():
    """cutecourse.gemm.explain on the check's problem whose N = 4100 allows 8-byte vectors (4 elements): the package
    loads scalars (step 2), where the exercise's table has an 8-byte cp.async kernel. WRONG["8.3"] is that rule."""
    import torch

    import cutecourse

    case = (90, (4096, 4100, 4096), ("k", "k"), 16, "bfloat16")
    assert case in checks.choose.cases() and L.reference_choice(*case) == (L.MULTISTAGE, 4)
    m, n, k = case[1]
    a, b = torch.empty(m, k, dtype=torch.bfloat16), torch.empty(k, n, dtype=torch.bfloat16)
    assert cutecourse.gemm.explain(a, b, arch=90).step == "gemm02_smem"


@pytest.fixture(scope="module")
def wrong_report(tmp_path_factory) -> grader.Report:
    return submit(tmp_path_factory.mktemp("wrong"), WRONG)


@pytest.mark.slow
def test_every_check_and_hidden_test_fails_on_a_wrong_answer(wrong_report):
    assert {e: wrong_report.exercises()[e][0] for e in EXERCISES} == dict.fromkeys(EXERCISES, 0.0), \
        reports.summary(wrong_report)
    assert_failed(wrong_report, list(CPU_HIDDEN.values()), list(CHECKS.values()))


@pytest.mark.slow
def test_each_failure_says_what_is_wrong(wrong_report):
    output = outputs(wrong_report)
    for exercise in EXERCISES:
        assert HINTS[exercise] in output[f"check {CHECKS[exercise]}"], output[f"check {CHECKS[exercise]}"]
        hidden = output[f"hidden test_{CPU_HIDDEN[exercise]}"]
        assert HIDDEN_HINTS[exercise] in hidden, hidden


def test_the_checks_hints_do_not_print_the_answer(capsys, tmp_path):
    """Each check fails its wrong answer in one line that names the mistake, and the line holds none of the right
    values it was compared with: 8.1's tile, 8.2's clusters and waves, 8.3's kernel and vector, 8.4's bound."""
    wrong = {e: answer_from_file(tmp_path, WRONG[e], FUNCTIONS[e]) for e in CPU_EXERCISES}
    for exercise, fn in wrong.items():
        check = getattr(checks, CHECKS[exercise])
        case = next(c for c in check.cases() if check.judge(c, fn(*c), []) is not None)
        if exercise == "8.1":
            secrets = [re.escape(str(L.hilbert_tile(*case)))]
        elif exercise == "8.2":
            secrets = [rf"\b{v}\b" for v in L.reference_grid(*case)[:2]]
        else:
            kernel, vector = L.reference_choice(*case)
            secrets = [kernel, rf"vector={vector}\b", rf"\b{vector} elements"]
        assert check(fn) is False
        line = capsys.readouterr().out
        assert line.startswith(f"✗ {CHECKS[exercise]}: ") and line.count("\n") == 1 and HINTS[exercise] in line, line
        hint = line.split(": ", 2)[2]
        leaked = [s for s in secrets if re.search(s, hint)]
        assert not leaked, (exercise, leaked, hint)


# --------------------------------------------------------------------------- each mistake, one by one


class InProcess:
    """A stand-in for the hidden tests' `learner`: calls an answer's functions in this process, with the wire's round
    trip both ways and the sandbox's error text, as `sandbox.Learner.call` does."""

    def __init__(self, functions: dict[str, Callable[..., Any]]):
        self.functions = functions

    def call(self, name: str, *args: Any, via: str = "call", options: dict | None = None,
             timeout: float | None = None) -> tuple[Any, list[Any]]:
        if timeout:  # as the sandbox stops a call past its timeout (an alarm interrupts a Python loop)
            previous = signal.signal(signal.SIGALRM, _expire)
            signal.setitimer(signal.ITIMER_REAL, timeout)
        try:
            value, outputs = sandbox.execute(self.functions[name], [wire.argument(a) for a in args], via, options)
        except _Expired:
            raise sandbox.LearnerError(f"timed out after {timeout:g} s while running {name}") from None
        except Exception as exc:  # noqa: BLE001 - as the learner's process reports any failure
            raise sandbox.LearnerError(f"{name} raised {sandbox.describe(exc)}") from None
        finally:
            if timeout:
                signal.setitimer(signal.ITIMER_REAL, 0)
                signal.signal(signal.SIGALRM, previous)
        return wire.decode(wire.encode(value)), [wire.decode(wire.encode(o)) for o in outputs]


class _Expired(BaseException):
    """A stand-in call ran past its timeout (a BaseException, so that the answer's own `except Exception` cannot
    swallow it)."""


def _expire(signum: int, frame: Any) -> None:
    raise _Expired


def hidden_test(exercise: str, **constants: Any) -> Callable[[Any], None]:
    """The hidden test of `exercise`, its module's `constants` set to the values given."""
    path = ROOT / "tests" / "hidden" / f"test_{LESSON}.py"
    spec = importlib.util.spec_from_file_location(f"hidden_{LESSON}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    for name, value in constants.items():
        assert hasattr(module, name), f"the hidden tests have no {name}; update this test"
        setattr(module, name, value)
    return getattr(module, f"test_{CPU_HIDDEN[exercise]}")


def run_hidden(exercise: str, fn: Callable[..., Any], **constants: Any) -> str | None:
    """The hidden test's failure message for answer `fn` (its module's `constants` set), or None if it passes."""
    try:
        hidden_test(exercise, **constants)(InProcess({FUNCTIONS[exercise]: fn}))
    except (AssertionError, pytest.fail.Exception) as exc:  # a hidden test fails by assert or by pytest.fail
        return str(exc)
    return None


#: A raster that walks the curve: each call lists the curve's cells, in order, until it reaches the work item's (the
#: solution's descent on the whole square, one cell at a time). Right, and far too slow for a huge grid.
WALKING_RASTER = edited(solution("8.1"), ("def raster(", "def cell(")) + """


def raster(work, tiles_m, tiles_n):
    side = 1
    while side < max(tiles_m, tiles_n):
        side *= 2
    for d in range(side * side):
        m, n = cell(d, side, side)
        if m < tiles_m and n < tiles_n:
            if work == 0:
                return m, n
            work -= 1
"""
QUADRANTS_81 = """        for i, j, turn_swap, turn_flip in ((0, 0, True, False), (half, 0, False, False),
                                           (half, half, False, False), (0, half, True, True)):"""

#: exercise -> mistake -> (the answer, what the check says or None where its cases cannot show it, what the hidden
#: test says).
MISTAKES = {
    "8.1": {
        "the package's row-grouped order": (PACKAGE_RASTER, "is not the tile of work item", "grouped raster"),
        "the quadrants not turned": (
            edited(solution("8.1"), (QUADRANTS_81, QUADRANTS_81.replace("True", "False"))),
            "quadrants are not turned", "quadrants are not turned"),
        "the curve transposed": (edited(solution("8.1"), ("m0, n0, swap, flip = 0, 0, False, False",
                                                          "m0, n0, swap, flip = 0, 0, True, False")),
                                 "m and n swapped", "m and n swapped"),
        # (n, m) for (m, n): on a square grid that is the transposed curve; elsewhere it leaves the grid
        "(m, n) swapped": (edited(solution("8.1"), ("    return m0, n0", "    return n0, m0")),
                           "m and n swapped", "m and n swapped"),
        "the cells outside the grid numbered": (
            edited(solution("8.1"), ("if work < rows * cols:", "if work < half * half:"),
                   ("work -= rows * cols", "work -= half * half")),
            "outside the", "outside the"),
        "walking the curve": (WALKING_RASTER, None, "not by walking the curve"),
    },
    "8.2": {
        "a partial last wave": (edited(solution("8.2"), ("clusters = math.ceil(work / waves)",
                                                         "clusters = min(fit, work)")),
                                "last wave is partly idle", "last wave is partly idle"),
        "clusters rounded down": (edited(solution("8.2"), ("clusters = math.ceil(work / waves)",
                                                           "clusters = work // waves")),
                                  "cannot take all", "cannot take all"),
        "no limit on co-resident clusters": (PACKAGE_GRID, "(max_clusters)", "(max_clusters)"),
        "waves of CTA tiles": (edited(solution("8.2"), ("waves = math.ceil(work / fit)",
                                                        "waves = math.ceil(tiles_m * tiles_n / sms)")),
                               "counts CTA tiles over SMs", "counts CTA tiles over SMs"),
        "efficiency in whole tiles": (edited(solution("8.2"), ("m * n / (slots * tile_m * tile_n)",
                                                               "tiles_m * tiles_n / slots")),
                                      "counts whole tiles", "counts whole tiles"),
        "bad input not refused": (edited(solution("8.2"), ("if value < 1:", "if False:"),
                                         ("if sms < cluster_size:", "if False:")),
                                  None, "is a ValueError"),
    },
    "8.3": {
        "16-byte vectors or scalars": (WRONG["8.3"], "not only 16 bytes or scalars", "not only 16 bytes or scalars"),
        "the 132-tile line counted as small": (edited(solution("8.3"), ("< 132", "<= 132")),
                                               "small-problem line", "small-problem line"),
        "C's extent forgotten": (edited(solution("8.3"), ("k if b_major == \"k\" else n, n)",
                                                          "k if b_major == \"k\" else n)")),
                                 "every contiguous extent", "every contiguous extent"),
        "the majors ignored": (edited(solution("8.3"), ('(k if a_major == "k" else m, k if b_major == "k" else n, n)',
                                                        "(k, k, n)")),
                               None, "every contiguous extent"),
        "fp8 refused with torch.matmul": (edited(solution("8.3"), ("use torch._scaled_mm", "use torch.matmul")),
                                          None, "does not name the right fallback"),
        "fp8 on sm_90 whatever the majors": (edited(solution("8.3"), ("hopper and a_major == b_major == \"k\"",
                                                                      "hopper")),
                                             None, "no kernel of the table serves"),
    },
}
CASES = [(e, name) for e in sorted(MISTAKES) for name in MISTAKES[e]]


@pytest.mark.parametrize("exercise, mistake", CASES, ids=[f"{e} {m}" for e, m in CASES])
def test_each_mistake_fails_the_check_where_it_can_and_the_hidden_test(tmp_path, exercise, mistake):
    source, check_hint, hidden_hint = MISTAKES[exercise][mistake]
    fn = answer_from_file(tmp_path, source, FUNCTIONS[exercise])
    line = getattr(checks, CHECKS[exercise]).run(fn)
    if check_hint is None:
        assert line.startswith(checks.PASS), line  # the hidden test is what catches it
    else:
        assert line.startswith(checks.FAIL) and check_hint in line, line
    walking = mistake == "walking the curve"
    # A walk of the curve spins on the huge grid until the call's timeout: 1 s shows it as well as the grader's 10 s.
    failure = run_hidden(exercise, fn, **({"RASTER_TIMEOUT_S": 1} if walking else {}))
    assert failure is not None and hidden_hint in failure, failure
    if walking:  # stopped by the first call, for the huge grid's last tile, before the random grids
        tiles_m, tiles_n, works = L.HUGE_GRIDS[0]
        assert failure.startswith(f"raster({works[-1]}, {tiles_m}, {tiles_n}) took more than 1 s"), failure


@pytest.mark.parametrize("exercise", sorted(CPU_EXERCISES))
def test_the_solutions_pass_every_check_and_hidden_test(tmp_path, exercise):
    fn = answer_from_file(tmp_path, solution(exercise), FUNCTIONS[exercise])
    assert getattr(checks, CHECKS[exercise]).run(fn).startswith(checks.PASS)
    assert run_hidden(exercise, fn) is None


def test_the_stand_in_learner_reports_as_the_sandbox_does():
    """Its replies are what the hidden tests read from a real learner process: values after the wire, errors as
    LearnerError with the exception's type and text."""
    def choose(*args):
        raise ValueError("use torch.matmul")

    def spin(*args):
        while True:
            pass

    learner = InProcess({"raster": lambda *a: [1, 2], "choose": choose, "spin": spin})
    assert learner.call("raster", 0, 1, 1) == ([1, 2], [])
    with pytest.raises(sandbox.LearnerError, match=r"^choose raised ValueError: use torch\.matmul$"):
        learner.call("choose", 90)
    with pytest.raises(sandbox.LearnerError, match=r"^timed out after 0.5 s while running spin$"):
        learner.call("spin", timeout=0.5)


def test_the_judges_catch_each_way_of_getting_it_wrong():
    """Replies of the wrong kind, and the hints' cases the mistakes above do not reach."""
    assert "two ints" in L.raster_hint((0, 2, 2), [0.0, 0])
    assert "comes up twice" in L.raster_grid_hint((1, 2), [(0, 0), (0, 0)])
    assert "Z (Morton) order" in L.raster_grid_hint((4, 4), [(m, n) for m, n in L._mistaken_orders(4, 4)[L.MORTON]])
    assert "row-major" in L.raster_grid_hint((3, 5), [(m, n) for m in range(3) for n in range(5)])
    assert "expected (clusters, waves, efficiency)" in L.grid_hint(checks.persistent_grid.cases()[0], (64, 4))
    assert "cannot take all 256" in L.grid_hint((4096, 4096, 128, 256, 132, 2, 1, None), (60, 4, 1.0))
    assert "counts cluster work items" in L.grid_hint((800, 3000, 128, 128, 132, 2, 1, None), (48, 2, 1.0))
    case = (800, 3000, 128, 128, 132, 1, 1, None)  # 7 x 24 tiles, the last row and column partial
    clusters, waves, _ = L.reference_grid(*case)
    assert "counts whole tiles" in L.grid_hint(case, (clusters, waves, 7 * 24 / (waves * clusters)))
    assert "expected (kernel, vector)" in L.choice_hint(checks.choose.cases()[0], ("gemm10_multicast", 8))
    assert "suit this alignment" in L.choice_hint((100, (4096,) * 3, ("k", "k"), 4, "float16"), (L.MULTISTAGE, 8))
    assert "runs only on sm_90" in L.choice_hint((89, (4096,) * 3, ("k", "k"), 16, "float16"), (L.PINGPONG, 8))
    assert "faster kernel" in L.choice_hint((90, (4096,) * 3, ("k", "k"), 16, "float16"), (L.MULTISTAGE, 8))
    assert "cp.async" in L.choice_hint((86, (1000, 999, 64), ("m", "k"), 16, "float16"), (L.MULTISTAGE, 1))
    refused = (75, (4096,) * 3, ("k", "k"), 16, "float16")
    assert "a refusal is a ValueError" in L.refusal_hint(refused, "TypeError: torch.matmul")
    assert L.refusal_hint(refused, "ValueError: sm_75: use torch.matmul") is None
    assert L.refusal_hint(refused, "ValueError: torch.matmul, or dequantize for torch._scaled_mm") is None  # both named
    assert "right fallback" in L.refusal_hint(refused, "ValueError: use torch._scaled_mm")


def d2xy_order(tiles_m: int, tiles_n: int) -> list[tuple[int, int]]:
    """The Hilbert order as the classic d2xy walk gives it (Wikipedia's, with (x, y) = (n, m)), the cells outside
    the grid skipped: an independent statement of the exercise's curve."""
    side = 1
    while side < max(tiles_m, tiles_n):
        side *= 2
    order = []
    for d in range(side * side):
        x = y = 0
        s, t = 1, d
        while s < side:
            rx = 1 & (t // 2)
            ry = 1 & (t ^ rx)
            if ry == 0:
                if rx == 1:
                    x, y = s - 1 - x, s - 1 - y
                x, y = y, x
            x += s * rx
            y += s * ry
            t //= 4
            s *= 2
        if y < tiles_m and x < tiles_n:
            order.append((y, x))
    return order


def test_the_reference_raster_is_the_hilbert_curve_and_steps_one_tile_at_a_time():
    """The reference is the classic d2xy curve on every grid up to 20 x 20 (the exercise's examples among them),
    and on a power-of-two square every work item is next to the one before."""
    assert list(L.hilbert_order(3, 2)) == [(0, 0), (0, 1), (1, 1), (1, 0), (2, 0), (2, 1)]
    assert list(L.hilbert_order(2, 2)) == [(0, 0), (1, 0), (1, 1), (0, 1)]
    for tiles_m in range(1, 21):
        for tiles_n in range(1, 21):
            assert list(L.hilbert_order(tiles_m, tiles_n)) == d2xy_order(tiles_m, tiles_n), (tiles_m, tiles_n)
    square = L.hilbert_order(16, 16)
    assert all(abs(a[0] - b[0]) + abs(a[1] - b[1]) == 1 for a, b in zip(square, square[1:]))
    for tiles_m, tiles_n, works in L.HUGE_GRIDS:
        for work in works:
            m, n = L.hilbert_tile(work, tiles_m, tiles_n)
            assert 0 <= m < tiles_m and 0 <= n < tiles_n


# --------------------------------------------------------------------------- the solution and the untouched exercise


@pytest.mark.slow
def test_the_solution_scores_every_runnable_point_and_the_untouched_exercise_none(tmp_path):
    """Exercise by exercise: the solution notebook, as submitted, earns every point this machine can judge (the
    capstone's GPU points where there is a GPU), and the exercise notebook as built earns none."""
    solved = solution_report(tmp_path, LESSON)
    assert all(score == top > 0 for score, top in solved.exercises().values()), reports.summary(solved)
    assert set(solved.exercises()) == EXERCISES
    if GPU80:
        assert solved.exercises()["8.4"] == (float(CAPSTONE_POINTS),) * 2, reports.summary(solved)
    untouched = exercise_report(LESSON)
    assert {e: score for e, (score, _) in untouched.exercises().items()} == dict.fromkeys(EXERCISES, 0.0), \
        reports.summary(untouched)


# --------------------------------------------------------------------------- a partly right submission

#: 8.1 answered only for the check's visible cases: the check passes, the hidden test does not.
HARD_CODED_8_1 = hard_coded("raster", "work, tiles_m, tiles_n",
                            {case: L.hilbert_tile(*case) for case in checks.raster.cases()}, (0, 0))
#: 8.4 right but for the reduction's order (from the last split): its PTX passes, its numbers do not (on a GPU).
REVERSED_8_4 = GPU_MISTAKES["reversed order"][0]()


def test_the_hard_coded_answer_really_passes_only_the_visible_cases(tmp_path):
    fn = answer_from_file(tmp_path, HARD_CODED_8_1, "raster")
    assert checks.raster.run(fn).startswith(checks.PASS)
    assert "comes up twice" in run_hidden("8.1", fn)


@pytest.fixture(scope="module")
def partial_report(tmp_path_factory) -> grader.Report:
    """8.1 hard-coded (check only); 8.2 right; 8.3 right but its fp8 refusals name torch.matmul (check only); 8.4
    summing its slices from the last (the PTX points only)."""
    return submit(tmp_path_factory.mktemp("partial"), {
        "8.1": HARD_CODED_8_1, "8.2": solution("8.2"), "8.3": MISTAKES["8.3"]["fp8 refused with torch.matmul"][0],
        "8.4": REVERSED_8_4})


@pytest.mark.slow
def test_partly_right_submission_scores_exactly_its_points(partial_report):
    got = {e: partial_report.exercises()[e] for e in sorted(CPU_EXERCISES)}
    assert got == {"8.1": (1.0, 3.0), "8.2": (3.0, 3.0), "8.3": (1.0, 3.0)}, reports.summary(partial_report)
    assert partial_report.exercises()["8.4"][0] == 2.0, reports.summary(partial_report)  # with a GPU or without
    state = statuses(partial_report)
    for exercise in ("8.1", "8.3"):
        assert state[f"check {CHECKS[exercise]}"] == results.PASSED, reports.summary(partial_report)
        assert state[f"hidden test_{CPU_HIDDEN[exercise]}"] == results.FAILED, reports.summary(partial_report)
    assert "does not name the right fallback" in outputs(partial_report)[f"hidden test_{CPU_HIDDEN['8.3']}"]
    assert state["check splitk_ptx"] == state[f"hidden test_{CPU_HIDDEN['8.4']}"] == results.PASSED
    if GPU80:
        output = outputs(partial_report)
        for name in (f"check {GPU_CHECKS['8.4']}", f"hidden test_{GPU_HIDDEN['8.4']}",
                     f"hidden test_{SPEED_HIDDEN['8.4']}"):
            assert state[name] == results.FAILED and "from the last split" in output[name], (name, output[name])


# --------------------------------------------------------------------------- the capstone: what it must not earn

@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(NOT_THE_ANSWER))
def test_the_packages_gemm_and_the_lessons_example_earn_no_kernel_points(tmp_path, name):
    """The code nearest the capstone's answer that a learner can read (test_l08_splitk.NOT_THE_ANSWER: the package's
    GEMM in the cell, the lesson's worked example), submitted as it, earns nothing, with a GPU or without."""
    source, hint = NOT_THE_ANSWER[name]
    report = submit(tmp_path, {"8.4": source()}, exercises={"8.4"})
    assert report.exercises()["8.4"][0] == 0.0, reports.summary(report)
    output = outputs(report)
    for test in (f"check {CHECKS['8.4']}", f"hidden test_{CPU_HIDDEN['8.4']}"):
        assert hint in output[test], (test, output[test])
    if GPU80:
        state = statuses(report)
        for test in (f"check {GPU_CHECKS['8.4']}", f"hidden test_{GPU_HIDDEN['8.4']}",
                     f"hidden test_{SPEED_HIDDEN['8.4']}"):
            assert state[test] == results.FAILED, (test, reports.summary(report))


@pytest.mark.gpu(80)
def test_on_a_gpu_the_capstones_solution_earns_every_point(tmp_path):
    report = submit(tmp_path, {"8.4": solution("8.4")}, exercises={"8.4"})
    assert report.exercises()["8.4"] == (float(CAPSTONE_POINTS), float(CAPSTONE_POINTS)), reports.summary(report)
    state = statuses(report)
    for name in (f"check {GPU_CHECKS['8.4']}", f"hidden test_{GPU_HIDDEN['8.4']}",
                 f"hidden test_{SPEED_HIDDEN['8.4']}"):
        assert state[name] == results.PASSED, (name, reports.summary(report))


def test_the_checks_constants_are_the_exercises():
    """The solution of 8.3 and the judge name the same four kernels."""
    assert all(f'"{kernel}"' in solution("8.3") for kernel in L.KERNELS)
