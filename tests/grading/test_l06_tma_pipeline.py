"""Exercise 6.5 (the full/empty mbarrier hand-off of a TMA + wgmma GEMM with a producer warp and two consumer warpgroups
that share every slot, each releasing it with one arrival after its own named barrier): the answer and its wrong
variants are kernel code; the PTX check passes the solution for both dtypes, and a peeled first k-tile and another
spelling of the guard, and fails, with a hint that names what is wrong without the fix, a consumer that never waits for
its slot, a release before the wait that retires its batch, a release with no named barrier, with the CTA's barrier, one
id for both warpgroups, barrier 0, a barrier of the wrong thread count, a release of the slot just waited for, a release
on the loop's first k-tile (the unguarded release, whichever slot it names), and the package's own step 7 (warpgroups
that load and multiply, no producer warp); the two deadlocking variants (the producer's parity, the empty barrier's
arrival count) compile to what the PTX check passes, so only the GPU test can catch them, by its timeout; the GPU
check's judge passes the right product and fails unwritten or wrong outputs. On a Hopper GPU: the solution passes the
GPU check in a jailed learner process, each deadlock is stopped at its call's timeout, and a fresh process still runs
the solution on the GPU afterwards.

The wrong variants are edits of the solution (and the package's step 7, assembled from its source), so they follow both
as they change.
"""

from __future__ import annotations

import inspect
import re
import textwrap
from pathlib import Path

import pytest

from cutecourse.grading import checks, harness, sandbox
from cutecourse.grading.checks import l06_tma_pipeline as L

from .submissions import answer_from_file, edited, lesson_solution

LESSON = "06_smem_pipelines"
pytestmark = pytest.mark.slow  # each PTX compile of the kernel takes about a second


def solution() -> str:
    """6.5's answer cell, markers included."""
    return lesson_solution(LESSON, "6.5")


def without_line(source: str, start: str) -> str:
    """`source` without the one line whose code starts with `start`."""
    pattern = re.compile(rf"^[ \t]*{re.escape(start)}.*\n", re.MULTILINE)
    assert len(pattern.findall(source)) == 1, f"the solution no longer has one line starting {start!r}"
    return pattern.sub("", source)


#: What step 7's kernel does for a fused epilogue, which a 6.5 answer does not take: left out of its source, with the
#: parameters only it reads (with the identity epilogue the block is not traced, so the PTX is the same).
FUSED_BLOCK = """\
        if cutlass.const_expr(not fused.identity):  # the fused epilogue, on each accumulator at its (m, n)
            tCcC_mma = thr_mma.partition_C(cC)
            for i in cutlass.range(cute.size(acc), unroll_full=True):
                if cute.elem_less(tCcC_mma[i], mC.shape):
                    acc[i] = epilogue.element(fused, acc[i], tCcC_mma[i], mSrc, mBias, mAux, alpha, beta)
"""
FUSED_PARAMS = (("mSrc: cute.Tensor, mBias: cute.Tensor,\n            mAux: cute.Tensor, alpha: cutlass.Float32, "
                 "beta: cutlass.Float32, ", ""), (", fused: cutlass.Constexpr)", ")"))
#: Step 7's host builds these for its kernel beside what 6.5's host builds: the C tile in shared memory (row-major,
#: its 16-byte chunks XORed with the row) and the tiled copy of its 128-bit stores, for 128 threads and fp32 C.
STEP7_HOST_EXTRAS = """\
    c_vector = 128 // mC.element_type.width
    lanes = TMA_TILE_N // c_vector
    sC_layout = cute.make_composed_layout(cute.make_swizzle(3, 3, int(math.log2(TMA_TILE_N)) - 3), 0,
                                          cute.make_layout((TMA_TILE_M, TMA_TILE_N), stride=(TMA_TILE_N, 1)))
    tiled_copy_c = cute.make_tiled_copy_tv(
        cute.make_copy_atom(cute.nvgpu.CopyUniversalOp(), mC.element_type, num_bits_per_copy=128),
        cute.make_layout((WARPGROUP_THREADS // lanes, lanes), stride=(lanes, 1)), cute.make_layout((1, c_vector)))
"""


