"""Fused epilogues and fp8 against cuBLASLt (lesson 7), in one run on the same random-normal data.

    python benchmarks/epilogue.py [--dtypes bfloat16 float16 float8_e4m3fn] [--shapes 4096x4096x4096 8192x8192x8192]
                                  [--steps 11] [--fp8-steps 11] [--rounds 5] [--settle-ms 1000] [--csv epilogue.csv]
    python benchmarks/epilogue.py --steps 5 10 11 --variants 11:epi_n=64   # more steps, Config variants of a step

For each 16-bit dtype and shape, and each of the epilogues D = GELU(A·B + bias) (GELU's tanh approximation) and
D = ReLU(A·B + bias), the bias one value per column (torch's addmm bias; ``Epilogue(activation, bias="n")``), it times:

- unfused torch: ``torch.matmul(a, b, out=d)``, then ``d.add_(bias)``, then the activation in place: three kernels,
  D read and written twice more (the same passes as ``F.gelu(a @ b + bias, approximate="tanh")``);
- cuBLASLt's fused epilogue: ``torch._addmm_activation(bias, a, b, use_gelu=...)``, one kernel (the names of the
  kernels each torch baseline launches are printed, so a fallback to an unfused path shows);
- ours: each ``--steps`` step (and ``--variants``, as benchmarks/gemm.py takes them:
  cutecourse.bench.kernels_to_time) with that Epilogue;

beside ``torch.matmul`` alone (what the epilogue costs). For float8_e4m3fn, A and B are quantized per tensor
(cutecourse.kernels.gemm.fp8.quantize) and D is bfloat16: ours (each ``--fp8-steps`` step with its FP8_CONFIG and
alpha = sa·sb) against ``torch._scaled_mm`` (its default, which promotes the partial sums to fp32 as it goes, and
``use_fast_accum=True``, which keeps them in the Tensor Cores' accumulator throughout).

Every kernel first runs once into a NaN-filled D and is checked against float64 torch (the epilogue's
``reference``; for fp8, of the dequantized inputs) by ``tolerances.within_epilogue_bounds``, then the kernels of one
dtype and shape are timed in cutecourse.bench's settled, interleaved rounds (its docstring says why) and the median
round is reported. A ratio X / Y is Y's time over X's: above 1, X is faster. The goals (issue 19): ours / cuBLASLt
fused ≥ 1.0, the course's target ≥ 1.05, for both epilogues in both dtypes at 4096³ and 8192³; fp8 ours /
torch._scaled_mm ≥ 0.95. About 4 minutes on an H200 with the defaults.
"""

from __future__ import annotations

import argparse
import datetime
import importlib
from collections.abc import Callable
from typing import Any

from cutecourse.bench import checked, fp8_operands, kernels_to_time, problem, settled_rounds, summary, write_csv
from cutecourse.dispatch import FUSING
from cutecourse.kernels.gemm import GEMM_STEPS
from cutecourse.kernels.gemm.tolerances import FP8_PRECISION, within_epilogue_bounds

SHAPES = [(4096, 4096, 4096), (8192, 8192, 8192)]
FP8 = "float8_e4m3fn"
DTYPES = ("bfloat16", "float16", FP8)
FUSED_ACTIVATIONS = ("gelu_tanh", "relu")  # the two cuBLASLt fuses (torch._addmm_activation's use_gelu)
#: The steps with an epilogue (every step from 5), and those with fp8 (the fp8 wgmma of steps 10 and 11), by number.
EPILOGUE_STEPS = tuple(GEMM_STEPS.index(s) + 1 for s in FUSING)
FP8_STEPS = tuple(GEMM_STEPS.index(s) + 1 for s in ("gemm10_multicast", "gemm11_pingpong"))
UNFUSED = "torch unfused"
FUSED = "cuBLASLt fused"
MATMUL = "torch.matmul"
SCALED_MM, FAST_ACCUM = "torch._scaled_mm", "torch._scaled_mm fast_accum"
#: The ratios to reach: ours / cuBLASLt fused (the issue's goal, then the course's target); fp8 ours / _scaled_mm.
GOAL = 1.0
TARGET = 1.05
FP8_GOAL = 0.95

