"""Exercises 6.6 (two k-tiles of wgmma in flight on PipelineTmaAsync) and 6.7 (a TMA-store epilogue, slab by slab
through one buffer): the answers and their wrong variants are kernel code; each PTX check passes its solution for both
dtypes and fails, with a hint naming what is missing, each classic mistake the PTX shows; the package's Hopper steps
and lesson 6 part 2's demo kernel (with its TMA store) compile to PTX that both checks fail, and every kernel point of
6.6 and 6.7 (the PTX tests, and the GPU tests, which judge the PTX first) needs a passing PTX hint. On a Hopper GPU:
the solutions pass the GPU checks in a jailed learner process, and the races the PTX cannot see (6.6's slot released
the moment its batch is issued; 6.7's buffer overwritten before the store read it, or stored without the proxy
fence) corrupt C and fail the GPU judge.

The wrong variants are edits of the solutions, so they follow them as they change.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from cutecourse.grading import checks, harness, sandbox
from cutecourse.grading.checks import l06_tma_store as STORE
from cutecourse.grading.checks import l06_wgmma_flight as FLIGHT

from .submissions import ROOT, answer_from_file, edited, lesson_solution

LESSON = "06_smem_pipelines"
pytestmark = pytest.mark.slow  # each PTX compile of a kernel takes about a second


def without_line(source: str, start: str) -> str:
    pattern = re.compile(rf"^[ \t]*{re.escape(start)}.*\n", re.MULTILINE)
    assert len(pattern.findall(source)) == 1, f"the solution no longer has one line starting {start!r}"
    return pattern.sub("", source)


FLIGHT_SOLUTION = lesson_solution(LESSON, "6.6")
STORE_SOLUTION = lesson_solution(LESSON, "6.7")

#: 6.6, each a whole answer cell with one classic mistake.
FLIGHT_WRONG = {
    # no fence before the batch: the zero-filled accumulators are register writes wgmma may not see
    "no_fence": without_line(FLIGHT_SOLUTION, "warpgroup.fence()"),
    # no wait in the loop: the slot of kt - 2 is released while its batch may still read it
    "no_wait": without_line(FLIGHT_SOLUTION, "warpgroup.wait_group(IN_FLIGHT)"),
    # one batch in flight, the package's steps' and 6.5's wait
    "one_in_flight": edited(FLIGHT_SOLUTION, ("warpgroup.wait_group(IN_FLIGHT)", "warpgroup.wait_group(1)")),
    # no wait before the epilogue: the last batches may still write the accumulators
    "no_final_wait": without_line(FLIGHT_SOLUTION, "warpgroup.wait_group(0)"),
    # the race the PTX cannot see: each slot released right after its batch is issued (the wait is there, but
    # retires k-tile kt - 2's batch, not kt's), so TMA refills it under a wgmma still queued to read it
    "release_own_slot": edited(FLIGHT_SOLUTION, ("if kt >= IN_FLIGHT:", "if kt >= 0:")),
}
FLIGHT_HINTS = {"no_fence": "no wgmma.fence", "no_wait": "with no wgmma.wait_group after",
                "one_in_flight": "keeps 1 batch in flight", "no_final_wait": "no warpgroup.wait_group(0)"}

#: The wait before slab j > 0 overwrites the buffer (the barrier after it stays).
BUFFER_WAIT = "            if warp_idx == 0:\n                cute.arch.cp_async_bulk_wait_group(0, read=True)\n"
#: 6.7, each a whole answer cell with one classic mistake.
STORE_WRONG = {
    # no proxy fence: TMA may read sC before the threads' st.shared reach the async proxy
    "no_proxy_fence": without_line(STORE_SOLUTION, 'cute.arch.fence_proxy("async.shared", space="cta")'),
    # slab 1 overwrites the buffer while slab 0's store may still read it
    "no_read_wait": edited(STORE_SOLUTION, (BUFFER_WAIT, "")),
    # the ladder's two-buffer wait with one buffer: one store may still read it
    "wait_one": edited(STORE_SOLUTION, ("                cute.arch.cp_async_bulk_wait_group(0, read=True)\n",
                                        "                cute.arch.cp_async_bulk_wait_group(1, read=True)\n")),
    # the CTA exits while its last store may still read shared memory
    "no_last_wait": edited(STORE_SOLUTION, ("cute.arch.cp_async_bulk_wait_group(0, read=True)  # the CTA's",
                                            "pass  # the CTA's")),
}
STORE_HINTS = {"no_proxy_fence": "no fence.proxy.async", "no_read_wait": "overwrites sC while slab 0",
               "wait_one": "overwrites sC while slab 0", "no_last_wait": "no cp.async.bulk.wait_group.read after"}
#: The races a GPU shows: the variants whose C comes out wrong on the H200. 6.6's release_own_slot is not one of them:
#: on the H200 (2026-12-03) handing each slot back the moment its batch is issued left C right on every case of the
#: GPU check (TMA's refill comes later than the queued wgmma's reads), and its PTX passes the flight check, so
#: nothing here fails it yet (an open gap, named in RESULTS.md).
GPU_RACES = {"6.7": ("store_host", STORE, STORE_WRONG["no_read_wait"])}


def load(tmp_path: Path, source: str, host: str):
    return answer_from_file(tmp_path, source, host)


def test_the_answers_and_every_wrong_variant_are_kernel_code():
    for name, source in {"6.6": FLIGHT_SOLUTION, "6.7": STORE_SOLUTION, **FLIGHT_WRONG, **STORE_WRONG}.items():
        assert harness.restricted(source) is None, (name, harness.restricted(source))
    assert FLIGHT_SOLUTION.count("### BEGIN SOLUTION") == STORE_SOLUTION.count("### BEGIN SOLUTION") == 1


def _ptx(tmp_path: Path, source: str, host: str, dtype: str = "float16") -> str:
    import torch

    dt = getattr(torch, dtype)
    fn = load(tmp_path, source, host)
    return harness.ptx(fn, "sm_90a", torch.zeros(64, 96, dtype=dt), torch.zeros(96, 64, dtype=dt),
                       torch.zeros(64, 64), vector=FLIGHT.VECTOR)


def test_the_ptx_checks_pass_the_solutions_for_both_dtypes(capsys, tmp_path):
    assert checks.flight_ptx(load(tmp_path, FLIGHT_SOLUTION, "flight_host")) is True
    assert checks.tma_store_ptx(load(tmp_path, STORE_SOLUTION, "store_host")) is True
    out = capsys.readouterr().out.split("\n")
    assert out[0] == f"✓ flight_ptx: all {len(FLIGHT.PTX_CASES)} cases pass", out
    assert out[1] == f"✓ tma_store_ptx: all {len(STORE.PTX_CASES)} cases pass", out


@pytest.mark.parametrize("name", sorted(FLIGHT_HINTS))
def test_the_flight_ptx_check_fails_each_mistake_with_its_hint(capsys, tmp_path, name):
    assert checks.flight_ptx(load(tmp_path, FLIGHT_WRONG[name], "flight_host")) is False
    line = capsys.readouterr().out.strip().splitlines()[-1]
    assert line.startswith("✗ flight_ptx: ") and FLIGHT_HINTS[name] in line, line


@pytest.mark.parametrize("name", sorted(STORE_HINTS))
def test_the_store_ptx_check_fails_each_mistake_with_its_hint(capsys, tmp_path, name):
    assert checks.tma_store_ptx(load(tmp_path, STORE_WRONG[name], "store_host")) is False
    line = capsys.readouterr().out.strip().splitlines()[-1]
    assert line.startswith("✗ tma_store_ptx: ") and STORE_HINTS[name] in line, line


def test_the_race_the_ptx_cannot_see_compiles_to_what_the_flight_check_passes(tmp_path):
    """Which slot is released is a register: only a GPU shows a slot handed back under a running wgmma."""
    assert FLIGHT.ptx_hint(_ptx(tmp_path, FLIGHT_WRONG["release_own_slot"], "flight_host")) is None


def test_the_hints_do_not_give_the_loop_away(tmp_path):
    """No hint names the slot to release, the kt it starts at, or the wait's argument for 6.7's buffer wait other
    than as the PTX shows it."""
    for hint in FLIGHT_HINTS.values():
        assert "kt - " not in hint and "kt >=" not in hint
    solution = _ptx(tmp_path, FLIGHT_SOLUTION, "flight_host")
    for edit in (lambda p: p.replace("wgmma.fence", "nop.f"), lambda p: p.replace("wgmma.commit_group", "nop.c")):
        hint = FLIGHT.ptx_hint(edit(solution))
        assert hint and "kt" not in hint and "release.advance" not in hint, hint


@pytest.mark.parametrize("edit, hint", [
    (lambda p: p.replace("wgmma.mma_async", "nop.wgmma"), "no wgmma.mma_async"),
    (lambda p: re.sub(r"\.reqntid 160", ".reqntid 128", p), "has CTAs of 128 threads"),
    (lambda p: p.replace("wgmma.commit_group", "nop.commit"), "no wgmma.commit_group"),
    (lambda p: re.sub(r"mbarrier\.arrive\.shared", "nop.arrive", p), "never release a slot"),
    (lambda p: p.replace("mbarrier.try_wait", "nop.wait"), "fewer than two mbarrier waits"),
    (lambda p: 42, "expected the PTX text"),
])
def test_each_missing_piece_of_the_flight_ptx_has_its_own_hint(tmp_path, edit, hint):
    code = _ptx(tmp_path, FLIGHT_SOLUTION, "flight_host")
    got = FLIGHT.ptx_hint(edit(code))
    assert got is not None and hint in got, got


@pytest.mark.parametrize("edit, hint", [
    (lambda p: p.replace("wgmma.mma_async", "nop.wgmma"), "no wgmma.mma_async"),
    (lambda p: re.sub(r"\.reqntid 128", ".reqntid 160", p), "has CTAs of 160 threads"),
    (lambda p: p.replace("st.shared.b32", "st.global.b32", 1), "writes C with st.global"),
    (lambda p: re.sub(r"cp\.async\.bulk\.tensor(\S*)\.global\.shared", r"nop\1", p), "no TMA store"),
    (lambda p: p.replace("cp.async.bulk.commit_group", "nop.commit", 1), "commits 1 bulk group"),
    (lambda p: p.replace("fence.proxy.async", "nop.fence"), "no fence.proxy.async"),
    (lambda p: 42, "expected the PTX text"),
])
def test_each_missing_piece_of_the_store_ptx_has_its_own_hint(tmp_path, edit, hint):
    code = _ptx(tmp_path, STORE_SOLUTION, "store_host")
    got = STORE.ptx_hint(edit(code))
    assert got is not None and hint in got, got


# --------------------------------------------------------------------------- the package's and the lesson's kernels


def hopper_steps() -> list[str]:
    """The ladder's steps that multiply with wgmma (by their source, so that a renumbering follows)."""
    from cutecourse.kernels.gemm import GEMM_STEPS, steps

    return [name for n, name in enumerate(GEMM_STEPS, 1) if "warpgroup" in steps.source(n)]