def step7_answer() -> str:
    """The package's step 7 (gemm07_wgmma: warpgroups of 128 threads that load (warp 0) between their wgmma batches,
    no producer warp) as a 6.5 answer: its kernel (without the fused epilogue's block, off here), its loader and the
    helpers they call, from their source, launched by the solution's host with one warpgroup (128 threads), raster 1
    (one CTA per tile, as 6.5's grid) and step 7's C staging. It computes the right GEMM."""
    from cutecourse.kernels import predicate
    from cutecourse.kernels.gemm import device, gemm07_wgmma

    sol = solution()
    header, host = sol[:sol.index("\n@cute.kernel")], sol[sol.index("\n@cute.jit\ndef tma_host"):]
    launch = "    tma_kernel(tma_atom_a, tma_a, tma_atom_b, tma_b, mC, tiled_mma, sA_layout, sB_layout, ab).launch("
    host = edited(host, (launch, STEP7_HOST_EXTRAS + launch),
                  ("sA_layout, sB_layout, ab).launch(",
                   "sA_layout, sB_layout, sC_layout, tiled_copy_c, ab, tiler, 1).launch("),
                  ("block=(TMA_THREADS, 1, 1)", "block=(WARPGROUP_THREADS, 1, 1)"),
                  ("tma_kernel(", "_kernel("))
    helpers = [textwrap.dedent(inspect.getsource(f))
               for f in (device.cta_tiles, predicate.per_vector_if, gemm07_wgmma._load)]
    kernel = edited(textwrap.dedent(inspect.getsource(gemm07_wgmma._kernel)), (FUSED_BLOCK, ""), *FUSED_PARAMS,
                    ("device.cta_tiles(", "cta_tiles("), ("predicate.per_vector_if(", "per_vector_if("))
    imports = "import math\nfrom typing import Any, Callable\nfrom cutlass.memory import SmemAllocator"
    return "\n\n".join([header, imports, "WARPGROUP_THREADS = cute.arch.THREADS_PER_WARPGROUP", *helpers,
                        kernel]) + "\n" + host


#: The consumers' release in the solution: the guard, the warpgroup's named barrier, its leader's arrival.
RELEASE = """\
            if kt > 0:
                # The leader speaks for its warpgroup only once all four warps have passed their wait.
                cute.arch.barrier(barrier_id=RELEASE_BARRIER + wg, number_of_threads=WARPGROUP)
                if tidx % WARPGROUP == 0:
                    cute.arch.mbarrier_arrive(empty + (kt - 1) % TMA_STAGES)
"""
#: The solution's consumer loop, up to its release.
LOOP_HEAD = """\
        for kt in cutlass.range(k_tiles, unroll=1):
            use = kt // TMA_STAGES
            cute.arch.mbarrier_wait(full + kt % TMA_STAGES, use & 1)  # k-tile kt has landed
"""
#: k-tile 0's batch before the loop, which then starts at k-tile 1 and releases on every pass: right, as the guard is.
PEELED = """\
        cute.arch.mbarrier_wait(full, 0)  # k-tile 0 has landed in slot 0
        warpgroup.fence()
        for kb in cutlass.range_constexpr(k_blocks):
            cute.gemm(tiled_mma, acc, tCrA[(None, None, kb, 0)], tCrB[(None, None, kb, 0)], acc)
        warpgroup.commit_group()
        for kt in cutlass.range(1, k_tiles, unroll=1):
            use = kt // TMA_STAGES
            cute.arch.mbarrier_wait(full + kt % TMA_STAGES, use & 1)  # k-tile kt has landed
"""


def unguarded(slot: str) -> str:
    """The solution with its release on every k-tile, the first included, of `slot`."""
    body = "\n".join(line[4:] for line in RELEASE.splitlines()[2:]) + "\n"
    return edited(solution(), (RELEASE, body.replace("(kt - 1) % TMA_STAGES", slot)))


