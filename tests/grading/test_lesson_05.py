"""Lesson 5 (MMA atoms, TiledMMA, Tensor Core mainloops): a partly right submission scores exactly its points; every
check and hidden test fails a wrong answer, with a hint that points at the mistake without printing the answer; an
answer that calls what its exercise forbids scores 0 there; the package's own step 3 (what the lesson prints of it)
submitted as the kernel answers earns no kernel points; 5.2's reference is what the DSL builds. (The kernels' classic
mistakes, and the kernels on a GPU: test_l05_mainloop.py.)

Three grades on any machine: the wrong answers; the partly right one, whose kernels are the package's; the forbidden
calls."""

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
    # mma.sync's A strides kept as they are on its 16-row tile: on the warpgroups' M rows a column is M, not 16
    "5.2": """
from cutecourse.layout import Layout
def wgmma_a_layout(element_bits, warpgroups):
    per_register = 32 // element_bits
    return Layout(((4, 8, 4 * warpgroups), (per_register, 2, 2)),
                  ((16 * per_register, 1, 16), (16, 8, 64 * per_register)))
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
    # every k-block's MMA reads A's first k-block: the loads of the others are there, their registers unread
    "5.5": edited(solution("5.5"), ("acc, tCrA[None, None, kb],", "acc, tCrA[None, None, 0],")),
    # every CTA computes batch 0: blockIdx.z never read
    "5.6": edited(solution("5.6"), ("mA[None, None, bidz], mB[None, None, bidz], mC[None, None, bidz]",
                                    "mA[None, None, 0], mB[None, None, 0], mC[None, None, 0]")),
}
#: What each wrong answer's check says (the hidden tests use the same hints).
HINTS = {"5.1": "check which values add 8 and in which order", "5.2": "misplaced",
         "5.3": "with .trans, which row and column does a lane receive", "5.4": "row-major",
         "5.5": "multiplies A's k-block [0] by B's k-block", "5.6": "never reads blockIdx.z"}
CPU_HIDDEN = {"5.1": "mma_coords_for_every_lane_of_both_shapes",
              "5.2": "wgmma_a_layout_for_both_widths_and_every_warpgroup_count",
              "5.3": "ldmatrix_sim_on_random_rows", "5.4": "tiled_mma_for_random_warp_grids",
              "5.5": "k8_mainloop_ptx_for_both_dtypes_and_archs", "5.6": "batched_gemm_ptx_for_both_dtypes_and_archs"}
CHECKS = {"5.1": "mma_coords", "5.2": "wgmma_a", "5.3": "ldmatrix_sim", "5.4": "tiled_mma_for", "5.5": "k8_ptx",
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
               (("5.1", "mma_coords"), ("5.2", "wgmma_a_layout"), ("5.3", "ldmatrix_sim"), ("5.4", "tiled_mma_for"))}
    secrets = {
        "5.1": [str(p) for lane in (0, 5, 31) for p in L.reference_coords(16, lane)[0][2:4]],
        "5.2": [str(L.reference_wgmma_a(*case)) for case in ((16, 1), (8, 1), (16, 2))],
        "5.3": [],  # filled below: the right value at the first wrong place
        "5.4": [s for case in L.TILED_CASES for s in L.reference_tiled(*case)],
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


# DSL code run in a fresh process: the DSL fixes its arch at its first use, and wgmma needs sm_90a.
RS_TILED_MMA = """
import cutlass
import cutlass.cute as cute
from cutlass.cute.nvgpu import OperandMajorMode, warpgroup

