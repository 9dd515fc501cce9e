"""The shipped table of measured winners: per GPU arch, operand dtype and shape class, the step and Config that ran
fastest in one measured race (`cutecourse.tuning.measure_winners`: the candidates of `CANDIDATES`, each checked
against float64 torch, timed settled and interleaved with torch.matmul), and what it measured. `cutecourse.gemm`
runs a class's winner where one was measured for this arch and dtype, and falls back to its model elsewhere
(`cutecourse.dispatch.explain` says which).

A shape class rounds each of M, N and K up to a power of two: (128, 6144, 4096) is class ``128x8192x4096``, the class
of every problem with 65 ≤ M ≤ 128, 4097 ≤ N ≤ 8192, 2049 ≤ K ≤ 4096. The table (``winners.json`` beside this module)
maps ``arch -> dtype -> class`` to ``{"step", "config" (the Config's fields), "shape" (the problem measured), "raced"
(how many configs ran in that race), "ms",
"ratio" (the baseline's ms / the winner's, the same rounds), "gpu", "date"}``. Beside each 16-bit dtype's plain race,
``dtype+bias_gelu`` holds the fused epilogue's winners and ``float8_e4m3fn`` fp8's (`key`, `BASELINES`). Importing
this module loads nothing heavy.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

TABLE = Path(__file__).with_name("winners.json")

#: The Configs a race runs on every shape: the two Hopper schedules with their default tiles, and the smaller tiles
#: that put more CTAs on the SMs when a problem has few tiles (64-row tiles are one wgmma's rows; a 2 × 1 cluster
#: shares B between two row tiles, which a problem of one tile row does not have, hence the 1 × 2 and 1 × 1 ones).
CANDIDATES: tuple[tuple[str, dict[str, Any]], ...] = (
    ("gemm10_multicast", {}),
    ("gemm10_multicast", {"tile_m": 256, "tile_n": 128}),
    # big squares at the power limit: the Config that spends less energy a FLOP runs at a higher clock. cuBLAS's
    # 8192³ pick is 256 × 128 in a 1 × 2 cluster, and 64-column epilogue subtiles store in half as many rounds
    # (benchmarks/RESULTS.md, 2026-12-07 tenth session, on an H100: 1.022× and 0.992× where the table's pick gave
    # 0.950×)
    ("gemm10_multicast", {"tile_m": 256, "tile_n": 128, "cluster_m": 1, "cluster_n": 2}),
    ("gemm10_multicast", {"epi_n": 64}),
    ("gemm11_pingpong", {}),
    ("gemm11_pingpong", {"tile_m": 64, "tile_n": 256, "cluster_m": 1, "cluster_n": 2}),
    ("gemm11_pingpong", {"tile_m": 64, "tile_n": 128, "cluster_m": 1, "cluster_n": 2}),
    ("gemm11_pingpong", {"tile_m": 64, "tile_n": 128, "cluster_m": 1, "cluster_n": 1}),
    ("gemm11_pingpong", {"tile_m": 64, "tile_n": 64, "cluster_m": 1, "cluster_n": 2}),
    ("gemm11_pingpong", {"tile_m": 64, "cluster_m": 2, "cluster_n": 1}),  # two row tiles share each B tile
    # M = 128 with a deep K: 128 tiles of 64 × 64 (one a CTA), both row tiles of each W tile in one cluster, so W
    # leaves L2 once (on an H100, benchmarks/RESULTS.md 2026-12-06 sixth session: 1.15× torch.matmul, the 1 × 2
    # cluster 1.05×)
    ("gemm11_pingpong", {"tile_m": 64, "tile_n": 64, "cluster_m": 2, "cluster_n": 1}),
    # tiles as wide as fills whole waves of the 132 SMs at M = 128 (two row tiles a cluster): 6144 / 96 = 64 column
    # tiles, 128 CTAs in one wave where 64 × 128 tiles give 96; 28672 / 224 = 128, 256 CTAs in two waves where 64 ×
    # 128 tiles give 448 in four, the last a third full
    ("gemm11_pingpong", {"tile_m": 64, "tile_n": 96, "cluster_m": 2, "cluster_n": 1}),
    ("gemm11_pingpong", {"tile_m": 64, "tile_n": 224, "cluster_m": 2, "cluster_n": 1}),
    # split-K (`cutecourse.kernels.gemm.splitk`): a long K over few tiles
    ("gemm11_pingpong", {"splits": 2, "cluster_m": 1, "cluster_n": 2}),
    ("gemm11_pingpong", {"tile_m": 64, "splits": 4, "cluster_m": 1, "cluster_n": 2}),
    # stream-K (`splitk.stream_share`): every cluster an equal share of all tiles' k-tiles, no splits to choose
    ("gemm11_pingpong", {"stream_k": True}),
    ("gemm11_pingpong", {"tile_m": 64, "stream_k": True, "cluster_m": 1, "cluster_n": 2}),
    # the decode GEMV (`cutecourse.kernels.gemm.gemv`): a few rows of x, no Tensor Cores (refused, so not raced, past
    # its 8 rows)
    ("gemv", {}),
    # swap-AB: Dᵀ = W·xᵀ, W's rows on wgmma's 64 and 16 tokens on its N, no padded rows; raced only up to
    # `SWAP_AB_ROWS` rows (past them W would be read once per 16 rows of x), without and with split-K
    ("gemm11_pingpong", {"swap_ab": True, "tile_m": 64, "tile_n": 16, "epi_n": 16, "cluster_m": 1, "cluster_n": 1}),
    ("gemm11_pingpong", {"swap_ab": True, "tile_m": 64, "tile_n": 16, "epi_n": 16, "cluster_m": 1, "cluster_n": 1,
                         "splits": 2}),
)
#: The most rows of x a swap-AB candidate is raced on.
SWAP_AB_ROWS = 64

#: The Configs the fused-epilogue and fp8 races run (`races`), on the problems whose tiles fill the GPU: an epilogue
#: is work after each tile's mainloop, which step 10's cooperative schedule does with both warpgroups while no wgmma
#: issues, and step 11's ping-pong overlaps with the other warpgroup's mainloop; which costs less depends on the
#: tiles per SM and the epilogue's cost (benchmarks/RESULTS.md, 2026-12-07: in the ninth session step 11 was ahead at
#: 4096³ and step 10 at 8192³; in the tenth, with the cheaper epilogue, step 10 won all eighteen races on an H100).
#: fp8 runs each with its step's ``FP8_CONFIG.tile_k`` (128 one-byte elements a swizzled row).
EPILOGUE_CANDIDATES: tuple[tuple[str, dict[str, Any]], ...] = (
    ("gemm10_multicast", {}),
    ("gemm10_multicast", {"tile_m": 256, "tile_n": 128}),
    ("gemm10_multicast", {"epi_n": 64}),  # half as many subtiles, so half the epilogue's barriers
    ("gemm10_multicast", {"cluster_m": 1, "cluster_n": 2}),
    ("gemm10_multicast", {"tile_m": 256, "tile_n": 128, "cluster_m": 1, "cluster_n": 2}),  # cuBLAS's at 8192³
    ("gemm11_pingpong", {}),
    ("gemm11_pingpong", {"cluster_m": 1, "cluster_n": 2}),
)
#: What a race measures, as the table's key beside the arch: the plain product in a 16-bit dtype (its `CANDIDATES`
#: against ``torch.matmul``), the product with the fused epilogue GELU(x @ W.t() + bias) (`EPILOGUE_CANDIDATES`
#: against cuBLASLt's fused epilogue, ``torch._addmm_activation``), and fp8 e4m3 operands scaled into a bfloat16 D
#: (`EPILOGUE_CANDIDATES` against ``torch._scaled_mm``). A fused call runs its class's fused winner where one was
#: measured, else its plain winner.
FUSED_SUFFIX = "+bias_gelu"
FP8 = "float8_e4m3fn"
BASELINES = {"plain": "torch.matmul", "fused": "cuBLASLt fused", "fp8": "torch._scaled_mm"}


def key(dtype: str, fused: bool = False) -> str:
    """The table's key of a race: `dtype` ("bfloat16", "float8_e4m3fn"), with `FUSED_SUFFIX` for the fused
    epilogue's ("bfloat16+bias_gelu")."""
    if dtype not in ("float16", "bfloat16", FP8):
        raise ValueError(f"dtype={dtype!r}: the races time float16, bfloat16 or {FP8} GEMMs")
    if fused and dtype == FP8:
        raise ValueError(f"fused=True with {FP8}: the fp8 race already scales D in its epilogue (alpha = sa·sb); race "
                         "the fused epilogue in float16 or bfloat16")
    return dtype + FUSED_SUFFIX if fused else dtype