@pytest.fixture(scope="module")
def step_ptxs() -> dict[str, str]:
    import importlib

    import torch
    from cutlass.cute.runtime import make_fake_stream

    from cutecourse.kernels import ptx
    from cutecourse.kernels.gemm import launcher, operands

    a, b, c = (torch.empty(256, 256, dtype=torch.float16) for _ in range(3))
    c = torch.empty(256, 256)
    found = {}
    for name in hopper_steps():
        module = importlib.import_module(f"cutecourse.kernels.gemm.{name}")
        ops = operands.traits(a, b, c, step=name, vector=module.gemm.vector)
        found[name] = ptx.ptx_of(lambda o, m=module, s=ops: launcher.compile_for(
            m.host, m.Config(), s, a, b, c, make_fake_stream(), options=o), "sm_90a")
    return found


def test_the_hopper_steps_are_the_ladders_wgmma_steps():
    assert len(hopper_steps()) == 5 and all("wgmma" not in n or n in hopper_steps() for n in hopper_steps())


def test_the_packages_hopper_steps_fail_both_ptx_checks(step_ptxs):
    """Each step computes the right GEMM; submitted as 6.6 or 6.7 (the hidden GPU tests judge the PTX first) it
    earns no kernel points: none keeps two batches in flight with a 160-thread CTA, none stores C in two slabs
    through one buffer with a 128-thread CTA."""
    for name, code in step_ptxs.items():
        assert FLIGHT.ptx_hint(code) is not None, name
        assert STORE.ptx_hint(code) is not None, name


