"""Lesson 5 (MMA atoms, TiledMMA, Tensor Core mainloops): a partly right submission scores exactly its points; every
check and hidden test fails a wrong answer, with a hint that points at the mistake without printing the answer; an
answer that calls what its exercise forbids scores 0 there; the package's own step 3 (what the lesson prints of it)
submitted as the kernel answers earns no kernel points; and on a GPU, a kernel with a classic mistake that compiles
to the right instructions loses its GPU points and keeps its PTX points.

Three grades on any machine (the wrong answers; the partly right one, whose kernels are the package's; the forbidden
calls), and two more of the kernels alone on a GPU (the solutions'; the classic mistakes)."""

from __future__ import annotations

import inspect
import re
from pathlib import Path

import pytest

from cutecourse import env
from cutecourse import fragments as F
from cutecourse.grading import checks, grader, reports, results
from cutecourse.grading import notebook as nbio
from cutecourse.grading.checks import l05_tiled_mma as L

from .forbidden_calls import assert_forbidden_calls_score_zero, assert_right_but_forbidden
from .submissions import ROOT, answer_from_file, assert_failed, edited, grade_lesson, lesson_solution, statuses
from .test_no_copies import notebook_texts, occurs, tokens

LESSON = "05_tiled_mma"
GPU = env.gpu_missing(80) is None

pytestmark = pytest.mark.slow


def solution(exercise: str) -> str:
    return lesson_solution(LESSON, exercise)


def submit(tmp_path: Path, answers: dict[str, str]) -> grader.Report:
    return grade_lesson(tmp_path, LESSON, answers, timeout=300)


# Each wrong answer makes one classic mistake; the check's hint points at it.
WRONG = {
    # the two "+ 8"s of A swapped: a2, a3 taken 8 columns right instead of 8 rows down
    "5.1": """
def mma_coords(k, lane):
    group, pair = lane >> 2, lane % 4
    a = [(group + 8 * (i >> 2), 2 * pair + (i & 1) + 8 * ((i >> 1) & 1)) for i in range(k // 2)]
    b = [(2 * pair + (i & 1) + 8 * (i >> 1), group) for i in range(k // 4)]
    c = [(group + 8 * (i >> 1), 2 * pair + (i & 1)) for i in range(4)]
    return a, b, c
""",
    # mma.sync's C strides kept as they are on its 16-row tile: on wgmma's 64 rows a column is 64, not 16
    "5.2": """
from cutecourse.layout import Layout
def wgmma_c_layout(n):
    return Layout(((4, 8, 4), (2, 2, n // 8)), ((32, 1, 16), (16, 8, 128)))
""",
    # .trans ignored: the transposed loads give the untransposed registers
    "5.3": """
import numpy as np
def ldmatrix_sim(rows, num_matrices, transpose):
    rows = np.asarray(rows)
    out = np.zeros((32, num_matrices, 2), dtype=rows.dtype)
    for lane in range(32):
        for j in range(num_matrices):
            for half in range(2):
                out[lane, j, half] = rows[8 * j + lane // 4][2 * (lane % 4) + half]
    return out
""",
    # the warp grid left column-major, as the lesson's own TiledMMA (make_layout's default)
    "5.4": edited(solution("5.4"), ("cute.make_layout((warps_m, warps_n, 1), stride=(warps_n, 1, 0))",
                                    "cute.make_layout((warps_m, warps_n, 1))")),
    # step 3's ldmatrix.x4 on the m16n8k8 atom: a warp's A and B per k-block are two matrices, so each loads twice
    "5.5": edited(solution("5.5"), ("LdMatrix8x8x16bOp(False, 2)", "LdMatrix8x8x16bOp(False, 4)")),
    # every CTA computes batch 0: blockIdx.z never read
    "5.6": edited(solution("5.6"), ("mA[None, None, bidz], mB[None, None, bidz], mC[None, None, bidz]",
                                    "mA[None, None, 0], mB[None, None, 0], mC[None, None, 0]")),
}
#: What each wrong answer's check says (the hidden tests use the same hints).
HINTS = {"5.1": "check which values add 8 and in which order", "5.2": "misplaced",
         "5.3": "with .trans, which row and column does a lane receive", "5.4": "row-major",
         "5.5": "ldmatrix.x2, not x1 or x4", "5.6": "never reads blockIdx.z"}