def parse(argv: list[str] | None = None) -> argparse.Namespace:
    """The command line; --shapes become (M, N, K) tuples."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dtypes", nargs="+", choices=DTYPES, default=list(DTYPES))
    parser.add_argument("--shapes", nargs="+", type=problem, default=SHAPES, metavar="MxNxK")
    parser.add_argument("--steps", nargs="+", type=int, choices=EPILOGUE_STEPS, default=[EPILOGUE_STEPS[-1]],
                        help="the GEMM steps timed with each epilogue (those with one: 5, 9, 10)")
    parser.add_argument("--variants", nargs="*", default=[], metavar="STEP:FIELD=VALUE,...",
                        help="also time a step with some Config fields changed, as benchmarks/gemm.py: 10:epi_n=64")
    parser.add_argument("--fp8-steps", nargs="+", type=int, choices=FP8_STEPS, default=[FP8_STEPS[-1]],
                        help="the steps timed in fp8 with their FP8_CONFIG (Hopper's: 9, 10)")
    parser.add_argument("--rounds", type=int, default=5, help="interleaved rounds; the median is reported")
    parser.add_argument("--settle-ms", type=float, default=1000.0,
                        help="back-to-back launches of a kernel before it is timed, in ms (power and clocks settle)")
    parser.add_argument("--csv", default="epilogue.csv")
    return parser.parse_args(argv)


def unfused(bias: Any, activation: str) -> Callable[..., object]:
    """torch.matmul, then the bias, then the activation, each its own kernel over D."""
    import torch

    act = {"gelu_tanh": lambda x: torch.ops.aten.gelu_(x, approximate="tanh"), "relu": torch.relu_}[activation]
    return lambda a, b, d, config: act(torch.matmul(a, b, out=d).add_(bias))


def fused(bias: Any, activation: str) -> Callable[..., object]:
    """cuBLASLt's GEMM with its bias + GELU (tanh approximation) or bias + ReLU epilogue, through torch."""
    import torch

    return lambda a, b, d, config: torch._addmm_activation(bias, a, b, use_gelu=activation == "gelu_tanh", out=d)