@cute.jit
def a_layout(bits: cutlass.Constexpr, warpgroups: cutlass.Constexpr, out: cutlass.Constexpr):
    k_major = OperandMajorMode.K
    if cutlass.const_expr(bits == 16):
        op = warpgroup.MmaF16BF16Op(cutlass.Float16, cutlass.Float32, (64, 32, 16), warpgroup.OperandSource.RMEM,
                                    k_major, k_major)
    else:
        op = warpgroup.MmaF8Op(cutlass.Float8E4M3FN, cutlass.Float8E4M3FN, cutlass.Float32, (64, 32, 32),
                               warpgroup.OperandSource.RMEM, k_major, k_major)
    out.append(str(cute.make_tiled_mma(op, cute.make_layout((warpgroups, 1, 1))).tv_layout_A_tiled))

for bits in (16, 8):
    for warpgroups in (1, 2, 3, 4):
        out = []
        a_layout(bits, warpgroups, out)
        print(bits, warpgroups, out[0])
"""


def test_the_wgmma_a_reference_is_what_the_dsl_builds(tmp_path):
    """5.2's reference (mma.sync's A fragments on 4 x warpgroups warps) prints as the DSL's RS wgmma TiledMMA does."""
    import os
    import subprocess
    import sys

    script = tmp_path / "rs_tiled_mma.py"  # the DSL reads a jit function's source from its file
    script.write_text(RS_TILED_MMA)
    run = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300,
                         env={**os.environ, "CUTE_DSL_ARCH": "sm_90a"})
    assert run.returncode == 0, run.stderr[-2000:]
    printed = {tuple(int(x) for x in line.split()[:2]): line.split()[2] for line in run.stdout.splitlines()}
    assert set(printed) == {(b, w) for b in L.WGMMA_A_BITS for w in L.WGMMA_A_GROUPS}
    for (bits, warpgroups), layout in printed.items():
        assert str(L.reference_wgmma_a(bits, warpgroups)) == layout


# --------------------------------------------------------------------------- the package's step 3 as the kernel answers

#: What the lesson prints of step 3 (its diff cell), in the package's gemm03_mma: its atom and its ldmatrix copies.
STEP3_LINES = ["cute.make_tiled_mma(cute.nvgpu.warp.MmaF16BF16Op(ab, cutlass.Float32, (16, 8, 16)),",
               "permutation_mnk=(16 * config.warps_m, 16 * config.warps_n, 16))",
               "cute.make_copy_atom(cute.nvgpu.warp.LdMatrix8x8x16bOp(not a_k, 4), ab), tiled_mma)",
               "cute.make_copy_atom(cute.nvgpu.warp.LdMatrix8x8x16bOp(not b_k, 4), ab), tiled_mma)"]
# 5.5 with step 3's choices: the m16n8k16 atom, its permutation and ldmatrix.x4, .trans for the M-major A (not a_k
# is True) and not for the K-major B. Its kernel code (partitions, mainloop) is step 3's idiom already.
STEP3_AS_5_5 = edited(solution("5.5"), ("(16, 8, 8))", "(16, 8, 16))"), ("16 * WARP_COLS, 8))", "16 * WARP_COLS, 16))"),
                      ("LdMatrix8x8x16bOp(True, 2)", "LdMatrix8x8x16bOp(True, 4)"),
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
    f"        {case!r}: {L.reference_tiled(*case)!r},\n" for case in L.TILED_CASES
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
    # the reference's own construction: mma.sync's A fragments (m16n8k32's for 8-bit) on 4 x warpgroups warps
    "5.2": """
from cutecourse.fragments import atoms
from cutecourse.layout import Layout
K32 = atoms.MmaAtom("k32", "mma.sync.aligned.m16n8k32", (16, 8, 32), 32,
                    Layout(((4, 8), (4, 2, 2)), ((64, 1), (16, 8, 256))), Layout(((4, 8), (4, 2)), ((32, 1), (8, 128))),
                    Layout(((4, 8), (2, 2)), ((32, 1), (16, 8))))
def wgmma_a_layout(element_bits, warpgroups):
    atom = atoms.mma_atom(16) if element_bits == 16 else K32
    return atoms.tiled_mma(atom, (4 * warpgroups, 1, 1)).tv_layout_A_tiled
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