CPU_HIDDEN = {"5.1": "mma_coords_for_every_lane_of_both_shapes", "5.2": "wgmma_c_layout_for_every_n",
              "5.3": "ldmatrix_sim_on_random_rows", "5.4": "tiled_mma_for_random_warp_grids",
              "5.5": "k8_mainloop_ptx_for_both_dtypes_and_archs", "5.6": "batched_gemm_ptx_for_both_dtypes_and_archs"}
CHECKS = {"5.1": "mma_coords", "5.2": "wgmma_c", "5.3": "ldmatrix_sim", "5.4": "tiled_mma_for", "5.5": "k8_ptx",
          "5.6": "bgemm_ptx"}
GPU_HIDDEN = {"5.5": "k8_gemm_on_random_ragged_shapes", "5.6": "batched_gemm_on_random_ragged_batches"}
GPU_CHECKS = {"5.5": "k8_gemm", "5.6": "bgemm"}


@pytest.fixture(scope="module")
def wrong_report(tmp_path_factory) -> grader.Report:
    return submit(tmp_path_factory.mktemp("wrong"), WRONG)


def test_every_check_and_hidden_test_fails_on_a_wrong_answer(wrong_report):
    assert wrong_report.score == 0, reports.summary(wrong_report)
    hidden, names = list(CPU_HIDDEN.values()), list(CHECKS.values())
    if GPU:
        hidden, names = hidden + list(GPU_HIDDEN.values()), names + list(GPU_CHECKS.values())
    assert_failed(wrong_report, hidden, names)


def test_each_failure_says_what_is_wrong(wrong_report):
    output = {t.name.split(" (")[0]: t.output for t in wrong_report.tests}
    for exercise, hint in HINTS.items():
        for test in (f"check {CHECKS[exercise]}", f"hidden test_{CPU_HIDDEN[exercise]}"):
            assert hint in output[test], (test, output[test])


def test_the_cpu_checks_hints_do_not_print_the_answer(capsys, tmp_path):
    """Each check fails its wrong answer in one line that names the mistake, and the line holds none of the right
    values it was compared with."""
    answers = {e: answer_from_file(tmp_path, WRONG[e], fn) for e, fn in
               (("5.1", "mma_coords"), ("5.2", "wgmma_c_layout"), ("5.3", "ldmatrix_sim"), ("5.4", "tiled_mma_for"))}
    secrets = {
        "5.1": [str(p) for lane in (0, 5, 31) for p in L.reference_coords(16, lane)[0][2:4]],
        "5.2": [str(F.wgmma_atom(n).layout_c) for n in (8, 16, 64, 256)],
        "5.3": [],  # filled below: the right value at the first wrong place
        "5.4": [s for case in ((2, 2, 16), (1, 4, 8), (4, 1, 16), (2, 1, 8)) for s in L.reference_tiled(*case)],
    }
    import numpy as np

    rows, x, transpose = next(case for case in L._ldmatrix_cases() if case[2])  # where ignoring .trans shows
    want = F.simulate_ldmatrix(np.asarray(rows), x, transpose)
    got = np.asarray(answers["5.3"](rows, x, transpose))
    secrets["5.3"] = [rf"\b{want[tuple(np.argwhere(got != want)[0])]}\b"]
    for exercise, check in CHECKS.items():
        if exercise not in answers:
            continue
        assert getattr(checks, check)(answers[exercise]) is False
        line = capsys.readouterr().out
        assert line.startswith(f"✗ {check}: ") and line.count("\n") == 1 and HINTS[exercise] in line, line
        hint = line.split(": ", 2)[2]  # after "✗ check: function(the case's inputs): "
        leaked = [s for s in secrets[exercise] if (re.search(s, hint) if s.startswith("\\b") else s in hint)]
        assert not leaked, (exercise, leaked, hint)


# --------------------------------------------------------------------------- the package's step 3 as the kernel answers

#: What the lesson prints of step 3 (its diff cell), in the package's gemm03_mma: its atom and its ldmatrix copies.
STEP3_LINES = ["cute.make_tiled_mma(cute.nvgpu.warp.MmaF16BF16Op(ab, cutlass.Float32, (16, 8, 16)),",
               "permutation_mnk=(16 * config.warps_m, 16 * config.warps_n, 16))",
               "cute.make_copy_atom(cute.nvgpu.warp.LdMatrix8x8x16bOp(not a_k, 4), ab), tiled_mma)",
               "cute.make_copy_atom(cute.nvgpu.warp.LdMatrix8x8x16bOp(not b_k, 4), ab), tiled_mma)"]
