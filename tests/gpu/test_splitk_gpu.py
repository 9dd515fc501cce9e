"""Step 11's split-K on the GPU (`cutecourse.kernels.gemm.splitk`): random ragged M, N and K (K no multiple of 64,
splits that get unequal shares of the k-tiles), both majors of A and B, fp16 and bf16, padded leading dimensions,
outputs poisoned with NaN (padding included), against float64 torch; a fused epilogue (bias + GELU, beta · C,
alpha, aux) after the reduction; two calls bitwise equal, on one workspace; `cutecourse.gemm` choosing splits on a
128 × 6144 × 4096 problem and being right. Kernels broken in the split (every split loads the first share of K, every
partial lands in slice 0, the reduction skips the last slice, the reduction does not wait for the GEMM it is
launched beside) fail the same checks. Stream-K (``Config(stream_k=True)``) the same way, with every workspace slice
poisoned with NaN before each call, so a reduction that reads a slice no piece of its tile wrote fails: on ragged
shapes of one to many tiles a cluster, in 64-row tiles in a 2 × 1 cluster, with swap-AB, with the fused epilogue,
bitwise twice on one workspace; broken (its pieces in the wrong slices, the reduction adding every slice or reading
the raster row-major), it fails. Compiles dominate the time: the cases share a few Configs' kernels."""

import math
import random
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

import cutecourse  # noqa: E402
from cutecourse import dispatch  # noqa: E402
from cutecourse.kernels.gemm import epilogue, launcher  # noqa: E402

pytestmark = pytest.mark.gpu(90)


from . import test_epilogue_gpu as epilogue_gpu  # noqa: E402

# The house's GPU helpers, imported, not copied: padded, NaN-poisoned operands and their judge (strides), broken
# copies of a module (the ladder's test, as the epilogue test loads it), and the epilogue's judge (the epilogue test,
# which loads the benchmark's).
strides = epilogue_gpu._load("strides_gpu_helpers", Path(__file__).with_name("test_gemm_strides_gpu.py"))
gemm_gpu = epilogue_gpu.gemm_gpu

#: (A/B dtype, D dtype, A major, B major): both dtypes, both majors of each operand, 16-bit and float32 D.
COMBOS = [(torch.float16, torch.float16, "k", "n"), (torch.bfloat16, torch.float32, "m", "k")]
SPLITS = 3


@pytest.fixture(scope="module")
def pingpong():
    module = strides.runnable("gemm11_pingpong")
    return module, module.Config(splits=SPLITS)


