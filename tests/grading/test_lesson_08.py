"""Lesson 8 (kernel composition, dispatch and profiling), the four CPU exercises: a partly right submission scores
exactly its points; the package's own rules submitted as the answers (steps 9-11's row-grouped raster, step 10's
persistent grid, the dispatcher's 16-byte-or-scalar rule) and a bound without the 60 % line fail every check and
hidden test, with a hint that points at the mistake without printing the answer; each classic mistake, one by one,
fails its exercise's check (where the check's cases can show it) and its hidden test; and the solutions pass every
check and hidden test.

The mistakes one by one run the lesson's hidden tests in this process, through a stand-in for the `learner` fixture
that calls the answer here with the same wire round trip and error text (milliseconds per mistake); the two graded
submissions show the same through the grader."""

from __future__ import annotations

import importlib.util
import re
import textwrap
from pathlib import Path
from typing import Any, Callable

import pytest

from cutecourse.grading import checks, grader, reports, results, sandbox, wire
from cutecourse.grading.checks import l08_dispatch as L

from .submissions import (ROOT, answer_from_file, assert_failed, edited, grade_lesson, hard_coded, lesson_solution,
                          outputs, statuses)
from .test_no_copies import occurs, tokens

LESSON = "08_dispatch_profiling"
EXERCISES = {"8.1", "8.2", "8.3", "8.4"}
CHECKS = {"8.1": "raster", "8.2": "persistent_grid", "8.3": "choose", "8.4": "bound"}
FUNCTIONS = CHECKS  # each check is named after the function it calls
HIDDEN = {"8.1": "raster_computes_every_tile_once_on_random_grids",
          "8.2": "persistent_grid_on_random_problems_gpus_and_clusters",
          "8.3": "choose_on_random_problems_and_its_refusals",
          "8.4": "bound_of_random_profiles_near_the_line_with_ties_and_extra_metrics"}


def solution(exercise: str) -> str:
    return lesson_solution(LESSON, exercise)


def submit(tmp_path: Path, answers: dict[str, str]) -> grader.Report:
    return grade_lesson(tmp_path, LESSON, answers, timeout=120, exercises=EXERCISES)


# --------------------------------------------------------------------------- the package's rules as answers

#: Steps 9-11's raster (`_tile_coord`: groups of group_m tile rows, column by column inside a group), in Python, with
#: the exercise's group_n for group_m.
PACKAGE_RASTER = """
def raster(work, tiles_m, tiles_n, group_n):
    group_m = group_n
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
    # the busiest unit, however far from its peak
    "8.4": edited(solution("8.4"), ('return busiest if peak >= 60 else "latency"', "return busiest")),
}
#: What each wrong answer's check says (the hidden tests use the same hints).
HINTS = {"8.1": "groups of 2 tile rows, walked column by column", "8.2": "(max_clusters)",
         "8.3": "not only 16 bytes or scalars", "8.4": "below the 60 % line"}
HIDDEN_HINTS = {"8.1": "tile rows, walked column by column", "8.2": "(max_clusters)",
                "8.3": "not only 16 bytes or scalars", "8.4": "below the 60 % line"}


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
    assert_failed(wrong_report, list(HIDDEN.values()), list(CHECKS.values()))


@pytest.mark.slow
def test_each_failure_says_what_is_wrong(wrong_report):
    output = outputs(wrong_report)
    for exercise in EXERCISES:
        assert HINTS[exercise] in output[f"check {CHECKS[exercise]}"], output[f"check {CHECKS[exercise]}"]
        hidden = output[f"hidden test_{HIDDEN[exercise]}"]
        assert HIDDEN_HINTS[exercise] in hidden, hidden


def test_the_checks_hints_do_not_print_the_answer(capsys, tmp_path):
    """Each check fails its wrong answer in one line that names the mistake, and the line holds none of the right
    values it was compared with: 8.1's tile, 8.2's clusters and waves, 8.3's kernel and vector, 8.4's bound."""
    wrong = {e: answer_from_file(tmp_path, WRONG[e], FUNCTIONS[e]) for e in WRONG}
    for exercise, fn in wrong.items():
        check = getattr(checks, CHECKS[exercise])
        case = next(c for c in check.cases() if check.judge(c, fn(*c), []) is not None)
        if exercise == "8.1":
            secrets = [re.escape(str(L.raster_order(*case[1:])[case[0]]))]
        elif exercise == "8.2":
            secrets = [rf"\b{v}\b" for v in L.reference_grid(*case)[:2]]
        elif exercise == "8.3":
            kernel, vector = L.reference_choice(*case)
            secrets = [kernel, rf"vector={vector}\b", rf"\b{vector} elements"]
        else:
            secrets = [L.reference_bound(case[0])]
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
        try:
            value, outputs = sandbox.execute(self.functions[name], [wire.argument(a) for a in args], via, options)
        except Exception as exc:  # noqa: BLE001 - as the learner's process reports any failure
            raise sandbox.LearnerError(f"{name} raised {sandbox.describe(exc)}") from None
        return wire.decode(wire.encode(value)), [wire.decode(wire.encode(o)) for o in outputs]


def hidden_test(exercise: str) -> Callable[[Any], None]:
    path = ROOT / "tests" / "hidden" / f"test_{LESSON}.py"
    spec = importlib.util.spec_from_file_location(f"hidden_{LESSON}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return getattr(module, f"test_{HIDDEN[exercise]}")


def run_hidden(exercise: str, fn: Callable[..., Any]) -> str | None:
    """The hidden test's failure message for answer `fn`, or None if it passes."""
    try:
        hidden_test(exercise)(InProcess({FUNCTIONS[exercise]: fn}))
    except AssertionError as exc:
        return str(exc)
    return None


