"""Timing on the GPU: CUDA events, warm-up, medians, launches back to back, and settled, interleaved rounds.

Every GPU figure of the course comes through :func:`median_ms`, and every benchmark times its baseline (torch's
device copy, ``torch.matmul``) with it in the same run, so ratios compare like with like. The GEMM benchmarks, the
profiler (``cutecourse bench gemm``) and the tuner (`cutecourse.tune`) time kernels in :func:`settled_rounds`:

* each kernel first runs alone for `settle_ms`, then is timed as the median of 5 × 10 back-to-back launches;
* the rounds interleave the kernels, the odd rounds in the reverse order.

Both are there because the H200 is power-limited on random data and its clock follows the power draw over hundreds
of milliseconds: a kernel timed right after a lighter one borrows its clocks. Unsettled, one step measured 1.113×
and 0.914× of torch.matmul in bf16 at 8192³ in two runs (1.106× and 0.863× in fp16), and `benchmarks/gemm_clocks.py`
shows torch.matmul 3-5% faster in its first 100 ms after the one-warpgroup wgmma step than once settled; so no
kernel should always follow the same one. The SM clock and board power while each kernel ran come from
:class:`Clocks` (nvidia-smi): at the power limit, a kernel that moves more data runs at a lower clock.

`cutecourse.bench.measure` times lesson 1's two roofline figures (copy bandwidth, torch.matmul TFLOP/s) with
:func:`median_ms`; `cutecourse.bench.ncu` reads the profiler's Nsight Compute metrics.
"""

from __future__ import annotations

import argparse
import csv
import importlib
import shutil
import statistics
import subprocess
import threading
import time
from collections.abc import Callable
from typing import Any

from cutecourse.kernels.gemm import GEMM_STEPS, VARIANTS

#: What the operands hold (`operands`): random-normal values (the benchmarks' default, at the power limit), small
#: integers (-2 to 2: exact in every format, and fewer bits toggle), or zeros (the least power a GEMM can draw).
DATA = ("normal", "integers", "zeros")


def median_ms(fn: Callable[[int], object], reps: int = 30, batch: int = 10, warmup: int = 3) -> float:
    """Median milliseconds per launch of ``fn(i)``, timed over `batch` back-to-back launches per repetition.

    ``fn`` gets 0, 1, 0, 1, ... so it can alternate two buffer sets (pass sets larger than L2 to keep it out of the
    measurement). Back-to-back launches let a launcher's host work overlap the kernels before it: timing one launch
    alone measures the host as well (seen: a 127 µs transpose timed as 190 µs behind a 61 µs launcher). Each repetition
    first queues one untimed launch, so the GPU is busy while the timed ones are queued and the first timed launch
    does not wait for the host: without it the events also timed one launch's host work and an idle GPU (torch.matmul
    at 4096³ measured 0.2169 ms so and 0.2085 ms primed, with a spread of 5% against 1.5%).
    """
    import torch

    for i in range(warmup):
        fn(i % 2)
    times = []
    for _ in range(reps):
        fn(0)
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for i in range(batch):
            fn(i % 2)
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / batch)
    return statistics.median(times)


class Clocks:
    """The SM clock and board power while kernels run, read by ``nvidia-smi`` in a background thread.

    Random-data GEMMs on an H100/H200 hit the 700 W power limit, and the GPU then lowers its clock: two kernels that
    take the same cycles can differ in time by how much power each draws. ``clocks.during(t0, t1)`` gives the median
    (MHz, W) of the readings between two ``time.monotonic()`` stamps, or None where ``nvidia-smi`` is missing or
    took no reading then (a reading comes every `period_ms`, so a window needs to be a few of those long)::

        with Clocks() as clocks:
            t0 = time.monotonic(); run(); torch.cuda.synchronize()
            print(clocks.during(t0, time.monotonic()))
    """

    QUERY = ["--query-gpu=clocks.sm,power.draw", "--format=csv,noheader,nounits"]

    def __init__(self, period_ms: int = 50, command: list[str] | None = None) -> None:
        self.readings: list[tuple[float, float, float]] = []  # (monotonic time, MHz, W)
        if command is None:
            smi = shutil.which("nvidia-smi")
            command = [smi, *self.QUERY, f"--loop-ms={period_ms}"] if smi else None
        self.process = (subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
                        if command else None)
        if self.process:
            threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in self.process.stdout:
            try:
                mhz, watts = (float(x) for x in line.split(",")[:2])
            except ValueError:  # "[N/A]" or a header: no reading
                continue
            self.readings.append((time.monotonic(), mhz, watts))

    def during(self, t0: float, t1: float) -> tuple[float, float] | None:
        inside = [(mhz, watts) for t, mhz, watts in self.readings if t0 <= t <= t1]
        if not inside:
            return None
        return statistics.median(r[0] for r in inside), statistics.median(r[1] for r in inside)

    def close(self) -> None:
        if self.process:
            self.process.terminate()
            self.process.wait()

    def __enter__(self) -> "Clocks":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _field_value(text: str) -> int | bool | str:
    """A Config field's value as written after ``=`` in a variant: a whole number, True or False, or the text."""
    return int(text) if text.isdigit() else {"True": True, "False": False}.get(text, text)