#: Right answers written another way than the solution: the PTX check passes them.
RIGHT = {
    "peeled": edited(solution(), (LOOP_HEAD, PEELED), (RELEASE, "\n".join(
        line[4:] for line in RELEASE.splitlines()[2:]) + "\n")),
    "guard_ge": edited(solution(), ("            if kt > 0:\n", "            if kt >= 1:\n")),
}
#: Each a whole answer cell with one classic mistake.
WRONG = {
    # (a) the producer waits for the phase the consumers complete, not the one before: a fresh barrier's current
    # phase never completes on its own, so the first wait on every slot blocks forever.
    "parity": edited(solution(), ("cute.arch.mbarrier_wait(empty + s, ((kt // TMA_STAGES) & 1) ^ 1)",
                                  "cute.arch.mbarrier_wait(empty + s, (kt // TMA_STAGES) & 1)")),
    # (b) empty counts an arrival per consumer warp (8, as step 7 does) where one leader per warpgroup arrives (2):
    # the first refill waits forever, once the ring wraps (more than TMA_STAGES k-tiles).
    "count": edited(solution(), ("EMPTY_ARRIVALS = CONSUMERS", "EMPTY_ARRIVALS = 4 * CONSUMERS")),
    # (c) the consumers never wait for full: wgmma reads slots TMA has not written yet.
    "no_full_wait": without_line(solution(), "cute.arch.mbarrier_wait(full + kt % TMA_STAGES,"),
    # (d) the package's step 7: right numbers, but no producer warp.
    "step7": step7_answer(),
    # (e) the slot released right after the batch's commit: TMA may refill it while its wgmmas still read it (a race
    # an H200 would likely let pass, TMA being slower than a batch; the PTX shows it).
    "release_before_wait": without_line(solution(), "warpgroup.wait_group(1)"),
    # (e2) the slot of this k-tile released: its batch may still read it.
    "own_slot": edited(solution(), ("empty + (kt - 1) % TMA_STAGES", "empty + kt % TMA_STAGES")),
    # (e3) no guard: on k-tile 0 the leader releases a slot no batch has read (here the last one, the wrapped
    # index; with a plain (kt - 1) % TMA_STAGES, index -1: the barrier before empty[0]), so the producer may refill
    # it under a later batch. TMA's latency would likely hide it on a GPU: the PTX check evaluates the first pass.
    "unguarded": unguarded("(kt + TMA_STAGES - 1) % TMA_STAGES"),
    "unguarded_negative": unguarded("(kt - 1) % TMA_STAGES"),
    # (g) the leader arrives with no named barrier: its wait_group speaks for its own warp only.
    "no_named_barrier": without_line(solution(), "cute.arch.barrier(barrier_id=RELEASE_BARRIER + wg,"),
    # (h) the CTA's barrier: the producer warp never reaches it.
    "cta_barrier": edited(solution(), ("cute.arch.barrier(barrier_id=RELEASE_BARRIER + wg, "
                                       "number_of_threads=WARPGROUP)", "cute.arch.barrier()")),
    # (i) one id for both warpgroups: 128 arrivals from either complete it.
    "one_id": edited(solution(), ("barrier_id=RELEASE_BARRIER + wg,", "barrier_id=RELEASE_BARRIER,")),
    # (j) barrier 0, the CTA's.
    "id_zero": edited(solution(), ("barrier_id=RELEASE_BARRIER + wg,", "barrier_id=0 * wg,")),
    # (k) both warpgroups' threads counted on each warpgroup's barrier: it never completes.
    "both_counted": edited(solution(), ("number_of_threads=WARPGROUP)", "number_of_threads=CONSUMERS * WARPGROUP)")),
    # (f) the ring by the DSL's pipeline classes, which the exercise asks to write by hand: refused in the source.
    "pipeline_classes": "from cutlass import pipeline\n" + solution(),
}
#: The wrong variants the PTX check passes: their instructions are the hand-off's, their mistake is in the counts.
DEADLOCKS = ("parity", "count")
#: What the PTX check says of the others.
PTX_HINTS = {"no_full_wait": "the consumers wait until a slot is full, the producer until it is empty",
             "step7": "has CTAs of 128 threads", "release_before_wait": "with no warpgroup.wait_group",
             "own_slot": "the one the loop has just waited for", "unguarded": "on the loop's first k-tile",
             "unguarded_negative": "on the loop's first k-tile",
             "no_named_barrier": "follows no barrier of the warpgroup",
             "cta_barrier": "is the CTA's (sync_threads", "one_id": "both consumer warpgroups meet at named barrier 1",
             "id_zero": "is barrier 0, the CTA's own", "both_counted": "waits for 256 threads"}


def load(tmp_path: Path, source: str):
    return answer_from_file(tmp_path, source, "tma_host")  # the DSL reads a jit function's source from its file


def test_the_answer_and_every_wrong_variant_are_kernel_code():
    for name, source in {"solution": solution(), **WRONG}.items():
        assert harness.restricted(source) is None, (name, harness.restricted(source))
    assert "### BEGIN SOLUTION" in solution() and solution().count("### BEGIN SOLUTION") == 3