def launched_kernels(fn: Callable[[int], object]) -> list[str]:
    """The names of the GPU kernels one call of `fn` launches (torch's profiler)."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        fn(0)
        torch.cuda.synchronize()
    return [e.name for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]


def sixteen_bit_kernels(dtype: str, m: int, n: int, k: int, launches: dict[str, tuple], say: Callable[[str], object],
                        activations: tuple[str, ...] = FUSED_ACTIVATIONS) -> dict[str, Callable[[int], object]]:
    """{name: fn(i)} of one 16-bit dtype and shape: torch.matmul, then per activation unfused torch, cuBLASLt fused
    and ours, each checked first."""
    import torch

    from cutecourse.kernels.gemm.epilogue import Epilogue, reference

    torch.manual_seed(0)
    a = torch.randn(m, k, device="cuda", dtype=getattr(torch, dtype))
    b = torch.randn(n, k, device="cuda", dtype=a.dtype).t()  # K-major, as benchmarks/gemm.py
    bias = torch.randn(n, device="cuda", dtype=a.dtype)
    d = torch.empty(m, n, device="cuda", dtype=a.dtype)
    acc = a.double() @ b.double()
    where = f"{dtype} {m}x{n}x{k}"
    kernels = {MATMUL: lambda i: torch.matmul(a, b, out=d)}
    for activation in activations:
        epi = Epilogue(activation, bias="n")
        d_ref, x_ref = reference(acc, epi, bias=bias)

        def judge(out: Any, d_ref: Any = d_ref, x_ref: Any = x_ref, activation: str = activation) -> str | None:
            return within_epilogue_bounds(out, d_ref, x_ref, activation)

        for who, gemm in ((UNFUSED, unfused(bias, activation)), (FUSED, fused(bias, activation))):
            name = f"{who} {activation}"
            kernels[name] = checked(f"{name} {where}", gemm, None, a, b, d, say=say, judge=judge)
            say(f"{name} {where} launches {', '.join(launched_kernels(kernels[name])) or 'no kernel the profiler saw'}")
        for step, (gemm, config) in launches.items():
            name = f"{step} {activation}"
            def ours(a: Any, b: Any, d: Any, config: Any, gemm: Any = gemm, epi: Any = epi) -> Any:
                return gemm(a, b, d, config, epilogue=epi, bias=bias)

            kernels[name] = checked(f"{name} {where}", ours, config, a, b, d, say=say, judge=judge)
    return kernels


def fp8_kernels(m: int, n: int, k: int, steps: list[int], say: Callable[[str], object], dispatcher: bool = False
                ) -> dict[str, Callable[[int], object]]:
    """{name: fn(i)} of one fp8 e4m3 shape, D bfloat16: torch._scaled_mm (default and fast accumulation), then ours
    for each of `steps` (and ``cutecourse.gemm`` with `dispatcher`), each checked first against float64 of the
    dequantized inputs."""
    import torch

    a8, b8, d, sa, sb, ref = fp8_operands(m, n, k)
    scale_a, scale_b = (torch.tensor(s, device="cuda", dtype=torch.float32) for s in (sa, sb))
    where = f"{FP8} {m}x{n}x{k}"

    def judge(out: Any) -> str | None:
        return within_epilogue_bounds(out, ref, ref, precision=FP8_PRECISION)

    kernels = {}
    for name, fast in ((SCALED_MM, False), (FAST_ACCUM, True)):
        def scaled(a: Any, b: Any, d: Any, config: Any, fast: bool = fast) -> Any:
            return torch._scaled_mm(a, b, scale_a, scale_b, out_dtype=torch.bfloat16, use_fast_accum=fast, out=d)

        kernels[name] = checked(f"{name} {where}", scaled, None, a8, b8, d, say=say, judge=judge)
    for number in steps:
        step = GEMM_STEPS[number - 1]
        module = importlib.import_module(f"cutecourse.kernels.gemm.{step}")
        def ours(a: Any, b: Any, d: Any, config: Any, gemm: Any = module.gemm) -> Any:
            return gemm(a, b, d, config, alpha=sa * sb)

        kernels[f"{step} fp8"] = checked(f"{step} fp8 {where}", ours, module.FP8_CONFIG, a8, b8, d, say=say,
                                         judge=judge)
    if dispatcher:
        import cutecourse

        def dispatched(a: Any, b: Any, d: Any, config: Any) -> Any:
            return cutecourse.gemm(a, b, d, alpha=sa * sb)

        kernels["cutecourse.gemm fp8"] = checked(f"cutecourse.gemm fp8 {where}", dispatched, None, a8, b8, d, say=say,
                                                 judge=judge)
    return kernels


def rows_of(times: dict[str, list[float]], power: dict[str, list[tuple[float, float]]], flops: float,
            **meta: Any) -> list[dict[str, Any]]:
    """One CSV row per kernel of `settled_rounds`' result: `meta` (date, gpu, dtype, M, N, K), its epilogue, median
    ms, TFLOP/s, and its ratio to its baseline timed in the same rounds (the cuBLASLt fused kernel of the same
    activation; torch._scaled_mm in fp8; torch.matmul for itself)."""
    fp8 = SCALED_MM in times
    result = summary(times, power, flops, base=SCALED_MM if fp8 else MATMUL)
    rows = []
    for name, r in result.items():
        if fp8:
            activation, baseline = "fp8", SCALED_MM
        elif name == MATMUL:
            activation, baseline = "none", MATMUL
        else:  # "<who> <activation>"
            activation = name.rpartition(" ")[2]
            baseline = f"{FUSED} {activation}"
        rows.append(dict(meta, epilogue=activation, kernel=name, ms=f"{r['ms']:.4f}", tflops=f"{r['tflops']:.1f}",
                         baseline=baseline, ratio=f"{result[baseline]['ms'] / r['ms']:.3f}",
                         sm_mhz="" if r["sm_mhz"] is None else f"{r['sm_mhz']:.0f}",
                         watts="" if r["watts"] is None else f"{r['watts']:.0f}",
                         rounds=" ".join(f"{t:.4f}" for t in times[name])))
    return rows


def goals(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per dtype, shape and each of our kernels: the ratios the issue sets goals on, and whether they are met."""
    ms = {(r["dtype"], r["M"], r["N"], r["K"], r["kernel"]): float(r["ms"]) for r in rows}
    out = []
    for r in rows:
        group = (r["dtype"], r["M"], r["N"], r["K"])
        if r["kernel"].startswith(("torch", "cuBLASLt")):
            continue
        if r["epilogue"] == "fp8":
            ratio = ms[(*group, SCALED_MM)] / float(r["ms"])
            out.append(dict(r, vs_baseline=ratio, vs_unfused=None, fused_vs_unfused=None,
                            vs_fast_accum=ms[(*group, FAST_ACCUM)] / float(r["ms"]),
                            verdict=f"goal {FP8_GOAL} {'met' if ratio >= FP8_GOAL else 'missed'}"))
            continue
        fused_ms, unfused_ms = ms[(*group, f"{FUSED} {r['epilogue']}")], ms[(*group, f"{UNFUSED} {r['epilogue']}")]
        ratio = fused_ms / float(r["ms"])
        verdict = (f"target {TARGET} met" if ratio >= TARGET else f"goal {GOAL} met, target {TARGET} missed"
                   if ratio >= GOAL else f"goal {GOAL} missed")
        out.append(dict(r, vs_baseline=ratio, vs_unfused=unfused_ms / float(r["ms"]), fused_vs_unfused=unfused_ms
                        / fused_ms, vs_fast_accum=None, verdict=verdict))
    return out