def kernels_to_time(steps: list[int], variants: list[str]) -> dict[str, tuple]:
    """{name: (launcher, Config)} for the steps' default Configs and the `--variants` ("9:epi_n=64,stages=3",
    "11:swap_ab=True,tile_n=16,epi_n=16"; a kernel beside the ladder by its name, "gemv" or "gemv:warps=8")."""
    for number in steps:
        if not 1 <= number <= len(GEMM_STEPS):
            raise SystemExit(f"step {number}: the GEMM steps are 1-{len(GEMM_STEPS)}")
    named = {str(i): step for i, step in enumerate(GEMM_STEPS, 1)} | {v: v for v in VARIANTS}
    specs = [(GEMM_STEPS[number - 1], "", str(number)) for number in steps]
    for spec in variants:
        number, _, fields = spec.partition(":")
        if number not in named or not all(f.count("=") == 1 for f in fields.split(",") if fields):
            raise SystemExit(f"--variants {spec!r}: write STEP:FIELD=VALUE,... with a step 1-{len(GEMM_STEPS)} or "
                             f"{', '.join(VARIANTS)}, e.g. 9:epi_n=64,stages=3")
        specs.append((named[number], fields, spec))
    launches = {}
    for step, fields, spec in specs:
        module = importlib.import_module(f"cutecourse.kernels.gemm.{step}")
        changes = dict(f.split("=") for f in fields.split(",")) if fields else {}
        name = f"{step}({fields})" if fields else step
        try:
            config = module.Config(**{key: _field_value(value) for key, value in changes.items()})
        except (TypeError, ValueError) as exc:  # a field the Config lacks, or a value it refuses
            raise SystemExit(f"--variants {spec}: {exc}. {step}.Config's fields are "
                             f"{', '.join(module.Config.__dataclass_fields__)}") from None
        launches[name] = (module.gemm, config)
    return launches


def settled_rounds(kernels: dict[str, Callable[[int], object]], rounds: int, settle_ms: float, clocks: Any,
                   slow: Callable[[str], bool] = lambda name: False
                   ) -> tuple[dict[str, list[float]], dict[str, list[tuple[float, float]]]]:
    """Time `kernels` ({name: fn(i)}, as cutecourse.bench.median_ms calls them) in `rounds` interleaved rounds, the
    odd rounds in the reverse order: in a round each kernel first runs alone for `settle_ms`, then is timed as the
    median of 5 × 10 back-to-back launches (one launch, unsettled, for the `slow` ones). Returns each kernel's ms
    per round and the (SM MHz, W) that `clocks` (a cutecourse.bench.Clocks) read while it ran (the module
    docstring says why)."""
    times: dict[str, list[float]] = {name: [] for name in kernels}
    power: dict[str, list[tuple[float, float]]] = {name: [] for name in kernels}
    for r in range(rounds):
        for name, fn in list(kernels.items())[::-1 if r % 2 else 1]:
            unsettled = slow(name)
            # Settle: run the kernel alone for settle_ms first, so that it is timed at the clocks its own power
            # draw allows, not at those the previous kernel left behind.
            once = median_ms(fn, reps=1, batch=1, warmup=1)
            warmup = 1 if unsettled else max(3, int(settle_ms / max(once, 1e-3)))
            t0 = time.monotonic()
            times[name].append(median_ms(fn, reps=1 if unsettled else 5, batch=1 if unsettled else 10,
                                         warmup=warmup))
            # Clock and power over the second half of the settle and the timing (the first half ramps).
            reading = clocks.during(t0 + (time.monotonic() - t0) / 2, time.monotonic())
            if reading:
                power[name].append(reading)
    return times, power