def split_shapes(seed, count, splits):
    """`count` random (M, N, K, pads): M, N and K whole 16-byte vectors (8 elements) as the step needs, K no multiple
    of 64 and its k-tiles no multiple of `splits` (unequal shares), at least one k-tile a split. The first cases: the
    least, a ragged one, and one of 96 tiles, whose 288 units take each persistent CTA several rounds (both consumer
    warpgroups, skipping each other's unequal shares in the stage ring)."""
    rng = random.Random(seed)
    cases = [(8, 8, 64 * splits + 8, (8, 8, 8)), (1000, 136, 1000, (16, 8, 64)), (1536, 1024, 1000, (8, 64, 16))]
    while len(cases) < count:
        m, n = (-(-int(math.exp(rng.uniform(0, math.log(1500)))) // 8) * 8 for _ in range(2))
        k_tiles = rng.randrange(splits, 40)
        if k_tiles % splits == 0:
            k_tiles += 1
        k = 64 * (k_tiles - 1) + 8 * rng.randrange(1, 8)
        cases.append((m, n, k, tuple(rng.choice([8, 16, 64]) for _ in range(3))))
    return cases


def test_the_shapes_split_unequally_and_leave_a_k_tail():
    cases = split_shapes(0, 10, SPLITS)
    assert all(k % 64 and math.ceil(k / 64) % SPLITS and math.ceil(k / 64) >= SPLITS for _, _, k, _ in cases)


def split_failures(gemm, config, combo, cases):
    return strides.failures(lambda a, b, out: gemm(a, b, out, config), combo, cases)


@pytest.mark.parametrize("combo", COMBOS, ids=lambda c: f"{str(c[0])[6:]}-{str(c[1])[6:]}-{c[2]}{c[3]}")
def test_split_k_matches_float64_torch_on_ragged_padded_shapes(pingpong, combo):
    module, config = pingpong
    cases = split_shapes(COMBOS.index(combo), 10, SPLITS)
    wrong = split_failures(module.gemm, config, combo, cases)
    assert not wrong, f"{config}: {len(wrong)} of {len(cases)} wrong:\n" + "\n".join(wrong)


def test_split_k_in_a_2_x_2_cluster_matches_too(pingpong):
    """Split-K with 64-row tiles in a 2 × 2 cluster: a cluster's four CTAs compute the same split
    of four neighbouring tiles, each k-tile of A multicast along the cluster's row and of B along its column, on
    ragged shapes whose last clusters stick out of D."""
    module, _ = pingpong
    config = module.Config(tile_m=64, cluster_m=2, cluster_n=2, splits=SPLITS)
    for combo in COMBOS:
        cases = split_shapes(10 + COMBOS.index(combo), 6, SPLITS)
        wrong = split_failures(module.gemm, config, combo, cases)
        assert not wrong, f"{config}: {len(wrong)} of {len(cases)} wrong:\n" + "\n".join(wrong)


def test_the_fused_epilogue_runs_after_the_reduction(pingpong):
    """D = GELU(alpha · Σ_s W[s] + beta · C + bias) and aux = its argument, for the bf16 M-major combo whose split
    GEMM the test above compiled (the epilogue only changes the reduction)."""
    module, config = pingpong
    combo = (torch.bfloat16, torch.bfloat16, "m", "k")
    epi = epilogue.Epilogue("gelu_tanh", bias="n", aux=True)
    wrong = []
    for m, n, k, pads in split_shapes(7, 6, SPLITS):
        a, b, d, buffer = strides.operands(m, n, k, combo, pads)
        problems = epilogue_gpu.fused_problems(lambda *args, **kw: module.gemm(*args, config, **kw), a, b, d, buffer,
                                               epi)
        if problems:
            wrong.append(f"{(m, n, k)} pads {pads}: " + "; ".join(problems))
    assert not wrong, "\n".join(wrong)


@pytest.mark.parametrize("fields", [{"splits": SPLITS}, {"stream_k": True}], ids=["split-K", "stream-K"])
def test_two_calls_are_bitwise_equal_and_share_one_workspace(pingpong, fields):
    module, _ = pingpong
    config = module.Config(**fields)
    combo = COMBOS[1]  # float32 D: every bit of the sum shows
    a, b, d, _ = strides.operands(1000, 1016, 3000, combo, (8, 8, 8))  # stream-K: 2-4 pieces a tile
    slices = module.gemm.stream_config(config, a, d).splits if config.stream_k else SPLITS
    results = []
    workspaces = []  # this size's workspaces after each call: (device, stream, elements) -> address
    for _ in range(2):
        d.fill_(float("nan"))
        module.gemm(a, b, d, config)
        torch.cuda.synchronize()
        results.append(d.clone())
        workspaces.append({key: buffer.data_ptr() for key, buffer in module.gemm.workspaces.entries.items()
                           if key[2] == slices * d.numel()})
    assert strides.tolerances.within_bounds(results[0], a, b) is None
    assert torch.equal(results[0], results[1]), f"two {config} calls on the same inputs differ"
    assert len(workspaces[0]) == 1 and workspaces[0] == workspaces[1], workspaces
    # The comparison is strict: the float64 product rounded to float32 is as close, and not bitwise the same.
    assert not torch.equal(results[0], (a.double() @ b.double()).float())


def test_cutecourse_gemm_splits_a_problem_of_few_tiles_and_long_k(monkeypatch, tmp_path):
    """With no measured winner or tuned pick, 128 × 6144 × 4096 (48 tiles of 128 × 128 on 132 SMs, 64 k-tiles) runs
    in 2 splits, right."""
    from cutecourse.kernels.gemm import winners

    monkeypatch.setattr(winners, "TABLE", tmp_path / "winners.json")
    monkeypatch.setenv("CUTECOURSE_CACHE", str(tmp_path))
    dispatch.forget_plans()
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    a, b, out, buffer = strides.operands(128, 6144, 4096, (torch.bfloat16, torch.bfloat16, "k", "k"), (0, 0, 0))
    choice = cutecourse.gemm.explain(a, b, out)
    expected = min(dispatch.MAX_SPLITS, sms // 48, 64 // dispatch.MIN_SPLIT_K_TILES)
    assert choice.step == "gemm11_pingpong" and choice.config.splits == expected >= 2, choice
    assert any(f"48 tiles of 128×128 on {sms} SMs, 64 k-tiles" in r for r in choice.reasons), choice
    cutecourse.gemm(a, b, out)
    torch.cuda.synchronize()
    assert strides.judge(out, buffer, a, b) is None


def broken_step(name, edits, tmp_path, **fields):
    """(launcher, Config(**fields)) of step 11 with `edits` in module `name`: gemm11_pingpong's copy, or step 11's host
    and Config launched by the broken splitk's launcher."""
    strides.runnable("gemm11_pingpong")
    broken = gemm_gpu.variant(name, edits, tmp_path)
    if name != "splitk":
        return broken.gemm, broken.Config(**fields)
    from cutecourse.kernels.gemm import gemm11_pingpong as step

    return broken.Launcher(step.host, step.Config, vector=True, min_cc=90, for_device=launcher.for_device,
                           epilogue=True, fp8=True), step.Config(**fields)


@pytest.fixture
def poisoned_workspace(monkeypatch):
    """Every workspace a launcher hands `run` is filled with NaN first: a slice the GEMM did not write reads NaN."""

    def poison(gemm):
        original = gemm.workspace

        def workspace(device, stream, elements):
            buffer = original(device, stream, elements)
            buffer.fill_(float("nan"))  # on torch's current stream, the one the call launches on
            return buffer

        monkeypatch.setattr(gemm, "workspace", workspace)
        return gemm

    return poison


def stream_shapes(seed, count):
    """`count` random ragged (M, N, K, pads) for stream-K; the first cases: one tile of 2 k-tiles (the 66 clusters
    of an H200 get one k-tile or none: the grid shrinks to 2), one tile of a deep K (every cluster a piece of it), and
    96 tiles of 16 k-tiles (shares that cross tiles)."""
    return [(8, 8, 72, (8, 8, 8)), (64, 136, 9000, (8, 16, 8)), (1536, 1024, 1000, (8, 64, 16))] + split_shapes(
        seed, count, SPLITS)[3:]


STREAM_K = {"128 x 128 tiles, 2 x 1 cluster": {"stream_k": True},
            "64 x 64 tiles, 2 x 1 cluster": {"stream_k": True, "tile_m": 64, "tile_n": 64}}


@pytest.mark.parametrize("variant", list(STREAM_K))
def test_stream_k_matches_float64_torch_on_ragged_padded_shapes(pingpong, poisoned_workspace, variant):
    module, _ = pingpong
    gemm = poisoned_workspace(module.gemm)
    config = module.Config(**STREAM_K[variant])
    for combo in COMBOS:
        cases = stream_shapes(20 + COMBOS.index(combo), 8)
        wrong = split_failures(gemm, config, combo, cases)
        assert not wrong, f"{config}: {len(wrong)} of {len(cases)} wrong:\n" + "\n".join(wrong)


def test_stream_k_with_swap_ab_and_the_fused_epilogue(pingpong, poisoned_workspace):
    """Swap-AB's Dᵀ in stream-K pieces (a column-major workspace) for x of 1-64 rows, and the fused epilogue after a
    stream-K reduction."""
    module, _ = pingpong
    gemm = poisoned_workspace(module.gemm)
    swapped = module.Config(stream_k=True, swap_ab=True, tile_m=64, tile_n=16, epi_n=16, cluster_m=1)
    rng = random.Random(5)
    cases = [(rng.choice([1, 8, 16, 40, 64]), 8 * rng.randrange(1, 300), 8 * rng.randrange(8, 1200),
              (8, 16, 8)) for _ in range(6)]
    wrong = split_failures(gemm, swapped, (torch.bfloat16, torch.bfloat16, "k", "k"), cases)
    assert not wrong, f"{swapped}: {len(wrong)} of {len(cases)} wrong:\n" + "\n".join(wrong)
    config = module.Config(stream_k=True)
    epi = epilogue.Epilogue("gelu_tanh", bias="n", aux=True)
    for m, n, k, pads in stream_shapes(8, 5):
        a, b, d, buffer = strides.operands(m, n, k, (torch.float16, torch.float16, "m", "n"), pads)
        problems = epilogue_gpu.fused_problems(lambda *args, **kw: gemm(*args, config, **kw), a, b, d, buffer, epi)
        wrong += [f"{(m, n, k)} pads {pads}: " + "; ".join(problems)] if problems else []
    assert not wrong, "\n".join(wrong)


SPLIT, STREAM = {"splits": SPLITS}, {"stream_k": True}
#: what is broken -> (module, its edits, the Config's fields): each must make the check fail.
BROKEN = {
    "every split loads the first share of K": ("gemm11_pingpong", [
        ("for kt in range(first_k, first_k + k_count):", "for kt in range(0, k_count):")], SPLIT),
    "every partial tile lands in slice 0": ("gemm11_pingpong", [
        ("gC[(None, None, tm, tn, split)]", "gC[(None, None, tm, tn, 0)]")], SPLIT),
    "the reduction skips the last slice": ("splitk", [
        ("cutlass.range_constexpr(1, splits)", "cutlass.range_constexpr(1, splits - 1)")], SPLIT),
    # launched while the GEMM runs (programmatic dependent launch), it reads the workspace before the partials land
    "the reduction does not wait for the split GEMM": ("splitk", [
        ("    cute.arch.griddepcontrol_wait()\n", "")], SPLIT),
    "a stream-K piece's slice is its place in its CTA's share, not in its tile": ("gemm11_pingpong", [
        ("gC[(None, None, tm, tn, split)]", "gC[(None, None, tm, tn, work // work_stride)]")], STREAM),
    "the stream-K reduction adds every slice, written or not": ("splitk", [
        ("present[i] = pred[i] & (s < pieces[i])", "present[i] = pred[i]")], STREAM),
    "the stream-K reduction counts the pieces on a row-major raster": ("splitk", [
        ("return first_row * clusters_n + col * rows + row - first_row", "return row * clusters_n + col")], STREAM),
}


@pytest.mark.parametrize("what", list(BROKEN))
def test_a_broken_split_or_stream_k_fails_the_check(what, tmp_path, poisoned_workspace):
    name, edits, fields = BROKEN[what]
    gemm, config = broken_step(name, edits, tmp_path, **fields)
    # stream-K: 2048 rows are 16 cluster rows, two groups of the raster
    cases = stream_shapes(21, 3) + [(2048, 384, 1000, (8, 8, 8))] if config.stream_k else split_shapes(11, 3, SPLITS)
    assert split_failures(poisoned_workspace(gemm), config, COMBOS[1], cases), \
        f"{what}: passed the check, which cannot fail"


def test_the_k_tiles_refusal_names_splits_on_the_gpu(pingpong):
    module, _ = pingpong
    a, b, d, _ = strides.operands(64, 64, 136, COMBOS[0], (8, 8, 8))  # 3 k-tiles
    with pytest.raises(ValueError, match=r"^splits=4: K=136 is 3 k-tiles of 64.*splits at most 3"):
        module.gemm(a, b, d, module.Config(splits=4))