def markdown(rows: list[dict[str, Any]]) -> str:
    """Every kernel's time, then the goals."""
    def cell(x: float | None) -> str:
        return "" if x is None else f"{x:.3f}"

    out = ["| dtype | M×N×K | epilogue | kernel | ms | TFLOP/s | × baseline | baseline | SM MHz | W |",
           "|---|---|---|---|---|---|---|---|---|---|"]
    out += [f"| {r['dtype']} | {r['M']}×{r['N']}×{r['K']} | {r['epilogue']} | {r['kernel']} | {r['ms']} | "
            f"{r['tflops']} | {r['ratio']} | {r['baseline']} | {r['sm_mhz']} | {r['watts']} |" for r in rows]
    out += ["", f"Goals: ours / cuBLASLt fused ≥ {GOAL} (course target ≥ {TARGET}); fp8 ours / torch._scaled_mm ≥ "
            f"{FP8_GOAL}. X / Y is Y's time over X's.", "",
            "| dtype | M×N×K | epilogue | ours | ours / fused (fp8: / _scaled_mm) | ours / unfused | fused / unfused "
            "| fp8 ours / fast_accum | verdict |", "|---|---|---|---|---|---|---|---|---|"]
    out += [f"| {g['dtype']} | {g['M']}×{g['N']}×{g['K']} | {g['epilogue']} | {g['kernel']} | {cell(g['vs_baseline'])} "
            f"| {cell(g['vs_unfused'])} | {cell(g['fused_vs_unfused'])} | {cell(g['vs_fast_accum'])} | "
            f"{g['verdict']} |" for g in goals(rows)]
    return "\n".join(out)


def main() -> None:
    args = parse()

    import torch
    from tqdm import tqdm

    from cutecourse.bench import Clocks

    meta = dict(date=datetime.date.today().isoformat(), gpu=torch.cuda.get_device_name())
    launches = kernels_to_time(args.steps, args.variants)
    rows = []
    progress = tqdm(total=len(args.dtypes) * len(args.shapes), desc="dtype × shape")
    with Clocks() as clocks:
        for dtype in args.dtypes:
            for m, n, k in args.shapes:
                kernels = (fp8_kernels(m, n, k, args.fp8_steps, progress.write) if dtype == FP8 else
                           sixteen_bit_kernels(dtype, m, n, k, launches, progress.write))
                torch.cuda.empty_cache()  # the float64 references are gone; their memory need not stay reserved
                times, power = settled_rounds(kernels, args.rounds, args.settle_ms, clocks)
                rows += rows_of(times, power, 2 * m * n * k, **meta, dtype=dtype, M=m, N=n, K=k)
                progress.update()
    progress.close()
    write_csv(rows, args.csv)
    print(markdown(rows))
    print(f"csv: {args.csv}")


if __name__ == "__main__":
    main()