#: exercise -> mistake -> (the answer, what the check says or None where its cases cannot show it, what the hidden
#: test says).
MISTAKES = {
    "8.1": {
        "the package's row-grouped order": (PACKAGE_RASTER, "(the package's steps 9-11)", "(the package's steps 9-11)"),
        "along M first inside a column group": (
            edited(solution("8.1"), ("m, dn = divmod(offset, width)", "dn, m = divmod(offset, tiles_m)")),
            "work items go along M first", "work items go along M first"),
        # (n, m) for (m, n): at the check's first tell-tale item that is where the package's order puts it
        "(m, n) swapped": (edited(solution("8.1"), ("return m, first_n + dn", "return first_n + dn, m")),
                           "(the package's steps 9-11)", "is the tile (m, n), its row first?"),
        "the last group as wide as the others": (
            edited(solution("8.1"), ("width = min(group_n, tiles_n - first_n)", "width = group_n")),
            "is the last group of columns as wide", "is the last group of columns as wide"),
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
        "efficiency in elements": (edited(solution("8.2"), ("tiles_m * tiles_n / (waves * clusters * cluster_size)",
                                                            "m * n / (waves * clusters * cluster_size * tile_m * "
                                                            "tile_n)")),
                                   "efficiency counts elements", "efficiency counts elements"),
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
    "8.4": {
        "no 60 % line": (WRONG["8.4"], "below the 60 % line", "below the 60 % line"),
        "the line itself below it": (edited(solution("8.4"), ("peak >= 60", "peak > 60")),
                                     "runs at or above 60 %", "runs at or above 60 %"),
        "ties to the last unit": (edited(solution("8.4"), ("profile[metric] > peak", "profile[metric] >= peak")),
                                  "ties with another unit", "ties with another unit"),
        "a missing metric read as 0": (edited(solution("8.4"),
                                              ("profile[metric] > peak", "profile.get(metric, 0) > peak"),
                                              ("peak = unit, profile[metric]", "peak = unit, profile.get(metric, 0)")),
                                       None, "a missing metric is a KeyError or ValueError"),
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
    failure = run_hidden(exercise, fn)
    assert failure is not None and hidden_hint in failure, failure


@pytest.mark.parametrize("exercise", sorted(EXERCISES))
def test_the_solutions_pass_every_check_and_hidden_test(tmp_path, exercise):
    fn = answer_from_file(tmp_path, solution(exercise), FUNCTIONS[exercise])
    assert getattr(checks, CHECKS[exercise]).run(fn).startswith(checks.PASS)
    assert run_hidden(exercise, fn) is None


def test_the_stand_in_learner_reports_as_the_sandbox_does():
    """Its replies are what the hidden tests read from a real learner process: values after the wire, errors as
    LearnerError with the exception's type and text."""
    def choose(*args):
        raise ValueError("use torch.matmul")

    learner = InProcess({"raster": lambda *a: [1, 2], "choose": choose})
    assert learner.call("raster", 0, 1, 1, 1) == ([1, 2], [])
    with pytest.raises(sandbox.LearnerError, match=r"^choose raised ValueError: use torch\.matmul$"):
        learner.call("choose", 90)


def test_the_judges_catch_each_way_of_getting_it_wrong():
    """Replies of the wrong kind, and the hints' cases the mistakes above do not reach."""
    assert "two ints" in L.raster_hint((0, 2, 2, 1), [0.0, 0])
    assert "comes up twice" in L.raster_grid_hint((1, 2, 1), [(0, 0), (0, 0)])
    assert "expected (clusters, waves, efficiency)" in L.grid_hint(checks.persistent_grid.cases()[0], (64, 4))
    assert "cannot take all 256" in L.grid_hint((4096, 4096, 128, 256, 132, 2, 1, None), (60, 4, 1.0))
    assert "counts cluster work items" in L.grid_hint((800, 3000, 128, 128, 132, 2, 1, None), (48, 2, 1.0))
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
    assert "expected one of" in L.bound_hint(L.profile_of(90, 0, 0, 0), "compute")
    assert "another unit is busier" in L.bound_hint(L.profile_of(90, 70, 0, 0), "dram")
    with pytest.raises(KeyError, match="dram__throughput"):
        L.reference_bound({L.METRICS["tensor"]: 90.0})


def test_the_reference_raster_is_the_layout_the_lesson_draws_transposed():
    """Where group_n divides the tile columns, the column-grouped order is the CuTe layout
    (tiles_m, (group_n, tiles_n / group_n)) : (group_n, (1, group_n · tiles_m)) from (m, n) to the work item: the
    lesson's row-grouped layout with the modes' roles swapped."""
    from cutecourse.layout import make_layout

    for tiles_m, tiles_n, group_n in ((8, 6, 3), (5, 8, 4), (1, 6, 2), (4, 4, 4)):
        layout = make_layout((tiles_m, (group_n, tiles_n // group_n)), stride=(group_n, (1, group_n * tiles_m)))
        order = L.raster_order(tiles_m, tiles_n, group_n)
        assert all(layout((m, n)) == order.index((m, n)) for m in range(tiles_m) for n in range(tiles_n))


# --------------------------------------------------------------------------- a partly right submission

#: 8.1 answered only for the check's visible cases: the check passes, the hidden test does not.
HARD_CODED_8_1 = hard_coded("raster", "work, tiles_m, tiles_n, group_n",
                            {case: L.raster_order(*case[1:])[case[0]] for case in checks.raster.cases()}, (0, 0))


def test_the_hard_coded_answer_really_passes_only_the_visible_cases(tmp_path):
    fn = answer_from_file(tmp_path, HARD_CODED_8_1, "raster")
    assert checks.raster.run(fn).startswith(checks.PASS)
    assert "comes up twice" in run_hidden("8.1", fn)


@pytest.fixture(scope="module")
def partial_report(tmp_path_factory) -> grader.Report:
    """8.1 hard-coded (check only); 8.2 right; 8.3 right but its fp8 refusals name torch.matmul (check only); 8.4
    right."""
    return submit(tmp_path_factory.mktemp("partial"), {
        "8.1": HARD_CODED_8_1, "8.2": solution("8.2"), "8.3": MISTAKES["8.3"]["fp8 refused with torch.matmul"][0],
        "8.4": solution("8.4")})


@pytest.mark.slow
def test_partly_right_submission_scores_exactly_its_points(partial_report):
    got = {e: partial_report.exercises()[e] for e in sorted(EXERCISES)}
    assert got == {"8.1": (1.0, 3.0), "8.2": (3.0, 3.0), "8.3": (1.0, 3.0), "8.4": (3.0, 3.0)}, \
        reports.summary(partial_report)
    state = statuses(partial_report)
    for exercise in ("8.1", "8.3"):
        assert state[f"check {CHECKS[exercise]}"] == results.PASSED, reports.summary(partial_report)
        assert state[f"hidden test_{HIDDEN[exercise]}"] == results.FAILED, reports.summary(partial_report)
    assert "does not name the right fallback" in outputs(partial_report)[f"hidden test_{HIDDEN['8.3']}"]


def test_the_checks_constants_are_the_exercises():
    """The metric names the answer cell of 8.4 gives the learner are the judge's, in the same (tie) order; the
    solution of 8.3 and the judge name the same four kernels."""
    scope: dict[str, Any] = {}
    exec(textwrap.dedent(solution("8.4").split("def bound")[0]), scope)
    assert scope["METRICS"] == L.METRICS and list(scope["METRICS"]) == list(L.METRICS)
    assert all(f'"{kernel}"' in solution("8.3") for kernel in L.KERNELS)