def demo_ptx(folder: Path, **variant) -> str:
    """Lesson 6 part 2's demo kernel, compiled by the notebook's own cells (its kernel and its PTX helper), written to
    a module in `folder` (the DSL reads a jit function's source from its file)."""
    import importlib.util

    from cutecourse.env import use_compile_only_arch

    cells = json.loads((ROOT / "notebooks" / "06_smem_pipelines_hopper.ipynb").read_text())["cells"]
    sources = ["".join(c["source"]) for c in cells if c["cell_type"] == "code"]
    wanted = [s for s in sources if s.startswith(("import re", "TILE = ", "def switches"))]
    assert len(wanted) == 3, "the demo's cells moved"
    path = folder / "demo_cells.py"
    path.write_text("\n\n".join([*wanted[:2], wanted[2].split("\nbase = ")[0]]) + "\n")
    use_compile_only_arch()
    spec = importlib.util.spec_from_file_location("demo_cells", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.demo_ptx(**variant)


def test_the_lessons_demo_kernel_fails_both_ptx_checks(tmp_path):
    plain, stored = demo_ptx(tmp_path), demo_ptx(tmp_path, tma_store=True)
    for code in (plain, stored):
        assert "has CTAs of 128 threads" in FLIGHT.ptx_hint(code)
    assert "writes C with st.global" in STORE.ptx_hint(plain)
    assert "commits 1 bulk group" in STORE.ptx_hint(stored)


def test_the_checks_constants_are_the_answer_cells():
    from .test_lesson_06 import cell_constants

    flight, store = cell_constants(FLIGHT_SOLUTION), cell_constants(STORE_SOLUTION)
    assert (FLIGHT.FLIGHT_THREADS, FLIGHT.FLIGHT_STAGES, FLIGHT.FLIGHT_TILE_K, FLIGHT.IN_FLIGHT) == (
        flight["FLIGHT_THREADS"], flight["FLIGHT_STAGES"], flight["FLIGHT_TILE_K"], flight["IN_FLIGHT"])
    assert (STORE.STORE_THREADS, STORE.SLABS, STORE.SLAB_M, STORE.STORE_TILE_K) == (
        store["STORE_THREADS"], store["SLABS"], store["SLAB_M"], store["STORE_TILE_K"])
    assert any(-(-k // FLIGHT.FLIGHT_TILE_K) >= 100 for _, _, k in FLIGHT.SHAPES)  # a long K for the race


def test_the_gpu_judges_pass_the_product_and_fail_unwritten_or_raced_outputs():
    import numpy as np

    from cutecourse.grading.checks import input_of

    for module in (FLIGHT, STORE):
        for case in module.cases(660, [(7, 8, 8), (130, 136, 520)], "bfloat16"):
            want = input_of(case) @ input_of(case[1:])
            assert module.gemm_result_hint(case, want.astype(np.float32)) is None
            unwritten = want.copy()
            unwritten[-1, -8:] = np.nan
            assert "never written" in module.gemm_result_hint(case, unwritten)
            raced = want.copy()
            raced[:, :8] = 0
            assert module.SUSPECTS.strip("; ") in module.gemm_result_hint(case, raced)


# --------------------------------------------------------------------------- on a Hopper GPU


def learner(exercise: str, source: str, timeout: float = 300) -> sandbox.Learner:
    return sandbox.Learner([{"label": f"exercise {exercise}", "exercise": exercise, "source": source}],
                           timeout=timeout)


@pytest.mark.gpu(90)
def test_on_a_gpu_the_solutions_pass_the_gpu_checks_in_a_learner_process():
    with learner("6.6", FLIGHT_SOLUTION) as process:
        assert checks.grade(checks.flight_gemm, process).startswith(checks.PASS)
    with learner("6.7", STORE_SOLUTION) as process:
        assert checks.grade(checks.tma_store_gemm, process).startswith(checks.PASS)


@pytest.mark.gpu(90)
@pytest.mark.parametrize("exercise", sorted(GPU_RACES))
def test_on_a_gpu_the_race_corrupts_c(exercise):
    """6.7: slab 1 written into the buffer slab 0's store still reads: the GPU check judges it wrong."""
    host, module, source = GPU_RACES[exercise]
    with learner(exercise, source) as process:
        line = checks.grade(checks.tma_store_gemm, process)
    assert line.startswith(checks.FAIL), line
    assert module.SUSPECTS.strip("; ") in line or "never written" in line, line
