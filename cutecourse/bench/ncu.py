"""Nsight Compute for ``cutecourse bench gemm --ncu``: which metrics, how to ask ncu for them, and how to read its CSV.

The profiler re-runs itself under ``ncu`` with ``--once``: every kernel is compiled and checked first, then each is
launched once between ``cudaProfilerStart`` and ``cudaProfilerStop``, and ncu (``--profile-from-start off``) profiles
just those launches, in that order. ``--clock-control none`` leaves the clocks as the GPU sets them: the profile then
shows the clock each kernel really ran at (ncu's default locks the base clock, which hides the power limit).

A launch may run more than one kernel (split-K's GEMM, then its reduction), so each runs inside an NVTX range named
for it. ncu writes a report, read twice: once with the kernels' own names, once with each renamed to its NVTX range
(``--print-nvtx-rename kernel``), which says which launch every profiled kernel belongs to.
"""

from __future__ import annotations

import csv
import io
import subprocess
from typing import Any

#: What the profile reports -> ncu metric names to try, in order (names differ between ncu versions and chips; the
#: first one this ncu knows is used). Percentages are of the peak sustained rate.
METRICS: dict[str, tuple[str, ...]] = {
    "duration (µs)": ("gpu__time_duration.sum",),
    "SM clock (MHz)": ("sm__cycles_elapsed.avg.per_second",),
    "cycles": ("sm__cycles_elapsed.max",),
    "SM throughput %": ("sm__throughput.avg.pct_of_peak_sustained_elapsed",),
    "tensor pipe %": ("sm__pipe_tensor_op_hmma_type_hmma_hgmma_qgmma_cycles_active.avg.pct_of_peak_sustained_active",
                      "sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active",
                      "sm__inst_executed_pipe_tensor_op_hmma.avg.pct_of_peak_sustained_active"),
    "DRAM %": ("dram__throughput.avg.pct_of_peak_sustained_elapsed",),
    "DRAM MB": ("dram__bytes.sum",),
    "L2 %": ("lts__t_sectors.avg.pct_of_peak_sustained_elapsed", "lts__throughput.avg.pct_of_peak_sustained_elapsed"),
    "L2 MB": ("lts__t_bytes.sum",),
    "L2 read sectors (M)": ("lts__t_sectors_srcunit_tex_op_read.sum",),
    "smem bank conflicts": ("l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum",),
    "achieved occupancy %": ("sm__warps_active.avg.pct_of_peak_sustained_active",),
}

#: Why warps were not issuing, as ncu's warp-state statistics name the reasons: each is asked for as the average number
#: of warps stalled for it per issued instruction, and the table shows the largest three. "selected" (the warp that
#: issued) is not a stall: it is kept in the CSV and left out of the table's three.
STALLS = ("long_scoreboard", "barrier", "wait", "math_pipe_throttle", "short_scoreboard", "mio_throttle", "sleeping",
          "membar", "dispatch_stall", "lg_throttle", "no_instruction", "branch_resolving", "not_selected", "selected",
          "misc", "drain", "tex_throttle", "imc_miss")
STALL_METRIC = "smsp__average_warps_issue_stalled_{}_per_issue_active.ratio"
#: Quantities that are counts: the table prints them without decimals.
COUNTS = {"cycles", "smem bank conflicts"}


def available(ncu: str) -> set[str]:
    """The base metric names (before the first '.') this ncu knows for the GPU it sees; empty if it cannot say."""
    done = subprocess.run([ncu, "--query-metrics"], capture_output=True, text=True, timeout=120)
    if done.returncode != 0:
        return set()
    return {line.split()[0] for line in done.stdout.splitlines() if line.strip() and "__" in line.split()[0]}


def chosen(known: set[str]) -> dict[str, str]:
    """{what: the metric name to ask for}: each quantity's first candidate that `known` holds (the first candidate
    where `known` is empty: ncu then says which names it lacks)."""
    return {what: next((m for m in names if m.split(".")[0] in known), names[0]) if known else names[0]
            for what, names in METRICS.items()}


def stalls(known: set[str]) -> list[str]:
    """The stall metrics to ask for: those of `STALLS` that `known` holds (all of them where `known` is empty)."""
    names = [STALL_METRIC.format(reason) for reason in STALLS]
    return [name for name in names if name.split(".")[0] in known] if known else names


def command(ncu: str, metrics: dict[str, str], argv: list[str], report: str, stall_metrics: list[str]) -> list[str]:
    """ncu's command line around `argv` (the program to profile), its report going to `report` + ".ncu-rep"; it asks
    for `metrics` and `stall_metrics`, and records the NVTX ranges each kernel ran in."""
    names = [*metrics.values(), *stall_metrics]
    return [ncu, "--clock-control", "none", "--profile-from-start", "off", "--nvtx", "--metrics",
            ",".join(dict.fromkeys(names)), "--export", report, "--force-overwrite", *argv]