# 5.5 with step 3's choices: the m16n8k16 atom, its permutation and ldmatrix.x4 (A and B are K-major: not a_k is
# False). Its kernel code (partitions, mainloop) is step 3's already. On a GPU it computes the right GEMM.
STEP3_AS_5_5 = edited(solution("5.5"), ("(16, 8, 8)),", "(16, 8, 16)),"), ("16 * WARPS_N, 8))", "16 * WARPS_N, 16))"),
                      ("LdMatrix8x8x16bOp(False, 2)", "LdMatrix8x8x16bOp(False, 4)"))
# 5.6 as step 3 has it: one matrix per GEMM (no L mode, no batch from blockIdx.z), ldmatrix.x4 for the K-major A
# and .x4.trans for the N-major B (not b_k is True).
STEP3_AS_5_6 = edited(solution("5.6"),
                      ("    mA, mB, mC = mA[None, None, bidz], mB[None, None, bidz], mC[None, None, bidz]\n",
                       "    pass\n"),
                      ("    mA = cute.make_tensor(mA.iterator, cute.select(mA.layout, mode=[1, 2, 0]))\n"
                       "    mB = cute.make_tensor(mB.iterator, cute.select(mB.layout, mode=[2, 1, 0]))\n"
                       "    mC = cute.make_tensor(mC.iterator, cute.select(mC.layout, mode=[1, 2, 0]))\n", ""))


def test_the_step_3_answers_are_what_the_package_and_the_lesson_show():
    from cutecourse.kernels.gemm import gemm03_mma

    package, lesson = tokens(inspect.getsource(gemm03_mma)), [tokens(t) for t in notebook_texts(LESSON)]
    for line in STEP3_LINES:
        assert occurs(tokens(line), package), line
    for line in (STEP3_LINES[0], STEP3_LINES[2]):
        assert any(occurs(tokens(line), t) for t in lesson), f"the lesson no longer prints {line!r}"
    assert "bidz]" not in STEP3_AS_5_6 and "cute.select" not in STEP3_AS_5_6, "the batch is still in"
    assert "LdMatrix8x8x16bOp(True, 4)" in STEP3_AS_5_6


# --------------------------------------------------------------------------- a partly right submission

# 5.4 answered only for the check's visible cases: the check passes, the hidden test does not.
HARD_CODED_5_4 = "def tiled_mma_for(warps_m, warps_n, k):\n    return {\n" + "".join(
    f"        {case!r}: {L.reference_tiled(*case)!r},\n" for case in ((2, 2, 16), (1, 4, 8), (4, 1, 16), (2, 1, 8))
) + "    }.get((warps_m, warps_n, k), ('', '', ''))\n"


def test_the_hard_coded_answer_really_passes_only_the_visible_cases(tmp_path):
    fn = answer_from_file(tmp_path, HARD_CODED_5_4, "tiled_mma_for")
    assert checks.tiled_mma_for.run(fn).startswith(checks.PASS)
    assert L.tiled_hint((4, 4, 16), fn(4, 4, 16)) is not None


@pytest.fixture(scope="module")
def partial_report(tmp_path_factory) -> grader.Report:
    """5.1 and 5.3 right (check + hidden), 5.2 wrong, 5.4 hard-coded (check only), and as the kernels 5.5 and 5.6
    the package's own step 3 (below)."""
    return submit(tmp_path_factory.mktemp("partial"), {
        "5.1": solution("5.1"), "5.2": WRONG["5.2"], "5.3": solution("5.3"), "5.4": HARD_CODED_5_4,
        "5.5": STEP3_AS_5_5, "5.6": STEP3_AS_5_6})


def test_partly_right_submission_scores_exactly_its_points(partial_report):
    got = {e: partial_report.exercises()[e][0] for e in ("5.1", "5.2", "5.3", "5.4", "5.5", "5.6")}
    assert got == {"5.1": 3.0, "5.2": 0.0, "5.3": 3.0, "5.4": 1.0, "5.5": 0.0, "5.6": 0.0}, \
        reports.summary(partial_report)


