"""Exercises 6.6 (wgmma's A from registers, the RS form, one batch in flight on PipelineTmaAsync) and 6.7 (a
TMA-store epilogue, slab by slab through one buffer): the answers and their wrong variants are kernel code; each PTX
check passes its solution for both dtypes and fails, with a hint naming what is missing, each classic mistake (6.6's
slot handed back the moment it is waited for included: the check traces which register indexes the released
barrier); the package's Hopper steps and lesson 6 part 2's demo kernel (its RS form and its TMA store too) compile to
PTX that both checks fail, and every kernel point of 6.6 and 6.7 (the PTX tests, and the GPU tests, which judge the
PTX first) needs a passing PTX hint. On a Hopper GPU: the solutions pass the GPU checks in a jailed learner process,
and the race the PTX cannot see (6.7's buffer overwritten before the store read it) corrupts C and fails the GPU
judge.

The wrong variants are edits of the solutions, so they follow them as they change.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from cutecourse.grading import checks, harness, sandbox
from cutecourse.grading.checks import l06_tma_store as STORE
from cutecourse.grading.checks import l06_wgmma_rs as RS

from .submissions import ROOT, answer_from_file, edited, lesson_solution

LESSON = "06_smem_pipelines"
pytestmark = pytest.mark.slow  # each PTX compile of a kernel takes about a second


def without_line(source: str, start: str) -> str:
    pattern = re.compile(rf"^[ \t]*{re.escape(start)}.*\n", re.MULTILINE)
    assert len(pattern.findall(source)) == 1, f"the solution no longer has one line starting {start!r}"
    return pattern.sub("", source)


RS_SOLUTION = lesson_solution(LESSON, "6.6")
STORE_SOLUTION = lesson_solution(LESSON, "6.7")

#: 6.6's release of the retired batch's slot, as the solution writes it.
RS_RELEASE = "            if kt > 0:\n                pipe.consumer_release(release)"
#: 6.6, each a whole answer cell with one classic mistake.
RS_WRONG = {
    # no fence after the loads: the register writes may not be seen by the wgmmas that read them
    "no_fence": without_line(RS_SOLUTION, "warpgroup.fence()"),
    # no wait before the loads: the registers are rewritten under the batch still reading them
    "no_wait": edited(RS_SOLUTION, ("            warpgroup.wait_group(0)\n", "")),
    # the package's steps' wait_group(1): it leaves the last batch running, and that batch reads the registers
    "wait_one": edited(RS_SOLUTION, ("            warpgroup.wait_group(0)\n", "            warpgroup.wait_group(1)\n")),
    # the slot just waited for handed back at once: TMA may refill it before its A is loaded and its B read
    "release_own_slot": edited(RS_SOLUTION, ("pipe.consumer_release(release)", "pipe.consumer_release(read)")),
    # the retired slot handed back only after this k-tile's batch is issued: right, but the producer waits longer
    "release_late": edited(RS_SOLUTION, (RS_RELEASE, "            if False:\n                pass"),
                           ("            read.advance()\n",
                            f"{RS_RELEASE}\n                release.advance()\n            read.advance()\n")),
    # no wait before the epilogue: the last batch may still write the accumulators
    "no_final_wait": without_line(RS_SOLUTION, "warpgroup.wait_group(0)  # the last batch"),
}
RS_HINTS = {"no_fence": "no wgmma.fence between the loads", "no_wait": "with no warpgroup.wait_group before it",
            "wait_one": "with a warpgroup.wait_group(1) before it", "release_own_slot": "the same index",
            "release_late": "before this k-tile's loads", "no_final_wait": "no warpgroup.wait_group(0)"}

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
#: The races a GPU shows: the variants whose C comes out wrong on the H200. 6.6's mistakes are caught by its PTX check
#: (a slot handed back early is not: on the H200, 2026-12-03, TMA's refill came later than the wgmmas' reads).
GPU_RACES = {"6.7": ("store_host", STORE, STORE_WRONG["no_read_wait"])}


def load(tmp_path: Path, source: str, host: str):
    return answer_from_file(tmp_path, source, host)


def test_the_answers_and_every_wrong_variant_are_kernel_code():
    for name, source in {"6.6": RS_SOLUTION, "6.7": STORE_SOLUTION, **RS_WRONG, **STORE_WRONG}.items():
        assert harness.restricted(source) is None, (name, harness.restricted(source))
    assert RS_SOLUTION.count("### BEGIN SOLUTION") == STORE_SOLUTION.count("### BEGIN SOLUTION") == 1


def _ptx(tmp_path: Path, source: str, host: str, dtype: str = "float16") -> str:
    import torch

    dt = getattr(torch, dtype)
    fn = load(tmp_path, source, host)
    return harness.ptx(fn, "sm_90a", torch.zeros(64, 96, dtype=dt), torch.zeros(96, 64, dtype=dt),
                       torch.zeros(64, 64), vector=RS.VECTOR)


def test_the_ptx_checks_pass_the_solutions_for_both_dtypes(capsys, tmp_path):
    assert checks.rs_ptx(load(tmp_path, RS_SOLUTION, "rs_host")) is True
    assert checks.tma_store_ptx(load(tmp_path, STORE_SOLUTION, "store_host")) is True
    out = capsys.readouterr().out.split("\n")
    assert out[0] == f"✓ rs_ptx: all {len(RS.PTX_CASES)} cases pass", out
    assert out[1] == f"✓ tma_store_ptx: all {len(STORE.PTX_CASES)} cases pass", out


@pytest.mark.parametrize("name", sorted(RS_HINTS))
def test_the_rs_ptx_check_fails_each_mistake_with_its_hint(capsys, tmp_path, name):
    assert checks.rs_ptx(load(tmp_path, RS_WRONG[name], "rs_host")) is False
    line = capsys.readouterr().out.strip().splitlines()[-1]
    assert line.startswith("✗ rs_ptx: ") and RS_HINTS[name] in line, line


@pytest.mark.parametrize("name", sorted(STORE_HINTS))
def test_the_store_ptx_check_fails_each_mistake_with_its_hint(capsys, tmp_path, name):
    assert checks.tma_store_ptx(load(tmp_path, STORE_WRONG[name], "store_host")) is False
    line = capsys.readouterr().out.strip().splitlines()[-1]
    assert line.startswith("✗ tma_store_ptx: ") and STORE_HINTS[name] in line, line


def test_the_slot_register_is_traced_to_the_index_the_loop_waits_on(tmp_path):
    """The solution releases a slot indexed by another register than the one its wait reads (the release state);
    the own-slot mistake by the same one."""
    for source, same in ((RS_SOLUTION, False), (RS_WRONG["release_own_slot"], True)):
        lines = _ptx(tmp_path, source, "rs_host").splitlines()
        first_mma = next(i for i, line in enumerate(lines) if "wgmma.mma_async" in line)
        wait = max(i for i in range(first_mma) if "mbarrier.try_wait" in lines[i])
        release = next(i for i in range(wait, first_mma) if "mbarrier.arrive.shared" in lines[i])
        waited, released = RS.slot_register(lines, wait), RS.slot_register(lines, release)
        assert waited is not None and released is not None
        assert (waited == released) is same, (waited, released)


def test_the_hints_do_not_give_the_loop_away(tmp_path):
    """No hint names the slot to release, the kt it starts at, or the wait's argument."""
    for hint in RS_HINTS.values():
        assert "kt - " not in hint and "kt >" not in hint and "wait_group(0) before the" not in hint
    solution = _ptx(tmp_path, RS_SOLUTION, "rs_host")
    for edit in (lambda p: p.replace("wgmma.fence", "nop.f"), lambda p: p.replace("wgmma.commit_group", "nop.c")):
        hint = RS.ptx_hint(edit(solution))
        assert hint and "kt" not in hint and "release.advance" not in hint, hint


