"""``cutecourse.tune``: search a GEMM step's Configs on this GPU, keep the fastest that is right, and remember it.

The search space of a step is a few values for each Config field that matters (`SPACES`: the CTA tile, pipeline
stages, the cluster, the raster group, the epilogue subtile). The product of them is the exhaustive sweep
(``search="exhaustive"``). The default search is coordinate descent: it starts from the step's default Config and,
one field at a time, times every value of that field with the others fixed, keeps the fastest, and passes over the
fields again until a pass changes nothing. A pass compiles at most the sum of the fields' sizes (9 for step 10's
space) instead of their product (24), and finds the best where the fields' effects are nearly separable: how close
it comes on the H200 is in benchmarks/RESULTS.md (the two searches of the same space, side by side).

Every candidate runs once into a NaN-filled output and is checked against float64 torch (`cutecourse.bench.checked`);
a wrong or refused Config is skipped and reported. The candidates of a field are timed together, with torch.matmul,
in `cutecourse.bench.settled_rounds` (settled and interleaved: the H200's clock follows its power draw).

The pick is stored in the tuner's cache (`cutecourse.tune_cache`), keyed by the GPU, its driver, the DSL version and
the problem; `cutecourse.gemm` uses it for that problem on that GPU.
"""

from __future__ import annotations

import importlib
import itertools
import math
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from cutecourse import tune_cache
from cutecourse.dispatch import changes

#: step -> {Config field (or "f1,f2" for fields that move together): the values searched}.
#: Small enough that the exhaustive sweep of a space (the product: at most 24 Configs) runs in minutes, so that the two
#: searches can be compared on a GPU (benchmarks/tune.py). Each value is one the step's Config takes, and every
#: Config of a space fits an H100/H200's shared memory with 16-bit operands and C (the tuner's problems): steps 5-8
#: with their stages given (4 stages of a 384-row tile of tile_k 64 are 192 KiB of the 227), steps 9-11 with
#: stages=0, as many as fit beside their epilogue buffers. Steps 6-8 search step 5's fields (the tile, stages, the
#: raster, tile_k; steps 7 and 8 keep two warpgroups on every tile); step 9 its tile, tile_k and raster group.
SPACES: dict[str, dict[str, tuple[Any, ...]]] = {
    "gemm05_swizzle": {"tile_m,warps_m": ((128, 2), (256, 4)), "stages": (3, 4), "raster": (1, 8, 16),
                       "tile_k": (32, 64)},
    "gemm06_tma": {"tile_m,warps_m": ((128, 2), (256, 4)), "stages": (3, 4), "raster": (1, 8, 16),
                   "tile_k": (32, 64)},
    "gemm07_wgmma": {"tile_m,tile_n": ((256, 128), (128, 256), (128, 128)), "stages": (3, 4), "raster": (1, 8),
                     "tile_k": (32, 64)},
    "gemm08_warpspecialized": {"tile_m,tile_n": ((256, 128), (128, 256), (128, 128)), "stages": (3, 4),
                               "raster": (1, 8), "tile_k": (32, 64)},
    "gemm09_persistent": {"tile_m,tile_n": ((128, 256), (256, 128), (128, 128)), "group_m": (4, 8, 16),
                          "tile_k": (32, 64)},
    "gemm10_multicast": {"tile_m,tile_n": ((128, 256), (256, 128)), "cluster_m,cluster_n": ((2, 1), (1, 2), (1, 1)),
                         "group_m": (4, 8), "epi_n": (32, 64)},
    "gemm11_pingpong": {"tile_m,tile_n": ((128, 128), (64, 256)), "cluster_m,cluster_n": ((2, 1), (1, 2), (1, 1)),
                        "group_m": (4, 8), "epi_n": (32, 64)},
}
SEARCHES = ("coordinate", "exhaustive")


@dataclass
class Tuned:
    """What `tune` found: the step, its fastest right Config and its ms, torch.matmul's ms in the rounds where that
    Config was last timed, every Config timed (ms, None where it failed or was refused), and the cache key it was
    stored under."""

    step: str
    best: Any
    ms: float
    baseline_ms: float
    timed: list[tuple[Any, float | None]] = field(default_factory=list)
    key: str = ""

    @property
    def ratio(self) -> float:
        return self.baseline_ms / self.ms

    def __str__(self) -> str:
        right = sorted((t for t in self.timed if t[1] is not None), key=lambda t: t[1])
        lines = [f"{self.step}: {len(self.timed)} configs tried, {len(right)} right; best {self.ms:.4f} ms, "
                 f"{self.ratio:.3f}× torch.matmul ({self.baseline_ms:.4f} ms)"]
        lines += [f"  {ms:.4f} ms  {changes(self.step, config) or 'default'}" for config, ms in right[:5]]
        return "\n".join(lines)