def test_the_pipeline_classes_are_refused_in_the_answers_source():
    """6.5 forbids cutlass.pipeline (its metadata); the grader refuses any way the kernel code names it."""
    from .forbidden_calls import forbidden

    names = forbidden(LESSON, "6.5")
    assert names == ["cutlass.pipeline"]
    assert harness.restricted(solution(), names) is None
    assert "`cutlass.pipeline` is not available" in harness.restricted(WRONG["pipeline_classes"], names)
    aliased = solution().replace("import cutlass\n", "import cutlass as c\nx = c.pipeline.PipelineTmaAsync\n", 1)
    assert "`cutlass.pipeline.PipelineTmaAsync` is not available" in harness.restricted(aliased, names)


def test_the_ptx_check_passes_the_solution_for_both_dtypes(capsys, tmp_path):
    assert checks.tma_ptx(load(tmp_path, solution())) is True
    assert capsys.readouterr().out.strip() == f"✓ tma_ptx: all {len(L.PTX_CASES)} cases pass"


@pytest.mark.parametrize("name", sorted(PTX_HINTS))
def test_the_ptx_check_fails_a_kernel_without_the_hand_off_with_a_hint(capsys, tmp_path, name):
    assert checks.tma_ptx(load(tmp_path, WRONG[name])) is False
    line = capsys.readouterr().out.strip().splitlines()[-1]
    assert line.startswith("✗ tma_ptx: ") and PTX_HINTS[name] in line, line


@pytest.mark.parametrize("name", sorted(RIGHT))
def test_the_ptx_check_passes_a_right_answer_written_another_way(capsys, tmp_path, name):
    assert checks.tma_ptx(load(tmp_path, RIGHT[name])) is True, capsys.readouterr().out


def test_the_release_hints_do_not_give_the_guard_the_slot_or_the_ids_away(capsys, tmp_path):
    for name in ("own_slot", "unguarded", "no_named_barrier", "one_id", "id_zero", "both_counted", "cta_barrier"):
        assert checks.tma_ptx(load(tmp_path, WRONG[name])) is False
        hint = capsys.readouterr().out.strip().splitlines()[-1].split("): ", 1)[1]
        assert not re.search(r"kt ?[->]|> ?0|% ?TMA_STAGES|RELEASE_BARRIER|\+ ?wg|barrier_id=|"
                                      r"EMPTY_ARRIVALS|\b2\b", hint), (name, hint)


@pytest.mark.parametrize("name", DEADLOCKS)
def test_the_deadlocking_variants_compile_to_what_the_ptx_check_passes(tmp_path, name):
    assert checks.tma_ptx(load(tmp_path, WRONG[name])) is True


@pytest.fixture(scope="module")
def solution_ptx(tmp_path_factory) -> str:
    import torch

    host = load(tmp_path_factory.mktemp("ptx"), solution())
    a = torch.zeros(64, 96, dtype=torch.float16)
    b = torch.zeros(96, 64, dtype=torch.float16)
    c = torch.zeros(64, 64)
    return harness.ptx(host, "sm_90a", a, b, c, vector=L.VECTOR)


def test_the_solution_compiles_to_the_instructions_of_the_hand_off(solution_ptx):
    from cutecourse.kernels import ptx

    assert L.block_threads(solution_ptx) == L.TMA_THREADS == 288
    assert ptx.count(solution_ptx, "mbarrier.init") == 2 * L.TMA_STAGES  # full and empty, unrolled over the slots
    assert ptx.count(solution_ptx, "mbarrier.try_wait.parity") == 2  # the producer's wait and the consumers'
    assert ptx.count(solution_ptx, "setmaxnreg") == 0  # not asked for: a single producer warp is no warpgroup
    # the warpgroups' named barrier: its id a register (one per warpgroup), 128 threads; and the CTA's barrier 0
    assert sorted({re.sub(r"%r\d+", "%r", " ".join(line.split())) for line in solution_ptx.splitlines()
                   if "bar.sync" in line}) == ["bar.sync %r, 128;", "bar.sync 0;"]


