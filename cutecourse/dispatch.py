"""``cutecourse.gemm``: one entry point over the GEMM ladder, which picks the step for the GPU, the shape, the majors
and the alignment, and says why (``cutecourse.gemm.explain``).

The rules, in order (lesson 8 explains each; `Choice.reasons` names the ones that decided):

1. A and B are float16 or bfloat16, or fp8 (e4m3, e5m2) on sm_90 with both K-major; anything else is refused and
   the error names torch's kernel for it (``torch.matmul``, ``torch._scaled_mm``).
2. The GPU is sm_80 or newer: cp.async, ldmatrix and mma.sync m16n8k16 first exist there. Before (sm_75 Turing,
   sm_70 Volta) every step is refused, naming ``torch.matmul``.
3. Every vector step moves 16 bytes at a time, so each operand's contiguous extent and leading dimension must hold
   whole vectors and its base be 16-byte aligned (a padded leading dimension, ``a = wide[:, :K]``, is no reason to
   leave the vector steps: it is only another stride). Where that fails, step 2 (`gemm02_smem`, scalar loads, any
   shape, stride and alignment) runs; it stores ``a @ b`` only, so with an epilogue its product goes to a float32
   buffer and torch computes the epilogue from it (`epilogue.store`): slower, never refused.
4. sm_90 (H100, H200) runs the Hopper path: step 11 (pingpong) where the problem has fewer tiles of step 10's
   128 × 256 than the GPU has SMs, since its 128 × 128 tiles keep twice as many SMs busy; else step 10 (cooperative,
   clusters, multicast), the faster one on full waves (benchmarks/RESULTS.md: 0.98-1.03× torch.matmul against
   0.96-1.00× at 4096³ and 8192³). On four small and skinny problems the H200 ran the step this rule picks faster on
   three; at 128 tiles, just under a wave, step 10 was 3% faster (benchmarks/RESULTS.md, 2026-12-02, where the
   ladder had ten steps and these two were steps 9 and 10). Rule 6 is how a measurement overrides it.
   Split-K: where even step 11's 128 × 128 tiles leave at least half the SMs idle and K is long, each tile's k-tiles
   are split S ways (`cutecourse.kernels.gemm.splitk`): S the largest that fits the idle SMs (S · tiles ≤ SMs),
   leaves every split at least 4 k-tiles and is at most 8; the float32 partial tiles go to a workspace and a second
   kernel sums them in order (bitwise reproducible) and applies the epilogue. A problem of one tile row (M ≤ 128)
   pairs its CTAs along N (cluster 1 × 2), so that no CTA of a cluster idles on a tile below the matrix.
5. Other archs from sm_80 (sm_80/86/89, and sm_100/120, where mma.sync still runs but wgmma does not: it is sm_90a
   only) run step 5 (`gemm05_swizzle`), the SM80 path, with the first of its Configs whose shared memory fits the
   arch's CTA (`budget`): the default's 144 KiB on sm_80 and sm_100, 96 KiB on sm_86, sm_89 and sm_120 (99 KiB).
   Every Config chosen, given or tuned is checked against the arch's limit (`hw.ARCH_LIMITS`).
6. Where `cutecourse.tune` has stored a config for this GPU, driver, DSL version and problem, that config (and its
   step) is used instead: measured beats modelled. Else, on sm_90, where the shipped table of measured winners
   (`cutecourse.kernels.gemm.winners`) has the problem's shape class, its winner runs: for a call with an
   epilogue the fused race's winner (bias + GELU against cuBLASLt's fused epilogue) where that race measured the
   class, else the plain product's; for fp8 e4m3 the fp8 race's (against ``torch._scaled_mm``).
7. The decode GEMV (`cutecourse.kernels.gemm.gemv`): where nothing was measured for the problem's class, M is at
   most `GEMV_ROWS` and b is K-major (``x @ W.t()`` with W as ``nn.Linear`` stores it), on any arch from sm_80. A
   product of so few rows reads each weight once for a few FMAs: it runs at the memory's bandwidth, which warps
   streaming W with 16-byte loads from every SM reach, and a Tensor Core tile of 64 rows would mostly compute
   nothing. The winners race includes it (``("gemv", {})`` in `winners.CANDIDATES`), and on sm_90 the shipped
   table names it for every M = 1 class it measured (benchmarks/RESULTS.md). Swap-AB (step 11's
   ``Config(swap_ab=True)``: Dᵀ = Bᵀ·Aᵀ, a few rows of x on wgmma's N) runs only where the table names it: the race
   tries it up to `winners.SWAP_AB_ROWS` rows, and it won every M = 16 class.

A K that is no multiple of the chosen step's k-tile needs no other step: every step zero-fills its last, partial
k-tile, and the choice's reasons say so. ``explain`` needs no GPU: on CPU tensors give ``arch=`` (90, 80, ...)
and, for the Hopper rule, ``sms=``.
"""