def export(ncu: str, report: str, renamed: bool) -> list[str]:
    """ncu's command line that prints the report `command` wrote as its raw CSV page; `renamed`: each kernel named by
    the innermost NVTX range it ran in."""
    return [ncu, "--import", report + ".ncu-rep", "--csv", "--page", "raw",
            *(["--print-nvtx-rename", "kernel"] if renamed else [])]


def _number(text: str) -> float | None:
    try:
        return float(text.replace(",", ""))
    except ValueError:
        return None  # "n/a": the counter is not readable on this GPU


def parse(text: str, metrics: dict[str, str]) -> list[dict[str, Any]]:
    """ncu's raw CSV page -> one dict per profiled kernel, in launch order: its name and each quantity of `metrics`
    in the units of `METRICS` (µs, MHz, %, MB); None where ncu gave no value; and under "stalls", {reason: warps
    stalled for it per issued instruction} for each reason of `STALLS` that ncu reported."""
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith('"ID"')), None)
    if start is None:
        return []
    rows = list(csv.reader(io.StringIO("\n".join(lines[start:]))))
    header = rows[0]
    units = rows[1]
    data = rows[2:]
    scale = {"nsecond": 1e-3, "ns": 1e-3, "usecond": 1.0, "us": 1.0, "msecond": 1e3, "ms": 1e3, "second": 1e6,
             "s": 1e6, "hz": 1e-6, "khz": 1e-3, "mhz": 1.0, "ghz": 1e3, "byte": 1e-6, "kbyte": 1e-3, "mbyte": 1.0,
             "gbyte": 1e3, "cycle/nsecond": 1e3, "cycle/usecond": 1.0, "cycle/second": 1e-6, "sector": 1e-6,
             "ksector": 1e-3, "msector": 1.0, "gsector": 1e3}
    out = []
    for row in data:
        if len(row) != len(header):
            continue
        values = dict(zip(header, row))
        kernel: dict[str, Any] = {"kernel": values.get("Kernel Name", "?")}
        for what, metric in metrics.items():
            if metric not in values:
                kernel[what] = None
                continue
            number = _number(values[metric])
            unit = units[header.index(metric)].strip().lower()
            kernel[what] = None if number is None else number * scale.get(unit, 1.0)
        stalls = {reason: _number(values.get(STALL_METRIC.format(reason), "")) for reason in STALLS}
        kernel["stalls"] = {reason: n for reason, n in stalls.items() if n is not None}
        out.append(kernel)
    return out


def named(launched: list[str], ranges: list[str], count: int) -> list[str | None]:
    """What each of `count` profiled kernels was launched as: of `launched` (the launches' names), the longest that
    its NVTX range name (`ranges`, one a kernel, as ncu renamed them) holds; None for a kernel that ran in no launch's
    range, and for every kernel where `ranges` does not name `count` kernels (the renamed page could not be read)."""
    if len(ranges) != count:
        return [None] * count
    return [max((name for name in launched if name in seen), key=len, default=None) for seen in ranges]


def flat(profile: dict[str, Any], launched: str | None) -> dict[str, Any]:
    """A profile as one CSV row: what `launched` it (as `named` gives it: the CuTe kernels' ncu names are alike), its
    quantities, then a column "stall REASON" for every reason of `STALLS` (empty where ncu did not report it)."""
    row: dict[str, Any] = {"launched": launched}
    row.update({what: value for what, value in profile.items() if what != "stalls"})
    row.update({f"stall {reason}": profile.get("stalls", {}).get(reason) for reason in STALLS})
    return row


def table(names: list[str | None], profiles: list[dict[str, Any]]) -> str:
    """A Markdown table, a row per profiled kernel, the first column what launched it (`names`, as `named` gives them;
    two rows share a launch that ran two kernels), the second ncu's own name for the kernel."""
    whats = list(METRICS)
    lines = ["| kernel | ncu kernel | " + " | ".join(whats) + " | top stalls (warps per issue) |",
             "|---" * (len(whats) + 3) + "|"]
    for name, profile in zip(names, profiles):
        cells = [("n/a" if profile[w] is None else f"{profile[w]:.0f}" if w in COUNTS else f"{profile[w]:.1f}")
                 for w in whats]
        top = sorted(((reason, n) for reason, n in profile.get("stalls", {}).items() if reason != "selected"),
                     key=lambda item: -item[1])[:3]
        cells.append(", ".join(f"{reason} {n:.2f}" for reason, n in top) or "n/a")
        lines.append(f"| {name or ''} | {profile['kernel'][:48]} | " + " | ".join(cells) + " |")
    return "\n".join(lines)
