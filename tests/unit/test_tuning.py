"""cutecourse.tune on a CPU: the search space, the two searches on a made-up cost, the cache's keys, its keeping of
the faster pick and its tolerance of a damaged file, and the refusals (tests/gpu/test_tuning_gpu.py tunes for real)."""

import importlib
import itertools
import json
import warnings

import pytest

pytest.importorskip("cutlass")
torch = pytest.importorskip("torch")

from cutecourse import tune_cache, tuning  # noqa: E402
from cutecourse.kernels.gemm import GEMM_STEPS, budget, gemm10_multicast  # noqa: E402

STEP = "gemm10_multicast"
SPACE = tuning.SPACES[STEP]
DEFAULT = gemm10_multicast.Config()


def test_candidates_are_the_product_of_the_fields_and_skip_what_the_config_refuses():
    every = tuning.candidates(STEP, SPACE, DEFAULT, list(SPACE))
    assert len(every) == 2 * 3 * 2 * 2 == 24 and len(set(every)) == 24
    assert {(c.tile_m, c.tile_n) for c in every} == {(128, 256), (256, 128)}
    assert all(c.tile_k == DEFAULT.tile_k for c in every)  # fields outside the space keep the base's value
    too_big = {"tile_m,tile_n": ((256, 256), (128, 128))}  # 256 x 256 is 256 accumulators a thread: refused
    assert [(c.tile_m, c.tile_n) for c in tuning.candidates(STEP, too_big, DEFAULT, ["tile_m,tile_n"])] == [(128, 128)]
    assert tuning.changes(STEP, gemm10_multicast.Config(tile_n=128, group_m=4)) == "tile_n=128,group_m=4"
    assert tuning.changes(STEP, DEFAULT) == ""


def cost(config):
    """A made-up time with nearly separable effects of the fields, best at tile 256 x 128, cluster 1 x 2, group 4,
    epi_n 64, and one interaction (cluster 1 x 1 is slower with the 256-row tile)."""
    cluster = {(2, 1): 0.02, (1, 2): 0.0, (1, 1): 0.04}[config.cluster_m, config.cluster_n]
    both = 0.02 * (config.tile_m == 256 and (config.cluster_m, config.cluster_n) == (1, 1))
    return 1.0 + 0.05 * (config.tile_m == 128) + cluster + 0.01 * (config.group_m == 8) + 0.015 * (
        config.epi_n == 32) + both


class Timer:
    """`time` for the searches: every Config asked for is 'timed' (cost), and the batches are recorded."""

    def __init__(self, wrong=(), cost_of=cost):
        self.batches = []
        self.ms = {}
        self.wrong = set(wrong)
        self.cost_of = cost_of

    def __call__(self, configs):
        self.batches.append(list(configs))
        self.ms.update({c: None if c in self.wrong else self.cost_of(c) for c in configs})
        return self.ms


def test_coordinate_descent_finds_the_best_of_a_nearly_separable_space_with_fewer_configs():
    every = tuning.candidates(STEP, SPACE, DEFAULT, list(SPACE))
    best = min(every, key=cost)
    timer = Timer()
    found = tuning.coordinate(SPACE, DEFAULT, STEP, timer)
    assert found == best
    assert len(timer.ms) < len(every)  # it compiled fewer Configs than the sweep
    assert timer.batches[0] == [DEFAULT]
    assert all(batch[0] in timer.ms for batch in timer.batches[1:])  # the incumbent is re-timed with each field


def test_exhaustive_is_the_fastest_of_the_product_and_wrong_configs_never_win():
    every = tuning.candidates(STEP, SPACE, DEFAULT, list(SPACE))
    best = min(every, key=cost)
    assert tuning.fastest(every, Timer()) == best
    second = min((c for c in every if c != best), key=cost)
    assert tuning.fastest(every, Timer(wrong={best})) == second
    assert tuning.fastest(every, Timer(wrong=set(every))) is None
    # the coordinate search keeps a right incumbent when every other value of a field is wrong
    assert tuning.coordinate(SPACE, DEFAULT, STEP, Timer(wrong=set(every) - {DEFAULT})) == DEFAULT


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("CUTECOURSE_CACHE", str(tmp_path))
    monkeypatch.setattr(tune_cache, "gpu_identity", lambda device: "NVIDIA H200|580.159.04|4.8.1")
    return tmp_path / "tune.json"