class WrongResult(SystemExit):
    """A kernel's output failed its check (`checked`): a script stops with the message; the tuner skips the config."""


def checked(name: str, gemm: Any, config: Any, a: Any, b: Any, c: Any, say: Callable[[str], object] = print,
            judge: Callable[[Any], str | None] | None = None) -> Callable[[int], object]:
    """`gemm(a, b, c, config)` run once into a NaN-filled C and checked against torch in float64 (the first call also
    compiles; a wrong result stops the run), as the closure fn(i) that `settled_rounds` times. `judge(c)` says what
    is wrong with C (None: nothing); by default tolerances.within_bounds(c, a, b), C = a @ b."""
    import torch

    from cutecourse.kernels.gemm import tolerances

    c.fill_(float("nan"))
    start = time.perf_counter()
    gemm(a, b, c, config)
    torch.cuda.synchronize()
    problem = judge(c) if judge else tolerances.within_bounds(c, a, b)
    if problem:
        raise WrongResult(f"{name} is wrong: {problem}")
    say(f"{name}: correct; first call (compile + run) {time.perf_counter() - start:.1f} s")
    return lambda i: gemm(a, b, c, config)


def summary(times: dict[str, list[float]], power: dict[str, list[tuple[float, float]]], flops: float,
            base: str = "torch.matmul") -> dict[str, dict[str, float | None]]:
    """Per kernel of `settled_rounds`' result: its median ms, TFLOP/s, ratio to `base` (timed in the same rounds),
    and the median SM MHz and W read while it ran (None without a reading)."""
    reference = statistics.median(times[base])

    def median_of(readings: list[tuple[float, float]], i: int) -> float | None:
        return statistics.median(r[i] for r in readings) if readings else None

    return {name: dict(ms=statistics.median(t), tflops=flops / statistics.median(t) / 1e9,
                       ratio=reference / statistics.median(t), sm_mhz=median_of(power[name], 0),
                       watts=median_of(power[name], 1)) for name, t in times.items()}


def write_csv(rows: list[dict[str, Any]], path: str) -> None:
    """The run's rows, one per kernel and problem, as CSV with the first row's keys for header."""
    with open(path, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)


def operands(m: int, n: int, k: int, dtype: str, data: str = "normal", seed: int = 0,
             majors: tuple[str, str] = ("k", "k")) -> tuple[Any, Any, Any]:
    """The benchmarks' operands on the GPU, holding `data` (one of `DATA`): A (M, K) and B (K, N), by default both
    K-major (A row-major, B = ``bt.t()``: the layout CUTLASS calls TN; `majors` ("m", "n") makes them MN-major),
    and an empty row-major C of A's dtype."""
    import torch

    if data not in DATA:
        raise ValueError(f"data={data!r}: pick one of {', '.join(DATA)}")
    torch.manual_seed(seed)
    kind = getattr(torch, dtype)

    def fill(rows: int, cols: int) -> Any:
        if data == "normal":
            return torch.randn(rows, cols, device="cuda", dtype=kind)
        if data == "integers":
            return torch.randint(-2, 3, (rows, cols), device="cuda").to(kind)
        return torch.zeros(rows, cols, device="cuda", dtype=kind)

    if majors[0] not in ("k", "m") or majors[1] not in ("k", "n"):
        raise ValueError(f"majors={majors!r}: give (a's, b's) major, each 'k' or the other mode: ('k', 'k'), "
                         "('m', 'n'), ('k', 'n') or ('m', 'k')")
    a = fill(m, k) if majors[0] == "k" else fill(k, m).t()
    b = fill(n, k).t() if majors[1] == "k" else fill(k, n)
    return a, b, torch.empty(m, n, device="cuda", dtype=kind)


def problem(text: str) -> tuple[int, int, int]:
    """A problem written MxNxK ("4096x4096x4096"), as the benchmarks' and the tuner's --shapes take it, as (M, N, K):
    the benchmarks' ``type=bench.problem``. argparse.ArgumentTypeError naming the text and the form, which argparse
    prints as it is."""
    parts = text.split("x")
    if len(parts) != 3 or not all(p.isdigit() and int(p) > 0 for p in parts):
        raise argparse.ArgumentTypeError(f"{text!r}: write MxNxK with three positive integers, e.g. 4096x4096x4096")
    m, n, k = (int(p) for p in parts)
    return m, n, k