def test_the_packages_own_step_3_earns_no_kernel_points(partial_report):
    report = partial_report
    assert report.exercises()["5.5"][0] == 0 and report.exercises()["5.6"][0] == 0, reports.summary(report)
    state = statuses(report)
    for exercise in ("5.5", "5.6"):
        assert state[f"hidden test_{CPU_HIDDEN[exercise]}"] == results.FAILED, reports.summary(report)
    output = next(t.output for t in report.tests if t.name.startswith(f"hidden test_{CPU_HIDDEN['5.5']}"))
    assert "0 mma.sync.m16n8k8" in output, output


# Right answers through what 5.1-5.4 forbid: the package's own lane tables, layouts and TiledMMA.
CALLS_PACKAGE = {
    "5.1": """
from cutecourse import fragments
def mma_coords(k, lane):
    frag = fragments.mma_fragments(fragments.mma_atom(k))
    return ([tuple(p) for p in frag["A"][lane].tolist()], [(kk, n) for n, kk in frag["B"][lane].tolist()],
            [tuple(p) for p in frag["C"][lane].tolist()])
""",
    "5.2": """
from cutecourse.fragments import wgmma_atom
def wgmma_c_layout(n):
    return wgmma_atom(n).layout_c
""",
    "5.3": """
import numpy as np
import cutecourse.fragments.lanes as lanes
def ldmatrix_sim(rows, num_matrices, transpose):
    return lanes.simulate_ldmatrix(np.asarray(rows), num_matrices, transpose)
""",
    "5.4": """
from cutecourse.fragments import atoms
from cutecourse.layout import Layout
def tiled_mma_for(warps_m, warps_n, k):
    t = atoms.tiled_mma(atoms.mma_atom(k), Layout((warps_m, warps_n, 1), (warps_n, 1, 0)),
                        (16 * warps_m, 16 * warps_n, k))
    return str(t.tv_layout_A_tiled), str(t.tv_layout_B_tiled), str(t.tv_layout_C_tiled)
""",
}


@pytest.mark.parametrize("exercise", sorted(CALLS_PACKAGE))
def test_calling_the_package_would_be_right_and_calls_what_the_exercise_forbids(tmp_path, exercise):
    assert_right_but_forbidden(tmp_path, LESSON, exercise, CALLS_PACKAGE[exercise])


def test_a_submission_that_calls_the_package_scores_zero(tmp_path):
    assert_forbidden_calls_score_zero(tmp_path, LESSON, CALLS_PACKAGE)


# The same answers through the forbidden functions' own source, read past the audit hook and run afresh: each reads
# lanes.py and atoms.py from a folder's descriptor (dir_fd), which the hook's `open` event does not name.
STEAL = """
import os, tempfile, types
import cutecourse.fragments as _fragments
def _stolen(read):
    # atoms.py then lanes.py in one namespace: lanes' `from .atoms import` binds the real classes
    found = {"__name__": "cutecourse.fragments.atoms", "__package__": "cutecourse.fragments"}
    for name in ("atoms.py", "lanes.py"):
        exec(compile(read(os.path.dirname(_fragments.__file__), name), name, "exec"), found)
    return types.SimpleNamespace(**found)
"""
READS = {
    "5.1": "lambda folder, name: os.fdopen(os.open(name, os.O_RDONLY, dir_fd=os.open(folder, os.O_RDONLY))).read()",
    # listed through the descriptor, then opened by the builtin open through an opener
    "5.2": "lambda folder, name: [open(name, opener=lambda p, f: os.open(p, f, dir_fd=fd)).read() for fd in "
           "[os.open(folder, os.O_RDONLY)] if name in os.listdir(fd)][0]",
    # a `..` escape from the descriptor of a folder beside it
    "5.3": "lambda folder, name: os.fdopen(os.open(f'../fragments/{name}', os.O_RDONLY, "
           "dir_fd=os.open(os.path.join(folder, '..', 'layout'), os.O_RDONLY))).read()",
    # a symlink to the folder, in a folder opened by its descriptor
    "5.4": "lambda folder, name: [os.fdopen(os.open(f'pkg/{name}', os.O_RDONLY, dir_fd=os.open(d, os.O_RDONLY)))"
           ".read() for d in [tempfile.mkdtemp()] if os.symlink(folder, f'{d}/pkg') is None][0]",
}
STEALS = {exercise: STEAL + f"fragments = lanes = atoms = _stolen({READS[exercise]})\n"
          "wgmma_atom = fragments.wgmma_atom\n" + "".join(
              line + "\n" for line in CALLS_PACKAGE[exercise].splitlines() if "cutecourse.fragments" not in line
              and "import fragments" not in line) for exercise in CALLS_PACKAGE}