@pytest.mark.parametrize("edit, hint", [
    (lambda p: p.replace("wgmma.mma_async", "nop.wgmma"), "no wgmma.mma_async"),
    (lambda p: p + "\n\tmma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {};\n", "not through registers"),
    (lambda p: p.replace("cp.async.bulk.tensor", "nop.bulk"), "no TMA load"),
    (lambda p: re.sub(r"\.reqntid 288", ".reqntid 160", p), "has CTAs of 160 threads"),
    (lambda p: re.sub(r"\.reqntid [^\n]*", "", p), "declares no CTA size"),
    (lambda p: p.replace("mbarrier.init", "nop.init"), "no mbarrier.init"),
    (lambda p: p.replace("mbarrier.arrive.expect_tx", "nop.expect_tx"), "announce the bytes"),
    (lambda p: re.sub(r"mbarrier\.arrive\.shared", "nop.arrive", p), "never release a slot"),
    (lambda p: p.replace("mbarrier.try_wait", "nop.wait", 1), "has 1 mbarrier wait;"),
    (lambda p: re.sub(r"bar\.sync\s+%r\d+, 128;", "bar.sync 3, 128;", p), "meet at named barrier 3"),
    (lambda p: re.sub(r"bar\.sync\s+%r\d+, 128;", "bar.sync %r1, 64;", p), "waits for 64 threads"),
    (lambda p: 42, "expected the PTX text"),
])
def test_each_missing_piece_of_the_ptx_has_its_own_hint(solution_ptx, edit, hint):
    assert L.ptx_hint(solution_ptx) is None
    got = L.ptx_hint(edit(solution_ptx))
    assert got is not None and hint in got, got


def test_the_ptx_hints_do_not_give_the_parities_or_the_counts_away(solution_ptx):
    hints = [L.ptx_hint(solution_ptx.replace(op, "nop.x")) for op in (
        "mbarrier.init", "mbarrier.arrive.expect_tx", "mbarrier.arrive.shared", "mbarrier.try_wait")]
    for hint in hints:
        assert hint and not re.search(r"\^|//|% ?2|& ?1|TMA_STAGES|init\(|\b128\b|\b4\b", hint), hint


def test_the_gpu_checks_judge_passes_the_product_and_fails_unwritten_or_wrong_outputs():
    import numpy as np

    from cutecourse.grading.checks import input_of

    for case in L.cases(650, [(7, 8, 8), (130, 136, 520)], "bfloat16"):
        want = input_of(case) @ input_of(case[1:])
        assert L.gemm_result_hint(case, want.astype(np.float32)) is None
        unwritten = want.copy()
        unwritten[-1, -8:] = np.nan
        assert "never written" in L.gemm_result_hint(case, unwritten)
        raced = want.copy()
        raced[:, :8] = 0  # a k-tile's products read from a slot before it landed, here all of them, for 8 columns
        assert "refilled before its wgmmas were done" in L.gemm_result_hint(case, raced)


def test_the_checks_shapes_make_the_ring_wrap():
    """A wrong arrival count on empty deadlocks only when a slot is refilled: some K must need more k-tiles than
    there are slots."""
    assert any(-(-k // L.TMA_TILE_K) > L.TMA_STAGES for _, _, k in L.SHAPES)
    assert all(n % L.VECTOR == 0 and k % L.VECTOR == 0 for _, n, k in L.SHAPES)


# --------------------------------------------------------------------------- on a Hopper GPU: deadlocks are stopped


def learner(source: str, timeout: float) -> sandbox.Learner:
    return sandbox.Learner([{"label": "exercise 6.5", "exercise": "6.5", "source": source}], timeout=timeout)


def test_in_a_learner_process_the_ptx_check_passes_the_solution_and_fails_step_7():
    """The grader's path: the answer in a jailed process of its own, compiled there, the PTX judged here."""
    with learner(solution(), 300) as process:
        assert checks.grade(checks.tma_ptx, process) == f"✓ tma_ptx: all {len(L.PTX_CASES)} cases pass"
    with learner(WRONG["step7"], 300) as process:
        line = checks.grade(checks.tma_ptx, process)
        assert line.startswith("✗ tma_ptx: ") and PTX_HINTS["step7"] in line, line


@pytest.mark.gpu(90)
def test_on_a_gpu_the_solution_passes_the_gpu_check_in_a_learner_process():
    with learner(solution(), 300) as process:
        assert checks.grade(checks.tma_gemm, process).startswith(checks.PASS)


@pytest.mark.gpu(90)
def test_on_a_gpu_a_deadlock_is_stopped_at_the_timeout_and_the_next_process_runs():
    """The wrong parity (test_lesson_06 grades the wrong count the same way, end to end)."""
    ring = L.cases(651, [(130, 136, 520)], "float16")[0]  # 9 k-tiles: the ring wraps
    with learner(WRONG["parity"], 30) as process:
        with pytest.raises(sandbox.LearnerError, match="timed out after 30 s"):
            process.call("tma_host", *ring, via="launch", options={"vector": L.VECTOR})
    with learner(solution(), 300) as process:  # the GPU is free again: the dead process's context is gone
        _, (out,) = process.call("tma_host", *ring, via="launch", options={"vector": L.VECTOR})
        assert L.gemm_result_hint(ring, out) is None