def kind(table_key: str) -> str:
    """What the race of a table key measured: "plain", "fused" or "fp8" (`BASELINES` names its baseline); a key no
    race writes is refused (`key`)."""
    fused = table_key.endswith(FUSED_SUFFIX)
    key(table_key.removesuffix(FUSED_SUFFIX), fused)
    if table_key == FP8:
        return "fp8"
    return "fused" if fused else "plain"


def races(table_key: str) -> tuple[tuple[str, dict[str, Any]], ...]:
    """The candidates a race of `table_key` runs: `CANDIDATES` for the plain product, `EPILOGUE_CANDIDATES` for the
    fused epilogue, and those with fp8's k-tile (128) for fp8."""
    what = kind(table_key)
    if what == "plain":
        return CANDIDATES
    if what == "fused":
        return EPILOGUE_CANDIDATES
    return tuple((step, dict(fields, tile_k=128)) for step, fields in EPILOGUE_CANDIDATES)


def raced(fields: dict[str, Any], m: int) -> bool:
    """Whether the race runs the candidate with these Config fields on a problem of `m` rows: swap-AB only up to
    `SWAP_AB_ROWS` (its tiles of 16 tokens would read W once per 16 rows of x), every other candidate always (one a
    launcher refuses is skipped by the race, and said)."""
    return not fields.get("swap_ab") or m <= SWAP_AB_ROWS