from __future__ import annotations

import importlib
import math
from dataclasses import asdict, dataclass, replace
from typing import Any

from cutecourse import tune_cache
from cutecourse.kernels.gemm import GEMM_STEPS, KERNELS, budget, winners
from cutecourse.kernels.gemm.plans import Plans

ANY_SHAPE = "gemm02_smem"
SM80 = "gemm05_swizzle"
COOPERATIVE = "gemm10_multicast"
PINGPONG = "gemm11_pingpong"
GEMV = "gemv"
#: Rule 7: the most rows of a the model sends to the GEMV (M FMAs per weight read: at M = 4 still far below what the
#: SMs' FMA units do at the memory's bandwidth).
GEMV_ROWS = 4
#: Split-K (rule 4): the most splits the model picks, and the fewest k-tiles it leaves a split.
MAX_SPLITS = 8
MIN_SPLIT_K_TILES = 4
#: Steps that fuse an epilogue (``epilogue=``, ``bias=``, ``c=`` with ``beta``, ``aux=``, ``alpha``): every step from
#: 5 on.
FUSING = GEMM_STEPS[GEMM_STEPS.index(SM80):]


@dataclass(frozen=True)
class Choice:
    """What `explain` picked: the step (its module name), the Config it runs with, why, and whether the config came
    from the tuner's cache."""

    step: str
    config: Any
    reasons: tuple[str, ...]
    tuned: bool = False

    def __str__(self) -> str:
        return "\n".join([f"{self.step}  {self.config}", *(f"  - {reason}" for reason in self.reasons)])


def _module(step: str) -> Any:
    return importlib.import_module(f"cutecourse.kernels.gemm.{step}")


def _arch(a: Any, arch: Any) -> int:
    from cutecourse.kernels.gemm import operands

    if arch is not None:
        if isinstance(arch, bool) or not isinstance(arch, int) or not 10 <= arch < 1000:
            raise ValueError(f"arch={arch!r}: give the compute capability as an int, major * 10 + minor: 90 for an "
                             "H100 or H200, 80 for an A100, 89 for an L4, 75 for a T4")
        return arch
    if a.is_cuda:
        return operands.capability(a.device)
    raise ValueError(f"a is on {a.device}, so no GPU says which arch to choose for: pass arch= (e.g. "
                     "cutecourse.gemm.explain(a, b, arch=90)), or move the operands to the GPU (a = a.cuda())")


def _step_of(config: Any) -> str:
    for step in KERNELS:
        if type(config) is _module(step).Config:
            return step
    raise ValueError(f"config={config!r}: pass a GEMM step's Config, e.g. "
                     "cutecourse.kernels.gemm.gemm10_multicast.Config(tile_n=128), or None to let the dispatcher "
                     "choose")