@pytest.mark.parametrize("exercise", sorted(STEALS))
def test_the_stolen_source_would_be_right(tmp_path, exercise):
    for cell in nbio.checks(nbio.load(ROOT / "exercises" / f"{LESSON}.ipynb")):
        if nbio.meta(cell).get("exercise") == exercise and "gpu" not in nbio.tags(cell):
            check = checks.REGISTRY[nbio.meta(cell)["check"]]
            line = check.run(answer_from_file(tmp_path, STEALS[exercise], check.target))
            assert line.startswith(checks.PASS), line


def test_a_submission_that_runs_the_forbidden_source_read_through_a_folder_descriptor_scores_zero(tmp_path):
    report = grade_lesson(tmp_path, LESSON, STEALS, timeout=120, exercises=set(STEALS))
    assert {e: report.exercises()[e][0] for e in STEALS} == {e: 0.0 for e in STEALS}, reports.summary(report)
    # because the audit hook refused each read (or 5.4's symlink), not for another failure: every test says so
    assert all("grading sandbox: " in t.output for t in report.tests), reports.summary(report)


# --------------------------------------------------------------------------- on a GPU: right PTX, wrong numbers

# 5.5 whose k-block loop stops one short: 3 of every 4 k-blocks of 8, still m16n8k8 fed by ldmatrix.x2.
K8_LAST_K_BLOCK_LOST = edited(solution("5.5"), ("for kb in cutlass.range_constexpr(k_blocks):",
                                                "for kb in cutlass.range_constexpr(k_blocks - 1):"))
# 5.6 that reads each CTA's batch of A and B but writes every batch's C into batch 0.
BATCHED_C_OF_BATCH_0 = edited(solution("5.6"), ("mC[None, None, bidz]\n", "mC[None, None, 0]\n"))


@pytest.mark.gpu(80)
def test_on_a_gpu_the_solutions_kernels_earn_every_point(tmp_path):
    report = grade_lesson(tmp_path, LESSON, {"5.5": solution("5.5"), "5.6": solution("5.6")}, timeout=300,
                          exercises={"5.5", "5.6"})
    assert report.exercises()["5.5"] == (6.0, 6.0) and report.exercises()["5.6"] == (6.0, 6.0), reports.summary(report)
    state = statuses(report)
    for name in [f"hidden test_{t}" for t in GPU_HIDDEN.values()] + [f"check {c}" for c in GPU_CHECKS.values()]:
        assert state[name] == results.PASSED, (name, reports.summary(report))


@pytest.mark.gpu(80)
def test_on_a_gpu_a_kernel_with_a_classic_mistake_keeps_only_its_ptx_points(tmp_path):
    report = grade_lesson(tmp_path, LESSON, {"5.5": K8_LAST_K_BLOCK_LOST, "5.6": BATCHED_C_OF_BATCH_0}, timeout=300,
                          exercises={"5.5", "5.6"})
    assert_failed(report, list(GPU_HIDDEN.values()), list(GPU_CHECKS.values()))
    assert report.exercises()["5.5"] == (2.0, 6.0) and report.exercises()["5.6"] == (2.0, 6.0), reports.summary(report)
    output = {t.name.split(" (")[0]: t.output for t in report.tests}
    assert "products are missing" in output[f"hidden test_{GPU_HIDDEN['5.5']}"]
    assert "never written" in output[f"hidden test_{GPU_HIDDEN['5.6']}"]


def test_the_kernel_variants_compile_to_what_the_ptx_checks_pass_or_fail(tmp_path):
    """On any machine: the GPU test's kernels pass the PTX checks (so only their numbers can fail them), and the
    package's step 3 fails them."""
    for source, host, check, passes in ((K8_LAST_K_BLOCK_LOST, "tc_host", checks.k8_ptx, True),
                                        (BATCHED_C_OF_BATCH_0, "batched_host", checks.bgemm_ptx, True),
                                        (STEP3_AS_5_5, "tc_host", checks.k8_ptx, False)):
        assert check(answer_from_file(tmp_path, source, host)) is passes, host  # the DSL reads the file