def problem(m=256, n=512, k=128, dtype=torch.bfloat16):
    return torch.empty(m, k, dtype=dtype), torch.empty(n, k, dtype=dtype).t(), torch.empty(m, n, dtype=dtype)


def test_the_cache_keys_the_gpu_driver_dsl_dtypes_problem_and_majors(cache):
    a, b, c = problem()
    assert tune_cache.cache_file() == cache
    key = tune_cache.problem_key("NVIDIA H200|580.159.04|4.8.1", a, b, c)
    assert key == "NVIDIA H200|580.159.04|4.8.1|bfloat16->bfloat16|256x512x128|kk"
    other = {tune_cache.problem_key("G|d|v", *problem(dtype=torch.float16)),
             tune_cache.problem_key("G|d|v", a, torch.empty(128, 512, dtype=torch.bfloat16), c),
             tune_cache.problem_key("G|d|v", *problem(m=255)), tune_cache.problem_key("G2|d|v", a, b, c)}
    assert len(other) == 4


def test_a_new_tune_of_the_step_replaces_its_pick_and_another_steps_pick_stays_only_if_further_ahead(cache):
    a, b, c = problem()
    assert tune_cache.lookup(a, b, c) is None
    key = tune_cache.problem_key(tune_cache.gpu_identity(a.device), a, b, c)
    first = {"step": STEP, "config": {"tile_n": 128, "group_m": 4}, "ms": 0.2, "ratio": 1.01}
    tune_cache.store(key, first)
    assert tune_cache.lookup(a, b, c) == first
    again = dict(first, config={"epi_n": 64}, ms=0.21, ratio=0.99)  # a later run of the same step: it replaces
    tune_cache.store(key, again)
    assert tune_cache.lookup(a, b, c) == again
    tune_cache.store(key, dict(again, step="gemm11_pingpong", config={}, ms=0.1, ratio=0.98))  # behind in its own run
    assert tune_cache.lookup(a, b, c) == again
    ahead = dict(again, step="gemm11_pingpong", config={}, ms=0.3, ratio=1.02)  # slower ms, but ahead of torch
    tune_cache.store(key, ahead)
    assert tune_cache.lookup(a, b, c) == ahead
    assert json.loads(cache.read_text())[key]["step"] == "gemm11_pingpong"


def test_an_entry_the_step_no_longer_takes_is_ignored_and_a_damaged_cache_warns_and_is_ignored(cache):
    a, b, c = problem()
    key = tune_cache.problem_key(tune_cache.gpu_identity(a.device), a, b, c)
    tune_cache.store(key, {"step": STEP, "config": {"no_such_field": 1}, "ms": 0.2, "ratio": 1.0})
    assert tune_cache.lookup(a, b, c) is None
    cache.write_text("{not json")
    with pytest.warns(UserWarning, match=r"tune.json is unreadable .*Delete it \(rm .*tune.json\) and tune again"):
        assert tune_cache.lookup(a, b, c) is None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        tune_cache.store(key, {"step": STEP, "config": {}, "ms": 0.2, "ratio": 1.0})  # rewrites it whole
    assert tune_cache.lookup(a, b, c)["config"] == {}


@pytest.mark.parametrize("kwargs, match", [
    (dict(shape=(4096, 4096)), r"shape=\(4096, 4096\): give \(M, N, K\), three positive ints"),
    (dict(shape=(4096, 0, 4096)), r"shape=\(4096, 0, 4096\)"),
    (dict(shape=(64, 64, 64), dtype="float32"), r"dtype='float32': the tuner times float16 or bfloat16"),
    (dict(shape=(64, 64, 64), search="random"), r"search='random': pick one of coordinate, exhaustive"),
])
def test_bad_arguments_are_refused_by_name(kwargs, match):
    with pytest.raises(ValueError, match=match):
        tuning.tune(**kwargs)


def test_without_a_gpu_tuning_says_where_to_run_it():
    if torch.cuda.is_available():
        pytest.skip("a GPU is here: tests/gpu/test_tuning_gpu.py tunes")
    with pytest.raises(ValueError, match=r"none is visible here: run it on a machine with an sm_80\+ GPU"):
        tuning.tune((64, 64, 64))


def test_every_space_names_only_fields_of_its_steps_config_and_holds_the_default():
    for step, space in tuning.SPACES.items():
        config = __import__(f"cutecourse.kernels.gemm.{step}", fromlist=["Config"]).Config()
        for names, values in space.items():
            fields = names.split(",")
            assert all(f in type(config).__dataclass_fields__ for f in fields), (step, names)
            current = tuple(getattr(config, f) for f in fields)
            assert (current if len(fields) > 1 else current[0]) in values, (step, names)  # the search starts there
        assert len(list(itertools.product(*space.values()))) <= 24