def explain(a: Any, b: Any, out: Any = None, *, epilogue: Any = None, config: Any = None, arch: int | None = None,
            sms: int | None = None, fused: bool | None = None) -> Choice:
    """The step (and Config) `cutecourse.gemm(a, b, out, ...)` runs, and why. `fused`: the call asks for an epilogue
    (a bias, ``beta · C``, ``alpha``, aux); by default, whether `epilogue` is given. Raises ValueError naming the
    fallback where no step fits."""
    import torch

    from cutecourse.kernels import launch
    from cutecourse.kernels.gemm import operands

    for name, t in (("a", a), ("b", b)):
        operands.tensor_check(name, t)
        if t.dim() != 2:
            raise ValueError(f"{name} must be a 2-D torch.Tensor, got shape {tuple(t.shape)}: pass a matrix, e.g. "
                             f"{name}.reshape(-1, {name}.shape[-1])")
    if out is not None:
        operands.tensor_check("out", out)
    ab = launch.dtype_name(a)
    if ab not in operands.AB_DTYPES + operands.FP8_DTYPES:
        raise ValueError(f"a has dtype {a.dtype}, which no GEMM step takes (float16, bfloat16, or fp8 on sm_90): "
                         f"use torch.matmul(a, b), or a = a.to(torch.bfloat16)")
    fp8 = ab in operands.FP8_DTYPES
    fused = epilogue is not None if fused is None else fused
    cc = _arch(a, arch)
    if cc < 80:
        raise ValueError(f"this GPU is sm_{cc}; every GEMM step needs sm_80 or newer (cp.async, ldmatrix, mma.sync "
                         "m16n8k16): use torch.matmul(a, b)")
    if fp8 and cc != 90:
        raise ValueError(f"a is {a.dtype}; the fp8 steps use wgmma, which only sm_90 has, and this is sm_{cc}: use "
                         "torch._scaled_mm, or dequantize (cutecourse.kernels.gemm.fp8.dequantize) and torch.matmul")
    if out is None:  # a stand-in for the checks: no memory, address 0 (aligned)
        out = torch.empty(a.shape[0], b.shape[1], device="meta",
                          dtype=torch.bfloat16 if fp8 else a.dtype)
    try:  # shapes, dtypes, strides (and fp8's majors): what no step can take
        ops = operands.traits(a, b, out, step="cutecourse.gemm", vector=False, fp8=fp8, out="out")
    except ValueError as exc:
        raise ValueError(f"{exc}; or use torch._scaled_mm") if fp8 else exc from None
    reasons = [f"sm_{cc}, {ab} operands"]
    if config is not None:
        step = _step_of(config)
        launcher = _module(step).gemm
        if launcher.min_cc > cc:
            raise ValueError(f"config is a {step}.Config, which needs sm_{launcher.min_cc}; this is sm_{cc}: pass "
                             f"a {SM80}.Config, or None to let the dispatcher choose")
        operands.traits(a, b, out, step=step, vector=launcher.vector, fp8=launcher.fp8, out="out")
        budget.check(step, config, ops.ab, ops.c, cc)
        return Choice(step, config, (*reasons, f"config is a {step}.Config: that step"))
    try:
        vectors = operands.traits(a, b, out, step="every vector step", vector=True, fp8=fp8, out="out")
    except ValueError as exc:
        if fp8:
            raise ValueError(f"{exc}; or use torch._scaled_mm") from None
        why = str(exc).split(":")[0]  # the condition that failed, without the way out
        reason = f"no 16-byte vectors: {why}; {ANY_SHAPE} loads scalars, any shape, stride and alignment"
        if fused:
            reason += (", and stores a @ b only: its float32 product goes to a buffer and torch computes the "
                       "epilogue from it")
        return Choice(ANY_SHAPE, _module(ANY_SHAPE).Config(), (*reasons, reason))
    reasons.append("16-byte vectors fit every operand")
    tuned = _tuned(a, b, out, cc, ops)
    if tuned is not None:
        return tuned
    hopper = "sm_90: the Hopper path (TMA, wgmma, warp specialization)"
    measured = None if cc != 90 else _measured(a, b, cc, ab, ops, fused)
    if measured is not None:
        return Choice(measured[0], measured[1], (*reasons, hopper, measured[2], *_k_tail(a.shape[1], measured[1])))
    if not fp8 and a.shape[0] <= GEMV_ROWS and vectors.b_major == "k":
        config = _module(GEMV).Config()
        return Choice(GEMV, config, (*reasons, f"M={a.shape[0]} ≤ {GEMV_ROWS} rows and b K-major: the decode GEMV, "
                                     "which streams W with 16-byte loads from every SM (a Tensor Core tile would "
                                     "compute mostly rows of nothing)"))
    if cc == 90:
        cooperative = _module(COOPERATIVE).Config()  # its tile is what the rule counts; its sms, an H100's or H200's
        count = _sms(a, sms, cooperative.sms)
        tiles = math.ceil(a.shape[0] / cooperative.tile_m) * math.ceil(b.shape[1] / cooperative.tile_n)
        tile = f"{cooperative.tile_m}×{cooperative.tile_n}"
        step = PINGPONG if tiles < count else COOPERATIVE
        pingpong = _module(PINGPONG).Config()
        verdict = (f"{tiles} tiles of {tile} < {count} SMs: pingpong's {pingpong.tile_m}×{pingpong.tile_n} tiles keep "
                   "more SMs busy"
                   if step == PINGPONG else f"{tiles} tiles of {tile} fill {count} SMs: the cooperative "
                   "schedule")
        module = _module(step)
        config = module.FP8_CONFIG if fp8 else module.Config()
        split = ()
        if step == PINGPONG and not fp8:
            config, split = _split_k(a.shape[0], b.shape[1], a.shape[1], config, count)
        budget.check(step, config, ops.ab, ops.c, cc)
        unmeasured = (f"no winner measured for {winners.shape_class(a.shape[0], b.shape[1], a.shape[1])} on sm_90 "
                      f"in {ab} ({winners.TABLE.name}): the model decides")
        return Choice(step, config, (*reasons, hopper, unmeasured, verdict, *split, *_k_tail(a.shape[1], config)))
    where = "wgmma is sm_90a only, mma.sync runs on every arch from sm_80" if cc > 90 else "the SM80 path"
    configs = _sm80_configs()
    config = budget.fitting(SM80, configs, ops.ab, ops.c, cc)
    room = ()
    if config != configs[0]:
        arch, limits = budget.arch_limits(cc)
        room = (f"{arch} allows {limits.smem_per_block_max // 1024} KiB of shared memory per CTA: the default's "
                f"{budget.smem_bytes(SM80, configs[0], ops.ab, ops.c) // 1024} KiB do not fit, "
                f"{budget.smem_bytes(SM80, config, ops.ab, ops.c) // 1024} KiB do",)
    return Choice(SM80, config, (*reasons, f"sm_{cc}: {where} (cp.async, ldmatrix, mma.sync)", *room,
                                 *_k_tail(a.shape[1], config)))


