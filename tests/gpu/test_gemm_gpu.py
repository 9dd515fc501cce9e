"""Every GEMM step on the GPU against torch in float64: 200 random shapes per step (1 to 4096 per dimension, primes
included, tails that are no tile's multiple), both operand dtypes, the three C dtypes, both majors of A and B, outputs
poisoned with NaN first. Deliberately broken kernels, one for each idea a step adds, derived from the steps' own
source, are shown to fail the same check; each step refuses a GPU older than it needs, by name. What a cached launch
costs the host is a benchmark (benchmarks/host_costs.py launch), not a test."""

import importlib
import importlib.util
import json
import math
import os
import pathlib
import random
import subprocess
import sys
import threading
import zlib

import pytest

torch = pytest.importorskip("torch")

from cutecourse.kernels.gemm import GEMM_STEPS, tolerances  # noqa: E402

pytestmark = pytest.mark.gpu(80)

STEPS = list(GEMM_STEPS)
#: (A/B dtype, C dtype, A major, B major): 50 shapes each, so 200 per step.
COMBOS = [(torch.bfloat16, torch.float32, "k", "n"), (torch.float16, torch.float16, "k", "k"),
          (torch.bfloat16, torch.bfloat16, "m", "n"), (torch.float16, torch.float32, "m", "k")]
PRIMES = [1, 2, 3, 7, 13, 61, 127, 251, 509, 1021, 2039, 4093]