def candidates(step: str, space: dict[str, tuple[Any, ...]], base: Any, fields: list[str]) -> list[Any]:
    """Configs of `step` that set each of `fields` to each of its values in `space` (their product), the other fields
    as in `base`; combinations the Config refuses are left out."""
    out = []
    for values in itertools.product(*(space[f] for f in fields)):
        changes_: dict[str, Any] = {}
        for names, value in zip(fields, values):
            parts = names.split(",")
            changes_.update(zip(parts, value if len(parts) > 1 else (value,)))
        try:
            out.append(replace(base, **changes_))
        except ValueError:  # e.g. a tile with more accumulators than a thread holds
            continue
    return list(dict.fromkeys(out))


def fastest(configs: list[Any], time: Callable[[list[Any]], dict[Any, float | None]]) -> Any:
    """The fastest right Config of `configs` (None if none ran right); `time(configs)` times them in the same rounds
    and returns the ms of every Config timed so far (None: wrong or refused)."""
    ms = time(configs)
    right = [config for config in configs if ms.get(config) is not None]
    return min(right, key=lambda config: ms[config]) if right else None


def coordinate(space: dict[str, tuple[Any, ...]], start: Any, step: str,
               time: Callable[[list[Any]], dict[Any, float | None]]) -> Any:
    """Coordinate descent from `start` (this module's docstring): for each field of `space` in turn, the fastest of
    its values with the other fields as the best so far; passes over the fields until one changes nothing."""
    best = fastest([start], time) or start
    for _ in range(len(space)):  # passes; each one that changes something needs another
        before = best
        for names in space:
            best = fastest([best, *candidates(step, space, best, [names])], time) or best
        if best == before:
            break
    return best


def tune(shape: tuple[int, int, int], dtype: str = "bfloat16", *, step: str | None = None,
         space: dict[str, tuple[Any, ...]] | None = None, majors: tuple[str, str] = ("k", "k"),
         search: str = "coordinate", rounds: int = 3, settle_ms: float = 300.0, cache: bool = True,
         say: Callable[[str], object] | None = None) -> Tuned:
    """Tune ``a @ b`` of `shape` (M, N, K) in `dtype` on this GPU: the step `cutecourse.gemm` would run (or `step`),
    over `space` (default `SPACES[step]`), by `search` ("coordinate" or "exhaustive"); store the pick when `cache`.
    A tqdm bar counts the Configs compiled and checked; `say` gets one line per Config (default: the bar's write)."""
    import torch
    from tqdm import tqdm

    from cutecourse import bench, dispatch

    if (not isinstance(shape, (tuple, list)) or len(shape) != 3
            or not all(isinstance(x, int) and not isinstance(x, bool) and x > 0 for x in shape)):
        raise ValueError(f"shape={shape!r}: give (M, N, K), three positive ints, e.g. (4096, 4096, 4096)")
    if dtype not in ("float16", "bfloat16"):
        raise ValueError(f"dtype={dtype!r}: the tuner times float16 or bfloat16 GEMMs")
    if search not in SEARCHES:
        raise ValueError(f"search={search!r}: pick one of {', '.join(SEARCHES)}")
    if not torch.cuda.is_available():
        raise ValueError("tuning times kernels on a GPU and none is visible here: run it on a machine with an sm_80+ "
                         "GPU (nvidia-smi lists it), e.g. Colab with a GPU runtime")
    m, n, k = shape
    a, b, c = bench.operands(m, n, k, dtype, majors=majors)
    step = step or dispatch.explain(a, b, c).step
    if step not in SPACES:
        raise ValueError(f"step={step!r}: the tuner searches {', '.join(SPACES)}; pass one of them")
    space = SPACES[step] if space is None else space
    unknown = [f for names in space for f in names.split(",") if f not in
               importlib.import_module(f"cutecourse.kernels.gemm.{step}").Config.__dataclass_fields__]
    if unknown:
        raise ValueError(f"space names {', '.join(unknown)}, which {step}.Config does not have")
    launcher = importlib.import_module(f"cutecourse.kernels.gemm.{step}").gemm
    default = launcher.default
    timed: dict[Any, float | None] = {}
    baseline: dict[Any, float] = {}  # Config -> torch.matmul's ms in the rounds where it was last timed
    runs: dict[Any, Callable[[int], object]] = {}  # Config -> its launch, checked once
    progress = tqdm(desc=f"tuning {step} {m}x{n}x{k} {dtype}", unit="config")
    say = say or progress.write
    clocks = bench.Clocks()

    def time_all(configs: list[Any]) -> dict[Any, float | None]:
        # Every Config asked for is timed again in these rounds, the incumbent too: only times from the same rounds
        # compare (the clock drifts with the power draw between rounds).
        for config in dict.fromkeys(configs):
            if config in timed:
                continue  # checked already: right (its launch is in runs) or wrong
            progress.update()
            try:
                runs[config] = bench.checked(f"{step}({changes(step, config) or 'default'})", launcher, config,
                                             a, b, c, say=say)
            except (bench.WrongResult, ValueError) as exc:  # wrong, or refused by the launcher's checks
                say(f"skipped: {exc}")
            timed.setdefault(config, None)
        kernels = {"torch.matmul": lambda i: torch.matmul(a, b, out=c),
                   **{config: runs[config] for config in dict.fromkeys(configs) if config in runs}}
        if len(kernels) > 1:
            times, power = bench.settled_rounds(kernels, rounds, settle_ms, clocks)
            result = bench.summary(times, power, 2 * m * n * k)
            matmul = result.pop("torch.matmul")["ms"]
            timed.update({config: r["ms"] for config, r in result.items()})
            baseline.update({config: matmul for config in result})
        return timed

    try:
        if search == "exhaustive":
            every = candidates(step, space, default, list(space))
            progress.total = len(every)
            best = fastest(every, time_all)
        else:
            best = coordinate(space, default, step, time_all)
    finally:
        progress.close()
        clocks.close()
    if best is None or timed.get(best) is None:
        raise ValueError(f"no Config of {step} in the space ran right on {m}x{n}x{k} {dtype}: see the lines above")
    key = tune_cache.problem_key(tune_cache.gpu_identity(a.device), a, b, c)
    result = Tuned(step, best, timed[best], baseline[best], list(timed.items()), key)
    if cache:
        tune_cache.store(key, {"step": step, "config": asdict(best), "ms": result.ms, "ratio": result.ratio,
                    "search": search, "tried": len(timed)})
        dispatch.forget_plans()  # the dispatcher's remembered choices predate this pick
    return result


