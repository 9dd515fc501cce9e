"""Benchmark: the eager CuTe layout algebra against its pure-Python peers.

A fixed mix of layout-algebra operations on typical GEMM-sized layouts is timed for

* ``cutecourse.layout``  (this course's eager algebra, DSL-exact printing),
* ``tensor_layouts``     (PyPI ``tensor-layouts``),
* ``pycute``             (the legacy pure-Python CuTe shipped in the ``nvidia-cutlass`` wheel),

side by side, in µs per call, with the ratio peer / cutecourse.  Then every library's
result is compared with what the CuTe DSL itself prints for the same inputs (through
``cutecourse.layout.oracle``; skipped when the DSL is not installed): spacing of the
printed form, size-1 modes, and results that really differ.

    python benchmarks/layout_algebra.py            # ~30 s
    python benchmarks/layout_algebra.py --quick    # shorter timing loops

A missing peer is reported with the pip command that installs it.
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from typing import Any, Callable, Dict, List, Optional, Tuple


INSTALL = {
    "cutecourse": "pip install -e .   (from the repository root)",
    "tensor_layouts": "pip install tensor-layouts",
    "pycute": "pip install --no-deps nvidia-cutlass",
}

# --------------------------------------------------------------------------- #
# The mix: (name, op, target, operand); layouts as (shape, stride); a tuple of
# layouts is a by-mode tiler.
# --------------------------------------------------------------------------- #

Lay = Tuple[Any, Any]

MIX: List[Tuple[str, str, Any, Any]] = [
    ("composition  (128,64) row-major o (32,8):(1,32)", "composition", ((128, 64), (64, 1)), ((32, 8), (1, 32))),
    ("composition  by-mode tile <32,16> of (128,64)", "composition", ((128, 64), (64, 1)),
     [(32, 1), (16, 1)]),
    ("logical_divide  (4096,4096) by <128,64>", "logical_divide", ((4096, 4096), (4096, 1)),
     [(128, 1), (64, 1)]),
    ("zipped_divide   (4096,4096) by <128,64>", "zipped_divide", ((4096, 4096), (4096, 1)), [(128, 1), (64, 1)]),
    ("tiled_divide    (128,64) smem by <(8,4):(4,1), 8>", "tiled_divide", ((128, 64), (1, 128)),
     [((8, 4), (4, 1)), (8, 1)]),
    ("logical_divide  1-D 1024 by 128", "logical_divide", (1024, 1), (128, 1)),
    ("logical_product (8,4):(4,1) x (2,2)", "logical_product", ((8, 4), (4, 1)), ((2, 2), (1, 2))),
    ("zipped_product  (16,8) x (4,2)", "zipped_product", ((16, 8), (1, 16)), ((4, 2), (1, 4))),
    ("blocked_product (32,4):(4,1) x (2,4)", "blocked_product", ((32, 4), (4, 1)), ((2, 4), (1, 2))),
    ("raked_product   (32,4):(4,1) x (2,4)", "raked_product", ((32, 4), (4, 1)), ((2, 4), (1, 2))),
    ("coalesce  ((2,(4,8)),(8,16))", "coalesce", (((2, (4, 8)), (8, 16)), ((1, (2, 8)), (64, 512))), None),
    ("complement  (4,8):(1,16) in 1024", "complement", ((4, 8), (1, 16)), 1024),
    ("right_inverse  (8,(4,16)):(64,(1,4))", "right_inverse", ((8, (4, 16)), (64, (1, 4))), None),
    ("left_inverse   (8,16):(16,1)", "left_inverse", ((8, 16), (16, 1)), None),
]


# Not timed: inputs that show where the peers' semantics or printing differ from the DSL.
PROBES: List[Tuple[str, str, Any, Any]] = [
    ("default strides of size-1 modes", "make_layout", ((4, 1, 8), None), None),
    ("coalesce with a size-1 mode", "coalesce", ((2, 1, 6), (1, 6, 2)), None),
    ("complement that is empty", "complement", ((4, 8), (1, 4)), 32),
    ("complement with a (10,2) cotarget", "complement", (4, 3), (10, 2)),
    ("composition with a short by-mode tiler", "composition", (((4, 3, 16), 2), ((9, 6, 1), 23)), [(2, 12)]),
    ("logical_divide (6,2):(2,1) by 4:1 (invalid)", "logical_divide", ((6, 2), (2, 1)), (4, 1)),
    ("logical_product of a non-injective block", "logical_product", ((2, 2), (2, 2)), (4, 2)),
    ("right_inverse of a non-injective layout", "right_inverse", ((4, 2), (1, 1)), None),
    ("rank-1 tuple layout", "coalesce", ((8,), (1,)), None),
]


def fmt(t) -> str:
    if isinstance(t, tuple):
        return "(" + ",".join(fmt(x) for x in t) + ")"
    return str(t)


def lstr(lay: Lay) -> str:
    return f"{fmt(lay[0])}:{fmt(lay[1])}"


# --------------------------------------------------------------------------- #
# Adapters: build the arguments once, return a zero-argument callable
# --------------------------------------------------------------------------- #


class Peer:
    name = ""

    def __init__(self):
        self.mod = None

    def load(self) -> Optional[str]:
        raise NotImplementedError

    def layout(self, lay: Lay):
        raise NotImplementedError

    def fn(self, op: str) -> Optional[Callable]:
        return getattr(self.mod, op, None)

    def prepare(self, op: str, target, operand) -> Optional[Callable[[], Any]]:
        if op == "make_layout":
            return lambda: self.layout(target)
        f = self.fn(op)
        if f is None:
            return None
        a = self.layout(target)
        if operand is None:
            return lambda: f(a)
        if isinstance(operand, int) or (isinstance(operand, tuple) and not isinstance(operand[0], tuple)
                                        and op == "complement"):
            return lambda: f(a, operand)
        if isinstance(operand, list):
            b = tuple(self.layout(x) for x in operand)
        else:
            b = self.layout(operand)
        return lambda: f(a, b)


class Cutecourse(Peer):
    name = "cutecourse"

    def load(self):
        import cutecourse.layout as m

        self.mod = m
        return None

    def layout(self, lay):
        return self.mod.make_layout(lay[0], stride=lay[1])


def _probe_case(op, target, operand):
    if op == "make_layout":
        return ("make_layout", target[0])
    if operand is None:
        return (op, lstr(target))
    if isinstance(operand, (int,)) or (op == "complement" and isinstance(operand, tuple)):
        return (op, lstr(target), operand)
    if isinstance(operand, list):
        return (op, lstr(target), tuple(lstr(x) for x in operand))
    return (op, lstr(target), lstr(operand))


class TensorLayouts(Peer):
    name = "tensor_layouts"

    def load(self):
        import tensor_layouts as m

        self.mod = m
        return getattr(m, "__version__", "")

    def layout(self, lay):
        return self.mod.Layout(lay[0]) if lay[1] is None else self.mod.Layout(lay[0], lay[1])

    def fn(self, op):
        return getattr(self.mod, "compose" if op == "composition" else op, None)


class Pycute(Peer):
    name = "pycute"

    def load(self):
        import pycute as m

        self.mod = m
        return None

    def layout(self, lay):
        return self.mod.Layout(lay[0]) if lay[1] is None else self.mod.Layout(lay[0], lay[1])


def timeit(call: Callable[[], Any], budget: float) -> float:
    """µs per call: best of 3 rounds, each sized to ~budget/3 seconds."""
    call()
    n, t = 1, 0.0
    while True:
        t0 = time.perf_counter()
        for _ in range(n):
            call()
        t = time.perf_counter() - t0
        if t > budget / 30 or n > 1_000_000:
            break
        n *= 4
    reps = max(1, int(n * (budget / 3) / max(t, 1e-9)))
    best = float("inf")
    for _ in range(3):
        t0 = time.perf_counter()
        for _ in range(reps):
            call()
        best = min(best, (time.perf_counter() - t0) / reps)
    return best * 1e6


def norm(s: str) -> str:
    return re.sub(r"\s+", "", s)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="shorter timing loops")
    ap.add_argument("--budget", type=float, default=None, help="seconds of timing per op and library")
    ap.add_argument("--no-dsl", action="store_true", help="skip the comparison with the CuTe DSL")
    args = ap.parse_args(argv)
    budget = args.budget or (0.1 if args.quick else 0.45)

    peers: List[Peer] = []
    print("libraries:")
    for cls in (Cutecourse, TensorLayouts, Pycute):
        p = cls()
        try:
            ver = p.load()
            peers.append(p)
            print(f"  {p.name:<15} ok {ver or ''}")
        except Exception as e:  # a missing peer is reported, not a crash
            print(f"  {p.name:<15} MISSING ({type(e).__name__}: {e}) -> install with: {INSTALL[p.name]}")
    if not peers or peers[0].name != "cutecourse":
        print("cutecourse.layout is needed for the benchmark:", INSTALL["cutecourse"])
        return 1
    names = [p.name for p in peers]

    # --- timing -------------------------------------------------------------
    results: Dict[str, Dict[str, str]] = {}
    rows = []
    for label, op, target, operand in MIX:
        row = {"label": label}
        results[label] = {}
        for p in peers:
            try:
                call = p.prepare(op, target, operand)
            except Exception as e:
                call = None
                results[label][p.name] = f"error: {type(e).__name__}: {e}"
            if call is None:
                row[p.name] = None
                results[label].setdefault(p.name, "n/a (no such op)")
                continue
            try:
                results[label][p.name] = str(call())
                row[p.name] = timeit(call, budget)
            except Exception as e:
                row[p.name] = None
                results[label][p.name] = f"error: {type(e).__name__}: {e}"
        rows.append(row)

    w = max(len(r["label"]) for r in rows)
    head = f"{'op':<{w}}" + "".join(f"  {n + ' µs':>18}" for n in names)
    head += "".join(f"  {n + '/cc':>18}" for n in names[1:])
    print()
    print(head)
    print("-" * len(head))
    geo: Dict[str, List[float]] = {n: [] for n in names[1:]}
    for r in rows:
        line = f"{r['label']:<{w}}"
        for n in names:
            v = r.get(n)
            line += f"  {('%.1f' % v) if v is not None else 'n/a':>18}"
        for n in names[1:]:
            a, b = r.get(n), r.get("cutecourse")
            if a is not None and b:
                geo[n].append(a / b)
                line += f"  {'%.2fx' % (a / b):>18}"
            else:
                line += f"  {'n/a':>18}"
        print(line)
    import math

    line = f"{'geometric mean of ratios':<{w}}" + " " * (20 * len(names))
    for n in names[1:]:
        g = math.exp(sum(math.log(x) for x in geo[n]) / len(geo[n])) if geo[n] else None
        line += f"  {('%.2fx' % g) if g else 'n/a':>18}"
    print(line)
    print("(ratio > 1: the peer is slower than cutecourse.layout)")

    # --- functional differences against the DSL ------------------------------
    if args.no_dsl:
        return 0
    try:
        from cutecourse.layout import oracle

        cases = [_probe_case(op, target, operand) for _, op, target, operand in MIX + PROBES]
        t0 = time.perf_counter()
        dsl = oracle.evaluate(cases)
        dt = time.perf_counter() - t0
    except RuntimeError as e:
        print(f"\nno comparison with the CuTe DSL: {e}")
        return 0
    print(f"\nfunctional comparison with the CuTe DSL 4.8.1 ({len(cases)} cases in {dt:.1f} s through the oracle):")
    counts = {"exact": 0, "spacing only": 0, "different": 0, "refuses": 0, "n/a": 0}
    kinds: Dict[str, Dict[str, int]] = {n: dict(counts) for n in names}
    details = []
    for label, op, target, operand in PROBES:
        results[label] = {}
        for p in peers:
            try:
                call = p.prepare(op, target, operand)
                results[label][p.name] = "n/a (no such op)" if call is None else str(call())
            except Exception as e:
                results[label][p.name] = f"error: {type(e).__name__}: {str(e)[:120]}"
    for (label, *_), d in zip(MIX + PROBES, dsl):
        for n in names:
            got = results[label][n]
            if got.startswith("n/a"):
                kinds[n]["n/a"] += 1
                details.append((n, label, got, d, "n/a"))
            elif got.startswith("error:") and not d.startswith(("error:", "crash:")):
                kinds[n]["refuses"] += 1  # the DSL returns something (maybe garbage), the library raises
                details.append((n, label, got, d, "n/a"))
            elif got == d or (got.startswith("error:") and d.startswith(("error:", "crash:"))):
                kinds[n]["exact"] += 1
            elif d.startswith(("error:", "crash:")):
                kinds[n]["different"] += 1
                details.append((n, label, got, d, "DIFFERENT"))
            elif norm(got) == norm(d):
                kinds[n]["spacing only"] += 1
                details.append((n, label, got, d, "spacing"))
            else:
                kinds[n]["different"] += 1
                details.append((n, label, got, d, "DIFFERENT"))
    print(f"  {'library':<15} {'exact':>6} {'spacing only':>13} {'different':>10} {'refuses':>8} {'n/a':>5}")
    for n in names:
        k = kinds[n]
        print(f"  {n:<15} {k['exact']:>6} {k['spacing only']:>13} {k['different']:>10} {k['refuses']:>8} {k['n/a']:>5}")
    shown_spacing = set()
    for n, label, got, d, kind in details:
        if kind == "spacing":
            if n in shown_spacing:
                continue
            shown_spacing.add(n)
            print(f"  [{n}] prints with spaces, e.g. {label.split()[0]}: {got!r} where the DSL prints {d!r}")
        elif kind == "DIFFERENT":
            print(f"  [{n}] {label}: {got!r}  vs DSL {d!r}")
        elif d.startswith(("error:", "crash:")):
            print(f"  [{n}] {label}: {got}  (the DSL: {d[:90]})")
        else:
            print(f"  [{n}] {label}: {got[:120]}  (the DSL: {d!r})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