#: The shapes the table is raced on and `benchmarks/gemm_shapes.py` times (issue 34's suite), as ``y = x @ W.t()``
#: with x (M, K) and the weights W (N, K): big squares, LLM layers at M = 128 to 8192, a skinny and a deep-K problem,
#: then the decode-sized M of `DECODE_M` against each of the three LLM layers' weights (`WEIGHTS`).
SUITE = [(4096, 4096, 4096), (8192, 8192, 8192), (8192, 8192, 28672), (4096, 28672, 4096), (4096, 4096, 14336),
         (1024, 6144, 4096), (1024, 4096, 14336), (128, 6144, 4096), (128, 28672, 4096), (128, 4096, 14336),
         (1024, 1536, 512), (256, 8192, 8192), (1024, 1024, 16384)]
WEIGHTS = [(6144, 4096), (28672, 4096), (4096, 14336)]
DECODE_M = (1, 16, 64)
SHAPES = SUITE + [(m, n, k) for n, k in WEIGHTS for m in DECODE_M]
#: The suite's problems where the fused epilogue and fp8 are timed too, and raced (`races`): two big squares and an
#: LLM layer at M = 4096.
EXTRAS = [(4096, 4096, 4096), (8192, 8192, 8192), (4096, 28672, 4096)]


def shape_class(m: int, n: int, k: int) -> str:
    """The class of an (M, N, K) problem: each extent rounded up to a power of two, as ``"MxNxK"``."""
    for name, x in (("m", m), ("n", n), ("k", k)):
        if isinstance(x, bool) or not isinstance(x, int) or x < 1:
            raise ValueError(f"{name}={x!r}: a GEMM extent is a positive int")
    return "x".join(str(1 << (x - 1).bit_length()) for x in (m, n, k))


def describe(cls: str) -> str:
    """A class as the ranges it covers: ``"64 < M ≤ 128, 4096 < N ≤ 8192, 2048 < K ≤ 4096"``."""
    parts = []
    for name, top in zip("MNK", (int(x) for x in cls.split("x"))):
        parts.append(f"{name} = 1" if top == 1 else f"{top // 2} < {name} ≤ {top}")
    return ", ".join(parts)


@functools.cache
def _table(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}


def table(path: Path | None = None) -> dict[str, Any]:
    """The table as stored (``arch -> dtype -> class -> entry``); empty where no file is."""
    return _table(path or TABLE)


def lookup(arch: str, dtype: str, m: int, n: int, k: int, path: Path | None = None) -> dict[str, Any] | None:
    """The measured winner of (M, N, K)'s class for `arch` ("sm_90") and `dtype`, a table key (`key`: "bfloat16",
    "bfloat16+bias_gelu", "float8_e4m3fn"), or None."""
    return table(path).get(arch, {}).get(dtype, {}).get(shape_class(m, n, k))


def store(arch: str, dtype: str, entries: dict[str, dict[str, Any]], path: Path | None = None) -> Path:
    """Merge `entries` ({class: entry}) into the table under `arch` and `dtype`, and write it (sorted, one line per
    class, so that a refresh reads as a diff)."""
    path = path or TABLE
    data = json.loads(json.dumps(table(path)))  # a copy: the cached table stays as read
    data.setdefault(arch, {}).setdefault(dtype, {}).update(entries)
    lines = ["{"]
    archs = sorted(data)
    for i, a in enumerate(archs):
        lines.append(f"  {json.dumps(a)}: {{")
        dtypes = sorted(data[a])
        for j, d in enumerate(dtypes):
            lines.append(f"    {json.dumps(d)}: {{")
            classes = sorted(data[a][d], key=lambda c: tuple(int(x) for x in c.split("x")))
            for c_i, c in enumerate(classes):
                comma = "," if c_i < len(classes) - 1 else ""
                lines.append(f"      {json.dumps(c)}: {json.dumps(data[a][d][c], sort_keys=True)}{comma}")
            lines.append("    }" + ("," if j < len(dtypes) - 1 else ""))
        lines.append("  }" + ("," if i < len(archs) - 1 else ""))
    lines.append("}")
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    _table.cache_clear()
    return path