def test_the_steps_from_5_to_11_each_have_a_space():
    assert list(tuning.SPACES) == list(GEMM_STEPS[4:])


@pytest.mark.parametrize("step", list(tuning.SPACES))
def test_every_value_of_a_space_is_taken_by_its_config_and_every_candidate_fits_an_h200(step):
    """No value of a field is refused in every combination (it would only cost compiles), and every Config of the
    exhaustive sweep fits the sm_90 shared memory with the tuner's 16-bit operands and C."""
    space = tuning.SPACES[step]
    default = importlib.import_module(f"cutecourse.kernels.gemm.{step}").Config()
    every = tuning.candidates(step, space, default, list(space))
    for names, values in space.items():
        fields = names.split(",")
        taken = {tuple(getattr(c, f) for f in fields) for c in every}
        assert taken == {v if len(fields) > 1 else (v,) for v in values}, (step, names)
    for dtype in ("float16", "bfloat16"):
        assert all(budget.fits(step, c, dtype, dtype, 90) for c in every), step


@pytest.mark.parametrize("step", list(tuning.SPACES))
def test_coordinate_descent_finds_the_best_of_each_steps_space_where_the_fields_are_separable(step):
    """A made-up cost with one term per field (a value's position in the field, rotated so that its last value is
    the cheapest): from the step's default, the descent reaches the sweep's best with fewer Configs."""
    space = tuning.SPACES[step]
    default = importlib.import_module(f"cutecourse.kernels.gemm.{step}").Config()

    def separable(config):
        total = 0.0
        for names, values in space.items():
            fields = names.split(",")
            value = tuple(getattr(config, f) for f in fields)
            position = [v if len(fields) > 1 else (v,) for v in values].index(value)
            total += 0.01 * ((position + 1) % len(values))
        return 1.0 + total

    every = tuning.candidates(step, space, default, list(space))
    timer = Timer(cost_of=separable)
    assert separable(tuning.coordinate(space, default, step, timer)) == min(map(separable, every))
    assert len(timer.ms) < len(every)


def test_tune_checks_each_config_once_retimes_the_incumbent_and_takes_its_ratio_from_the_same_rounds(cache,
                                                                                                    monkeypatch):
    """tune()'s bookkeeping with the GPU parts replaced: `cost` is each Config's time, torch.matmul's time drifts
    from round set to round set (the clock follows the power draw), and the stored ratio must use the drift of the
    rounds where the pick was last timed."""
    from cutecourse import bench

    checked, rounds_sets = [], []

    def fake_checked(name, gemm, config, a, b, c, say):
        checked.append(config)
        return lambda i: None

    def fake_rounds(kernels, rounds, settle_ms, clocks):
        drift = 1 + 0.1 * len(rounds_sets)  # each round set runs at another clock
        rounds_sets.append(list(kernels))
        times = {name: [(1.0 if name == "torch.matmul" else cost(name)) * drift] for name in kernels}
        return times, {name: [] for name in kernels}

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(bench, "operands", lambda m, n, k, dtype, majors: problem(m, n, k))
    monkeypatch.setattr(bench, "checked", fake_checked)
    monkeypatch.setattr(bench, "settled_rounds", fake_rounds)
    monkeypatch.setattr(bench, "Clocks", lambda: type("NoClocks", (), {"close": lambda self: None})())
    tuned = tuning.tune((256, 512, 128), step=STEP, say=lambda line: None)
    every = tuning.candidates(STEP, SPACE, DEFAULT, list(SPACE))
    assert tuned.best == min(every, key=cost)
    assert len(checked) == len(set(checked)) == len(tuned.timed)  # each Config checked once, however often timed
    last = max(i for i, names in enumerate(rounds_sets) if tuned.best in names)
    assert tuned.ratio == pytest.approx(1 / cost(tuned.best))  # both times carry the same round set's drift
    assert tuned.baseline_ms == pytest.approx(1 + 0.1 * last)
    assert all(names[0] == "torch.matmul" for names in rounds_sets)
    stored = tune_cache.lookup(*problem(256, 512, 128))
    assert stored["ratio"] == pytest.approx(tuned.ratio) and stored["step"] == STEP