def measure_winners(shapes: list[tuple[int, int, int]], dtype: str = "bfloat16", *, fused: bool = False,
                    rounds: int = 3, settle_ms: float = 100.0, write: bool = True,
                    say: Callable[[str], object] | None = None) -> dict[str, dict[str, Any]]:
    """Race the candidates of `winners.races` on each of `shapes` (M, N, K) in `dtype` on this GPU, as
    ``nn.Linear`` multiplies (both operands K-major): each candidate checked against float64 torch (a wrong or
    refused one is skipped and said; swap-AB ones run only up to `winners.SWAP_AB_ROWS` rows: `winners.raced`), the
    right ones timed with their baseline in `cutecourse.bench.settled_rounds`. In float16 or bfloat16 the race times
    the plain product against torch.matmul, or with `fused` the epilogue GELU(x @ W.t() + bias) against cuBLASLt's
    fused one (``torch._addmm_activation``); in float8_e4m3fn, per-tensor scaled operands into a bfloat16 D against
    ``torch._scaled_mm``. Returns {shape class: the fastest's entry} and, when `write`, merges them into the shipped
    table (`winners.store`) under this GPU's arch and the race's key (`winners.key`); a class measured twice keeps
    the larger problem's winner."""
    import datetime

    import torch
    from tqdm import tqdm

    from cutecourse import bench
    from cutecourse.kernels.gemm import winners

    table_key = winners.key(dtype, fused)
    if not torch.cuda.is_available():
        raise ValueError("measuring winners times kernels on a GPU and none is visible here: run it where nvidia-smi "
                         "lists an sm_90 GPU (an H100 or H200; a Modal H100: README, 'Where to run it')")
    major, minor = torch.cuda.get_device_capability()
    if (major, minor) != (9, 0):
        raise ValueError(f"this GPU is sm_{major}{minor}; the winners' candidates are the Hopper steps (sm_90)")
    found: dict[str, dict[str, Any]] = {}
    clocks = bench.Clocks()
    candidates = winners.races(table_key)
    bar = tqdm(shapes, desc=f"racing {len(candidates)} configs, {table_key}", unit="shape")
    say = say or bar.write
    baseline = winners.BASELINES[winners.kind(table_key)]
    try:
        for m, n, k in bar:
            a, b, c, base, kwargs, judge = _race_problem(m, n, k, table_key)
            kernels: dict[Any, Callable[[int], object]] = {baseline: base}
            for step, fields in candidates:
                if not winners.raced(fields, m):
                    continue
                module = importlib.import_module(f"cutecourse.kernels.gemm.{step}")
                config = module.Config(**fields)

                def run(a: Any, b: Any, c: Any, config: Any, gemm: Any = module.gemm, kwargs: Any = kwargs) -> Any:
                    return gemm(a, b, c, config, **kwargs)

                try:
                    kernels[(step, config)] = bench.checked(f"{m}x{n}x{k} {step}({changes(step, config) or 'default'})",
                                                            run, config, a, b, c, say=lambda line: None, judge=judge)
                except (bench.WrongResult, ValueError) as exc:
                    say(f"{m}x{n}x{k}: skipped {step}({changes(step, config)}): {exc}")
            torch.cuda.empty_cache()  # the float64 reference is gone; its memory need not stay reserved
            times, power = bench.settled_rounds(kernels, rounds, settle_ms, clocks)
            result = bench.summary(times, power, 2 * m * n * k, base=baseline)
            matched = result.pop(baseline)
            ranked = sorted(result.items(), key=lambda item: -item[1]["ratio"])
            for (step, config), timed in ranked:
                say(f"  {step}({changes(step, config) or 'default'}) {timed['ratio']:.3f}x")
            (step, config), best = ranked[0]
            cls = winners.shape_class(m, n, k)
            entry = {"step": step, "config": asdict(config), "shape": [m, n, k], "raced": len(result),
                     "ms": round(best["ms"], 5),
                     "ratio": round(best["ratio"], 3), "baseline_ms": round(matched["ms"], 5),
                     "gpu": tune_cache.gpu_identity(a.device), "date": datetime.date.today().isoformat()}
            say(f"{m}x{n}x{k} ({cls}, {table_key}): {step}({changes(step, config) or 'default'}) "
                f"{best['ratio']:.3f}x {baseline}")
            if cls not in found or math.prod(found[cls]["shape"]) < m * n * k:
                found[cls] = entry
    finally:
        bar.close()
        clocks.close()
    if write:
        winners.store(f"sm_{major}{minor}", table_key, found)
    return found