def fp8_operands(m: int, n: int, k: int, seed: int = 0) -> tuple[Any, Any, Any, float, float, Any]:
    """fp8 e4m3 operands on the GPU as the fp8 benchmarks and the fp8 race use them: A (M, K) and B = bt.t() (K-major:
    fp8 wgmma and cuBLASLt's fp8 take only that), each random normal quantized with its per-tensor scale
    (`cutecourse.kernels.gemm.fp8.quantize`), an empty bfloat16 D, the scales sa and sb, and the reference: the
    float64 product of the dequantized inputs."""
    import torch

    from cutecourse.kernels.gemm import fp8

    torch.manual_seed(seed)
    a8, sa = fp8.quantize(torch.randn(m, k, device="cuda"), torch.float8_e4m3fn)
    b8t, sb = fp8.quantize(torch.randn(n, k, device="cuda"), torch.float8_e4m3fn)
    ref = fp8.dequantize(a8, sa) @ fp8.dequantize(b8t, sb).t()
    return a8, b8t.t(), torch.empty(m, n, device="cuda", dtype=torch.bfloat16), sa, sb, ref


def profile(problems: list[tuple[int, int, int]], dtypes: list[str], launches: dict[str, tuple[Any, Any]], *,
            rounds: int, settle_ms: float, data: str = "normal",
            skip: Callable[[str, tuple[int, int, int]], bool] = lambda name, problem: False,
            slow: Callable[[str], bool] = lambda name: False, say: Callable[[str], object] | None = None
            ) -> list[dict[str, Any]]:
    """Every kernel of `launches` ({name: (gemm, config)}, as `kernels_to_time` gives) on every problem and dtype:
    checked against float64 first (`checked`), then timed with torch.matmul in `settled_rounds`.
    One row per kernel and problem: date, GPU, dtype, data, M, N, K, kernel, median ms, TFLOP/s, ratio to
    torch.matmul, the SM clock and power while it ran, and every round's ms. `skip(name, problem)` leaves a kernel out
    of a problem; the `slow` ones are timed unsettled (a single launch can take seconds). A tqdm bar counts the
    problems."""
    import datetime

    import torch
    from tqdm import tqdm

    gpu, date = torch.cuda.get_device_name(), datetime.date.today().isoformat()
    rows = []
    with Clocks() as clocks, tqdm(total=len(dtypes) * len(problems), desc="dtype × problem") as progress:
        say = say or progress.write
        for name in dtypes:
            for m, n, k in problems:
                a, b, c = operands(m, n, k, name, data)
                kernels = {"torch.matmul": lambda i: torch.matmul(a, b, out=c)}
                for kernel, (gemm, config) in launches.items():
                    if skip(kernel, (m, n, k)):
                        continue
                    try:
                        kernels[kernel] = checked(f"{kernel} {name} {m}x{n}x{k}", gemm, config, a, b, c, say=say)
                    except ValueError as exc:  # refused: e.g. a Hopper step on an sm_80 GPU
                        say(f"{kernel} {name} {m}x{n}x{k}: not timed, {exc}")
                times, power = settled_rounds(kernels, rounds, settle_ms, clocks, slow=slow)
                for kernel, r in summary(times, power, 2 * m * n * k).items():
                    rows.append(dict(date=date, gpu=gpu, dtype=name, data=data, M=m, N=n, K=k, kernel=kernel,
                                     ms=f"{r['ms']:.4f}", tflops=f"{r['tflops']:.1f}", ratio=f"{r['ratio']:.3f}",
                                     sm_mhz="" if r["sm_mhz"] is None else f"{r['sm_mhz']:.0f}",
                                     watts="" if r["watts"] is None else f"{r['watts']:.0f}",
                                     rounds=" ".join(f"{t:.4f}" for t in times[kernel])))
                progress.update()
    return rows


def table(rows: list[dict[str, Any]]) -> str:
    """`profile`'s rows as a Markdown table (what RESULTS.md records)."""
    lines = ["| dtype | data | M×N×K | kernel | ms | TFLOP/s | × torch.matmul | SM MHz | W |",
             "|---|---|---|---|---|---|---|---|---|"]
    lines += [f"| {r['dtype']} | {r['data']} | {r['M']}×{r['N']}×{r['K']} | {r['kernel']} | {r['ms']} | {r['tflops']} "
              f"| {r['ratio']} | {r['sm_mhz']} | {r['watts']} |" for r in rows]
    return "\n".join(lines)