def shapes(seed, count, vector, combo):
    """`count` (M, N, K): edge cases first, then log-uniform in [1, 4096]; the dimensions an operand keeps
    contiguous are rounded up to whole 16-byte vectors when the step needs them (the launcher's rule)."""
    rng = random.Random(seed)
    picked = [(1, 1, 1), (4093, 61, 127), (127, 4093, 13), (61, 13, 4093), (4096, 4096, 64), (2039, 509, 1021)]
    while len(picked) < count:
        picked.append(tuple(rng.choice(PRIMES) if rng.random() < 0.25 else int(math.exp(rng.uniform(0, math.log(4096))))
                            for _ in range(3)))
    if not vector:
        return picked
    _, c_dtype, a_major, b_major = combo
    c_vector = 16 // torch.empty(0, dtype=c_dtype).element_size()

    def up(x, v):
        return -(-x // v) * v

    legal = []
    for m, n, k in picked:
        k = up(k, 8) if a_major == "k" or b_major == "k" else k
        m = up(m, 8) if a_major == "m" else m
        n = up(n, 8) if b_major == "n" else up(n, c_vector)
        legal.append((min(m, 4096), min(n, 4096), min(k, 4096)))
    return legal


def operands(m, n, k, combo):
    ab, c_dtype, a_major, b_major = combo
    a = torch.randn(m, k, device="cuda").to(ab) if a_major == "k" else torch.randn(k, m, device="cuda").to(ab).t()
    b = torch.randn(k, n, device="cuda").to(ab) if b_major == "n" else torch.randn(n, k, device="cuda").to(ab).t()
    c = torch.full((m, n), float("nan"), device="cuda", dtype=c_dtype)
    return a, b, c


def failures(gemm, combo, cases):
    wrong = []
    for m, n, k in cases:
        a, b, c = operands(m, n, k, combo)
        gemm(a, b, c)
        torch.cuda.synchronize()
        problem = tolerances.within_bounds(c, a, b)
        if problem:
            wrong.append(f"{(m, n, k)}: {problem}")
    return wrong


def needs(cc):
    major, minor = torch.cuda.get_device_capability()
    if major * 10 + minor < cc:
        pytest.skip(f"not run: needs sm_{cc}")


def runnable(step):
    """The step's module; the test is skipped, with the reason, on a GPU older than the step needs."""
    module = importlib.import_module(f"cutecourse.kernels.gemm.{step}")
    needs(module.gemm.min_cc)
    return module


@pytest.mark.parametrize("combo", COMBOS, ids=lambda c: f"{str(c[0])[6:]}-{str(c[1])[6:]}-{c[2]}{c[3]}")
@pytest.mark.parametrize("step", STEPS)
def test_step_matches_float64_torch_on_random_shapes(step, combo):
    module = runnable(step)
    cases = shapes(zlib.crc32(step.encode()) + COMBOS.index(combo), 50, module.gemm.vector, combo)
    wrong = failures(module.gemm, combo, cases)
    assert not wrong, f"{step}: {len(wrong)} of {len(cases)} shapes wrong:\n" + "\n".join(wrong[:10])


#: step -> {what: Config fields}: tile shapes and schedules beside a step's default, each on 100 random shapes.
VARIANTS = {
    "gemm06_tma": {"128 x 128 x 32 tiles, 4 stages": dict(tile_m=128, warps_m=2, tile_k=32, stages=4)},
    "gemm07_wgmma": {"128 x 128 tiles, one warpgroup of two 64-row slabs, 2 stages": dict(
        tile_m=128, tile_n=128, warpgroups=1, stages=2)},
    "gemm08_warpspecialized": {"64-row tiles: one consumer warpgroup": dict(tile_m=64, warpgroups=1)},
    "gemm09_persistent": {"256 x 128 tiles: two 64-row slabs a consumer warpgroup": dict(tile_m=256, tile_n=128)},
    "gemm10_multicast": {"256 x 128 tiles, cluster 1 x 2, multicast A": dict(
        tile_m=256, tile_n=128, cluster_m=1, cluster_n=2, epi_n=32, epi_stages=2),
                         "cluster 1 x 1: no multicast": dict(cluster_m=1)},
    "gemm11_pingpong": {"128 x 64 tiles, cluster 1 x 2": dict(tile_n=64, cluster_m=1, cluster_n=2),
                        # a 2 x 2 cluster: A multicast along each cluster row and B along each column
                        "64 x 64 tiles, cluster 2 x 2": dict(tile_m=64, tile_n=64, cluster_m=2, cluster_n=2)},
}


@pytest.mark.parametrize("step, what", [(s, w) for s, vs in VARIANTS.items() for w in vs])
def test_other_configs_of_a_step_match_too(step, what):
    module = runnable(step)
    config = module.Config(**VARIANTS[step][what])
    for combo in COMBOS[:2]:
        cases = shapes(zlib.crc32(what.encode()) + COMBOS.index(combo), 50, True, combo)
        wrong = failures(lambda a, b, c: module.gemm(a, b, c, config), combo, cases)
        assert not wrong, f"{step} {config}: {len(wrong)} of {len(cases)} shapes wrong:\n" + "\n".join(wrong[:10])


@pytest.mark.parametrize("step", ["gemm09_persistent", "gemm10_multicast", "gemm11_pingpong"])
def test_persistent_grids_of_any_size_cover_every_tile(step):
    """The persistent grid is as small as its rounds allow and never larger than the GPU: with 114 SMs (an H100
    PCIe), with more SMs than the GPU has (lowered to its count), and with 6, every tile is computed once."""
    module = runnable(step)
    for sms in (114, 1000, 6):
        config = module.Config(sms=sms)
        wrong = failures(lambda a, b, c: module.gemm(a, b, c, config), COMBOS[0],
                         [(4096, 4096, 128), (4000, 3000, 200), (257, 136, 64)])
        assert not wrong, f"{step} sms={sms}: " + "\n".join(wrong)
    assert not any(key[1].sms == 1000 for key in module.gemm.compiled)  # it was lowered to the GPU's count


def variant(step, edits, tmp_path):
    """A copy of `step` with text `edits` applied ((old, new) pairs, each found exactly once), imported from a file
    (the DSL reads kernels' source)."""
    module = importlib.import_module(f"cutecourse.kernels.gemm.{step}")
    source = open(module.__file__).read()
    for old, new in edits:
        assert source.count(old) == 1, f"{step} no longer has exactly one {old!r}: update this broken variant"
        source = source.replace(old, new)
    # Named <folder>.<step>: the launcher knows a step (its shared-memory budget, its messages) by the module's last
    # name, and a broken copy is that step.
    name = f"broken_{abs(hash(tuple(edits)))}.{step}"
    path = tmp_path / f"broken_{step}_{abs(hash(tuple(edits)))}.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location(name, path)
    broken = importlib.util.module_from_spec(spec)
    sys.modules[name] = broken
    spec.loader.exec_module(broken)
    return broken


#: step -> {what is broken: the edits}, at least one per idea the step adds: each must make the check above fail.
BROKEN = {
    "gemm01_naive": {"the K loop stops one short": [("cutlass.range(mA.shape[1])", "cutlass.range(mA.shape[1] - 1)")]},
    "gemm02_smem": {"each K tile skips its last k": [
        ("cutlass.range_constexpr(k_blocks):  # one k at a time", "cutlass.range_constexpr(k_blocks - 1):")]},
    "gemm03_mma": {
        "each K tile skips its last MMA k-block": [
            ("cutlass.range_constexpr(k_blocks):  # tile_k / 16 steps of the MMA's K",
             "cutlass.range_constexpr(k_blocks - 1):")],
        "every MMA of a K tile takes A's first k-block": [
            ("cute.gemm(tiled_mma, acc, tCrA[None, None, kb],", "cute.gemm(tiled_mma, acc, tCrA[None, None, 0],")]},
    "gemm04_multistage": {
        "the stage being computed on is refilled": [("write = read - 1", "write = read")],
        "the register double buffer reloads the k-block it computes": [("kn = (kb + 1) % k_blocks", "kn = kb")]},
    "gemm05_swizzle": {
        "the epilogue reads the C tile unswizzled, though it was written swizzled": [
            ("thr_copy_c.partition_S(sC)", "thr_copy_c.partition_S(cute.make_tensor(sC.iterator, sC_layout.outer))")],
        "ldmatrix reads A unswizzled, though cp.async wrote it swizzled": [
            ("thr_copy_s2r_a.partition_S(sA)",
             "thr_copy_s2r_a.partition_S(cute.make_tensor(sA.iterator, sA_layout.outer))")]},
    "gemm06_tma": {
        "the TMA writes A unswizzled, ldmatrix reads it 128B-swizzled": [
            ("cute.slice_(sA_layout, (None, None, 0)),\n", "cute.slice_(sA_layout.outer, (None, None, 0)),\n")],
        "the warps wait for each next tile with the first phase's parity only": [
            ("cute.arch.mbarrier_wait(full + nxt, (kt + 1) // stages % 2)", "cute.arch.mbarrier_wait(full + nxt, 0)")]},
    "gemm07_wgmma": {
        "the TMA writes A unswizzled, the wgmma reads it 128B-swizzled": [
            ("cute.slice_(sA_layout, (None, None, 0)),\n", "cute.slice_(sA_layout.outer, (None, None, 0)),\n")],
        "each wgmma overwrites the accumulators": [("        tiled_mma.set(warpgroup.Field.ACCUMULATE, True)\n", "")],
        "the warps wait for each tile with the first phase's parity only": [
            ("cute.arch.mbarrier_wait(full + read, kt // stages % 2)", "cute.arch.mbarrier_wait(full + read, 0)")]},
    "gemm08_warpspecialized": {
        "the producer writes every k-tile into stage 0": [("tAsA[None, write.index]", "tAsA[None, 0]")]},
    "gemm09_persistent": {
        "every CTA starts at work item 0": [("first_work, _, _ = cute.arch.block_idx()",
                                             "first_work = cutlass.Int32(0)")],
        "the raster takes the last, shorter group as a whole one": [
            ("rows = cutlass.min(tiles_m - first_m, group_m)", "rows = group_m")]},
    "gemm10_multicast": {
        "both CTAs of a cluster take the same tile": [("(first_m + r % rows) * cluster_m + cta_m",
                                                       "(first_m + r % rows) * cluster_m")],
        "every TMA store writes the tile's first subtile": [("bSG_gC[(None, j)]", "bSG_gC[(None, 0)]")]},
    "gemm11_pingpong": {
        "warpgroup 2 stores its tiles over warpgroup 1's": [
            ("\n            tm, tn = _tile_coord(tile, ",
             "\n            tm, tn = _tile_coord(tile - consumer * work_stride, ")]},
}
#: Shapes for the broken kernels: whole tiles, many tiles per persistent CTA (4096 x 4096), a raster group cut short
#: (700 rows are 6 tiles of 128), ragged tails.
BROKEN_CASES = [(256, 256, 256), (4096, 512, 1024), (200, 136, 72), (700, 1000, 64), (4096, 4096, 128)]


#: A broken kernel that deadlocks (a wrong mbarrier parity can) is stopped this many seconds after it was compiled;
#: exit status HUNG says so. It runs in a process of its own, as the grader runs a learner's: a hung kernel cannot be
#: stopped in the process that launched it.
DEADLINE, HUNG = 60, 3


@pytest.mark.parametrize("step, what", [(s, w) for s, vs in BROKEN.items() for w in vs])
def test_a_broken_kernel_fails_the_check(step, what, tmp_path):
    runnable(step)
    child = subprocess.run([sys.executable, __file__, step, what, str(tmp_path)], capture_output=True, text=True,
                           timeout=10 * DEADLINE)
    if child.returncode == HUNG:
        return  # it deadlocked: the check fails it at its deadline
    assert child.returncode == 0, f"{step} with {what}: the check's process failed:\n{child.stderr[-3000:]}"
    assert json.loads(child.stdout.splitlines()[-1]), f"{step} with {what} passed the check: it cannot fail"


def check_broken(step, what, folder):
    """The child's side: `step` broken by `what`, compiled, then checked on BROKEN_CASES under DEADLINE; prints
    the list of wrong cases as JSON."""
    broken = variant(step, BROKEN[step][what], folder)
    broken.gemm.plan(*operands(*BROKEN_CASES[0], COMBOS[0]), broken.gemm.default)  # compiled before the clock starts
    threading.Timer(DEADLINE, os._exit, (HUNG,)).start()
    print(json.dumps(failures(broken.gemm, COMBOS[0], BROKEN_CASES)), flush=True)
    os._exit(0)


def test_every_idea_of_the_ladder_has_a_broken_kernel():
    assert list(BROKEN) == STEPS


@pytest.mark.parametrize("step", STEPS)
def test_each_step_names_the_arch_it_needs(step, monkeypatch):
    module = importlib.import_module(f"cutecourse.kernels.gemm.{step}")
    assert module.gemm.min_cc == (90 if step in STEPS[5:] else 80)
    older, way = (80, "use gemm05_swizzle") if module.gemm.min_cc == 90 else (75, "every GEMM step needs an sm_80")
    a, b, c = operands(64, 64, 64, COMBOS[0])
    monkeypatch.setattr("cutecourse.kernels.gemm.operands.capability", lambda device: older)  # an A100 (a T4)
    module.gemm.plans.clear()  # no verdict cached by an earlier call
    with pytest.raises(ValueError, match=rf"{step} needs sm_{module.gemm.min_cc} or newer .* this GPU is "
                                         rf"sm_{older}: {way}"):
        module.gemm(a, b, c)


def test_a_cpu_operand_and_unsupported_strides_are_refused():
    from cutecourse.kernels.gemm import gemm05_swizzle

    a, b, c = operands(64, 64, 64, COMBOS[0])
    with pytest.raises(ValueError, match=r"b is on cpu; move it to the GPU: b = b.cuda\(\)"):
        gemm05_swizzle.gemm(a, b.cpu(), c)
    with pytest.raises(ValueError, match=r"a's contiguous extent is K=60 .* multiple of 8 .* or use gemm02_smem"):
        gemm05_swizzle.gemm(a[:, :60].contiguous(), b[:60], c)
    with pytest.raises(ValueError, match=r"a's contiguous extent is K=60 .* or use gemm02_smem"):
        gemm05_swizzle.gemm(a[:, :60], b[:60], c)  # a padded leading dimension, but K holds no whole vectors
    with pytest.raises(ValueError, match=r"a has shape \(64, 64\) and strides \(0, 1\): neither row- nor column"):
        gemm05_swizzle.gemm(a[:1].expand(64, 64), b, c)


if __name__ == "__main__":  # test_a_broken_kernel_fails_the_check's child: step, what, a folder for the copy
    check_broken(sys.argv[1], sys.argv[2], pathlib.Path(sys.argv[3]))