@pytest.mark.parametrize("edit, hint", [
    (lambda p: p.replace("wgmma.mma_async", "nop.wgmma"), "no wgmma.mma_async"),
    (lambda p: p.replace("wgmma.mma_async", "mma.sync", 1), "the PTX has mma.sync"),
    (lambda p: re.sub(r"\.reqntid 160", ".reqntid 128", p), "has CTAs of 128 threads"),
    (lambda p: p.replace("wgmma.commit_group", "nop.commit"), "no wgmma.commit_group"),
    (lambda p: re.sub(r"mbarrier\.arrive\.shared", "nop.arrive", p), "nowhere before this k-tile's wgmmas"),
    (lambda p: p.replace("mbarrier.try_wait", "nop.wait"), "no mbarrier wait before the first wgmma"),
    (lambda p: p.replace("ld.shared", "nop.ld"), "no load from shared memory between"),
    (lambda p: 42, "expected the PTX text"),
])
def test_each_missing_piece_of_the_rs_ptx_has_its_own_hint(tmp_path, edit, hint):
    code = _ptx(tmp_path, RS_SOLUTION, "rs_host")
    got = RS.ptx_hint(edit(code))
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
    earns no kernel points: none reads A from registers, none stores C in two slabs through one buffer with a
    128-thread CTA."""
    for name, code in step_ptxs.items():
        assert "read A from shared memory" in RS.ptx_hint(code), name
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
    """The demo in its RS form is the nearest code the lesson prints to 6.6's answer: one slot, one warpgroup."""
    plain = demo_ptx(tmp_path)
    stored = demo_ptx(tmp_path, tma_store=True)
    rs = demo_ptx(tmp_path, a_regs=True)
    assert "read A from shared memory" in RS.ptx_hint(plain)
    assert "has CTAs of 128 threads" in RS.ptx_hint(rs)
    assert "writes C with st.global" in STORE.ptx_hint(plain)
    assert "commits 1 bulk group" in STORE.ptx_hint(stored)


def test_the_checks_constants_are_the_answer_cells():
    from .test_lesson_06 import cell_constants

    rs, store = cell_constants(RS_SOLUTION), cell_constants(STORE_SOLUTION)
    assert (RS.RS_THREADS, RS.RS_STAGES, RS.RS_TILE_K) == (rs["RS_THREADS"], rs["RS_STAGES"], rs["RS_TILE_K"])
    assert (STORE.STORE_THREADS, STORE.SLABS, STORE.SLAB_M, STORE.STORE_TILE_K) == (
        store["STORE_THREADS"], store["SLABS"], store["SLAB_M"], store["STORE_TILE_K"])
    assert any(-(-k // RS.RS_TILE_K) >= 100 for _, _, k in RS.SHAPES)  # a long K: the ring wraps many times


def test_the_gpu_judges_pass_the_product_and_fail_unwritten_or_raced_outputs():
    import numpy as np

    from cutecourse.grading.checks import input_of

    for module in (RS, STORE):
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
    with learner("6.6", RS_SOLUTION) as process:
        assert checks.grade(checks.rs_gemm, process).startswith(checks.PASS)
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