def _measured(a: Any, b: Any, cc: int, ab: str, ops: Any, fused: bool) -> tuple[str, Any, str] | None:
    """The shipped table's winner for this problem's shape class (`winners`), as (step, Config, reason), if one was
    measured for this arch and dtype and it fits this GPU's shared memory: for a `fused` call the fused epilogue's
    race's winner first (`winners.key`), else the plain product's."""
    m, k = a.shape
    n = b.shape[1]
    if ab not in ("float16", "bfloat16", winners.FP8):
        return None  # no race measures it (fp8 e5m2)
    keys = [winners.key(ab, True), ab] if fused and ab != winners.FP8 else [ab]
    for key in keys:
        entry = winners.lookup(f"sm_{cc}", key, m, n, k)
        if entry is not None:
            break
    else:
        return None
    config = _module(entry["step"]).Config(**entry["config"])
    if not budget.fits(entry["step"], config, ops.ab, ops.c, cc):
        return None
    cls = winners.shape_class(m, n, k)
    picked = f"{entry['step']}({changes(entry['step'], config) or 'default'})"
    measured = f"{entry['gpu'].split('|')[0]}, {entry['date']}: {'x'.join(map(str, entry['shape']))}"
    race = {"plain": "", "fused": " with bias + GELU fused", "fp8": " in fp8"}[winners.kind(key)]
    unraced = (", as the plain product: no fused epilogue was raced on this class"
               if fused and winners.kind(key) == "plain" else "")
    reason = (f"measured: for {winners.describe(cls)} ({cls}), {picked} ran fastest{race} of {entry['raced']} "
              f"configs ({measured} at {entry['ratio']:.3f}× {winners.BASELINES[winners.kind(key)]}; "
              f"{winners.TABLE.name}){unraced}")
    return entry["step"], config, reason