def _race_problem(m: int, n: int, k: int, table_key: str) -> tuple[Any, Any, Any, Callable[[int], object],
                                                                   dict[str, Any], Callable[[Any], str | None]]:
    """One problem of a race of `table_key` on the GPU: (A, B K-major, D, the baseline's launch fn(i), the keyword
    arguments a candidate's launcher gets, the judge of D against float64 torch)."""
    import torch

    from cutecourse import bench
    from cutecourse.kernels.gemm import epilogue, tolerances, winners

    what = winners.kind(table_key)
    if what == "fp8":
        a, b, c, sa, sb, ref = bench.fp8_operands(m, n, k)
        scale_a, scale_b = (torch.tensor(s, device="cuda", dtype=torch.float32) for s in (sa, sb))

        def scaled(i: int) -> Any:
            return torch._scaled_mm(a, b, scale_a, scale_b, out_dtype=torch.bfloat16, out=c)

        return a, b, c, scaled, {"alpha": sa * sb}, lambda out: tolerances.within_epilogue_bounds(
            out, ref, ref, precision=tolerances.FP8_PRECISION)
    a, b, c = bench.operands(m, n, k, table_key.removesuffix(winners.FUSED_SUFFIX), majors=("k", "k"))
    if what == "plain":
        return a, b, c, lambda i: torch.matmul(a, b, out=c), {}, lambda out: tolerances.within_bounds(out, a, b)
    bias = torch.randn(n, device="cuda", dtype=a.dtype)
    gelu = epilogue.Epilogue("gelu_tanh", bias="n")
    d_ref, x_ref = epilogue.reference(a.double() @ b.double(), gelu, bias=bias)

    def fused(i: int) -> Any:
        return torch._addmm_activation(bias, a, b, use_gelu=True, out=c)

    return a, b, c, fused, {"epilogue": gelu, "bias": bias}, lambda out: tolerances.within_epilogue_bounds(
        out, d_ref, x_ref, "gelu_tanh")