def changes(step: str, config: Any) -> str:
    """`config`'s fields that differ from `step`'s default, as "tile_n=128,group_m=4" ("" for the default)."""
    default = _module(step).Config()
    return ",".join(f"{k}={v}" for k, v in asdict(config).items() if getattr(default, k) != v)


def _sm80_configs() -> tuple[Any, ...]:
    """The SM80 path's Configs, fastest first (benchmarks/RESULTS.md: the default on an H200), then smaller ones for
    the GPUs whose CTAs get 99 KiB of shared memory (sm_86, sm_89, sm_120): 128 × 128 × 64 in 3 stages (96 KiB), and
    128 × 128 × 32 in 4 (64 KiB)."""
    config = _module(SM80).Config
    return (config(), config(tile_m=128, warps_m=2, stages=3), config(tile_m=128, warps_m=2, tile_k=32, stages=4))


def _split_k(m: int, n: int, k: int, config: Any, sms: int) -> tuple[Any, tuple[str, ...]]:
    """Rule 4's split-K: step 11's `config` with ``splits`` (and the cluster) set, and the reason, where its tiles
    leave at least half of `sms` idle and every split keeps `MIN_SPLIT_K_TILES` k-tiles; else `config` unchanged
    and no reason."""
    tiles_m = math.ceil(m / config.tile_m)
    tiles_n = math.ceil(n / config.tile_n)
    tiles = tiles_m * tiles_n
    k_tiles = math.ceil(k / config.tile_k)
    splits = min(MAX_SPLITS, sms // tiles, k_tiles // MIN_SPLIT_K_TILES)
    if splits < 2:
        return config, ()
    # A cluster's two CTAs take neighbouring tiles; with an odd number of tile rows, one of a 2 × 1 pair would idle.
    if tiles_m % 2 == 0:
        cluster = (2, 1)
    elif tiles_n % 2 == 0:
        cluster = (1, 2)
    else:
        cluster = (1, 1)
    config = replace(config, splits=splits, cluster_m=cluster[0], cluster_n=cluster[1])
    shares = sorted({k_tiles // splits, math.ceil(k_tiles / splits)})
    reason = (f"{tiles} tiles of {config.tile_m}×{config.tile_n} on {sms} SMs, {k_tiles} k-tiles of {config.tile_k}: "
              f"split-K, {splits} splits of {' or '.join(map(str, shares))} k-tiles keep {tiles * splits} SMs busy "
              f"(cluster {cluster[0]}×{cluster[1]}); the float32 partial tiles go to a workspace, which a second "
              "kernel sums in order and runs the epilogue on")
    return config, (reason,)


def _k_tail(k: int, config: Any) -> tuple[str, ...]:
    """The reason a K tail adds, if any: the step takes it as it is."""
    if k % getattr(config, "tile_k", k) == 0:  # the GEMV has no k-tiles: its K is whole 16-byte vectors
        return ()
    return (f"K={k} = {k // config.tile_k} × {config.tile_k} + {k % config.tile_k}: the last k-tile is partial, and "
            "the step fills the rest of it with zeros",)


def _sms(a: Any, sms: int | None, default: int) -> int:
    """The SM count the Hopper rule uses: `sms`, else a's GPU's, else `default` (CPU tensors)."""
    import torch

    if sms is not None:
        if isinstance(sms, bool) or not isinstance(sms, int) or sms < 1:
            raise ValueError(f"sms={sms!r}: give the GPU's SM count, e.g. 132 for an H100 SXM or H200")
        return sms
    return torch.cuda.get_device_properties(a.device).multi_processor_count if a.is_cuda else default


def _tuned(a: Any, b: Any, out: Any, cc: int, ops: Any) -> Choice | None:
    """The tuner's stored pick for this problem on this GPU, if any (only on a GPU: the cache is keyed by it), and
    if it fits this GPU's shared memory."""
    if not a.is_cuda:
        return None
    entry = tune_cache.lookup(a, b, out)
    if entry is None or _module(entry["step"]).gemm.min_cc > cc:
        return None
    config = _module(entry["step"]).Config(**entry["config"])
    if not budget.fits(entry["step"], config, ops.ab, ops.c, cc):
        return None
    reason = (f"tuned on this GPU: {entry['ms']:.4f} ms, {entry['ratio']:.3f}× torch.matmul "
              f"({tune_cache.cache_file()})")
    return Choice(entry["step"], config, (f"sm_{cc}", reason), tuned=True)


#: The call's key (`launcher.call_key`, with the call's config, None where the dispatcher chooses) -> the step's
#: launcher and its plan for the call, or (None, the Choice) where step 2's product gets torch's epilogue (`_unfused`).
_plans = Plans()


def forget_plans() -> None:
    """Forget every choice remembered for a call, so that the next call chooses again: after what decides the
    choice changed (a new pick in the tuner's cache)."""
    _plans.clear()


def gemm(a: Any, b: Any, out: Any = None, *, epilogue: Any = None, config: Any = None, alpha: float = 1.0,
         beta: float = 0.0, c: Any = None, bias: Any = None, aux: Any = None) -> Any:
    """``out = act(alpha · a @ b + beta · c + bias)`` (the plain product without `epilogue`) on the step `explain`
    picks, and `out`. `out` defaults to a new (M, N) tensor of a's dtype (bfloat16 for fp8).

    A call like an earlier one (`launcher.call_key`) goes straight to the kernel the earlier one was planned with:
    one key and one lookup, then the step's TVM FFI call, where the dispatcher's choice and the step's own checks
    ran once."""
    from cutecourse.kernels.gemm import launcher, operands

    for name, t in (("a", a), ("b", b)):
        operands.tensor_check(name, t)
        if not t.is_cuda:
            raise ValueError(f"{name} is on {t.device}; cutecourse.gemm runs on the GPU: {name} = {name}.cuda() "
                             "(on a CPU, torch.matmul; cutecourse.gemm.explain(a, b, arch=90) says what a GPU "
                             "would run)")
    out = launcher.output(a, b) if out is None else out
    key = launcher.call_key(config, a, b, out, epilogue, alpha, beta, c, bias, aux)
    planned = _plans.get(key) if key is not None else None
    if planned is None:
        fused = epilogue is not None or c is not None or bias is not None or aux is not None or alpha != 1 or beta != 0
        choice = explain(a, b, out, epilogue=epilogue, config=config, fused=fused)
        if choice.step == ANY_SHAPE and fused:
            planned = (None, choice)
        else:
            step = _module(choice.step).gemm
            plan = step.plan(a, b, out, choice.config, epilogue, alpha, beta, c, bias, aux)
            if plan is None:  # nothing to launch (an empty problem), or K = 0: done
                return out
            planned = (step, plan)
        if key is not None:
            _plans.put(key, planned)
    step, plan = planned
    if step is None:
        return _unfused(plan, a, b, out, epilogue, alpha, beta, c, bias, aux)
    step.launch(plan, a, b, out, alpha, beta, c, bias, aux)
    return out


def _unfused(choice: Choice, a: Any, b: Any, out: Any, epilogue_: Any, alpha: float, beta: float, c: Any, bias: Any,
             aux: Any) -> Any:
    """An epilogue on operands only step 2 takes (rule 3): its product into a float32 buffer, then torch computes
    the epilogue from it into `out` (and `aux`)."""
    import torch

    from cutecourse.kernels.gemm import epilogue, operands

    fused = epilogue.plan(epilogue_, alpha, beta, c, bias, aux, out)  # checked before any work
    if fused.epilogue.aux:
        for name, t in (("a", a), ("b", b), ("out", out)):
            operands.overlap(name, t, "aux", aux)
    acc = _module(choice.step).gemm(a, b, torch.empty(out.shape, dtype=torch.float32, device=out.device),
                                    choice.config)
    epilogue.store(acc, fused, alpha, beta, c, bias, aux, out)
    return out


gemm.explain = explain  # type: ignore[attr-defined]
