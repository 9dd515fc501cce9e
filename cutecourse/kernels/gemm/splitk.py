"""Parallel split-K and stream-K for step 11: a GEMM whose work units are (tile, split) pairs, or pieces of equal shares
of all the k-tiles, each storing a float32 partial tile into a workspace, then a reduction kernel that sums the
partials in a fixed order and applies the fused epilogue.

**What split-K is.** A problem with few output tiles and a long K (128 × 6144 × 4096 has 48 tiles of 128 × 128 on a
132-SM H200; 1024 × 1024 × 16384 has 64) leaves most SMs idle: one CTA walks all of K for its tile. Split-K cuts K
into S ranges and gives each (tile, range) pair to its own CTA, so S times as many SMs work; each computes a partial
sum over its share of the k-tiles, and the partials are added afterwards.

**Why parallel, with a workspace.** The other way is serial, in-kernel split-K: the CTAs of one tile add their partial
into the output in turn (a lock, or the last CTA to arrive sums the others' partials; lesson 8's exercise 8.4). That
needs a semaphore per tile, makes CTAs wait on each other, and runs the epilogue in whichever CTA comes last. Here
the GEMM never waits: unit (tile, s) stores its partial, unfused, into slice s of an (S, M, N) float32 workspace
with the step's own TMA store, and a second kernel, launched behind it on the same stream, reads the S slices and
computes ``D = act(alpha · Σ_s W[s] + beta · C + bias)`` with the steps' epilogue (`epilogue.element`). The price is
the workspace's traffic, S · M · N · 4 bytes written and read once: small next to A and B when K is long, which is
when the dispatcher splits.

**The second launch overlaps the first.** A kernel behind another on a stream starts only once the first has ended,
and the GPU then takes microseconds to launch it: at 16 × 4096 × 14336 the whole split GEMM takes about 50 µs. Hopper
can launch the reduction while the GEMM still runs (programmatic dependent launch): the GEMM's CTAs signal
``griddepcontrol.launch_dependents`` as they start, the reduction is launched with ``use_pdl=True``, its CTAs take
the SMs the GEMM leaves free, compute their partitions and wait in ``griddepcontrol.wait`` until the GEMM has ended
and its partials are visible. Without that wait it would read the workspace before the partials are in it.

**Deterministic.** Each partial is one CTA's wgmma over its k-tiles in order, and the reduction adds s = 0, 1, ...,
S - 1 in that order in float32, whichever CTA finished first: the same inputs give bitwise the same D on every run
(an in-kernel reduction that adds in arrival order, or float atomics, does not).

**How K is divided.** Split s of S takes k-tiles ``[s · T // S, (s + 1) · T // S)`` of the T k-tiles: the shares
differ by at most one. A split with no k-tile would store no partial at all, so S may not exceed T: the launcher
refuses such a call (`Launcher.plan`), and `cutecourse.gemm` splits only where every split gets at least 4.

**Stream-K** (``Config(stream_k=True)``) divides the work differently and keeps the rest. Lay every tile's k-tiles
end to end, tile after tile: ``tiles · T`` iterations. Each of the persistent grid's P clusters takes a contiguous
share of them, the shares differing by at most one iteration, so no SM runs more than ⌈tiles · T / P⌉ k-tiles,
whatever the shape (split-K's busiest SM runs a whole split, and a split count that fills the GPU in whole waves
may not exist). A share may start inside one tile and end inside another: the share's piece of each tile it
touches is a work unit, and cluster c's units are c, c + P, c + 2P, ..., the order the persistent loop already walks
(`stream_share`). A tile's pieces come from consecutive clusters, in K order; piece j goes to slice j of the
workspace, and the reduction adds slices 0 .. pieces - 1 of each tile in that order (`stream_pieces`: every tile
may have its own count), so stream-K is deterministic too. The workspace has as many slices as the most pieces of
one tile (`stream_slices`, which the launcher puts into the Config's ``splits``). Unlike CUTLASS's stream-K, which
lets the last CTA of a tile add the others' partials in a fix-up inside the GEMM, every piece, whole tiles
included, goes through the workspace and the same reduction kernel.

    gemm11_pingpong.gemm(a, b, d, gemm11_pingpong.Config(splits=4))   # 4 partial products, then the reduction
    gemm11_pingpong.gemm(a, b, d, gemm11_pingpong.Config(stream_k=True))   # equal shares of all k-tiles
    gemm11_pingpong.gemm(a, b, d, Config(splits=2), epilogue=Epilogue("gelu_tanh", bias="n"), bias=bias)
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, replace
from typing import Any

import cutlass
import cutlass.cute as cute
import torch
from cutlass.cute.runtime import make_ptr

from cutecourse.kernels.gemm import device, epilogue, launcher
from cutecourse.kernels.gemm.operands import Operands
from cutecourse.kernels.gemm.plans import Plans
from cutecourse.kernels.predicate import per_vector, per_vector_if

#: The most splits a Config takes: past the SM count more splits only add workspace traffic, and the reduction's loop
#: over the slices is unrolled.
MAX_SPLITS = 32
VECTOR = 4  # float32 partial sums per 16-byte load of the reduction
GMEM = cute.AddressSpace.gmem


def k_share(work: Any, tiles: Any, k_tiles: Any, splits: int) -> tuple[Any, Any, Any, Any]:
    """Inside a kernel: (tile, split, first k-tile, k-tiles) of work unit `work`. Units run split-major, unit =
    split · tiles + tile, so the units in flight together are neighbouring tiles of one split, which read the same
    k-range of A and B (the raster's L2 reuse, as unsplit). ``splits == 1`` traces nothing: (work, 0, 0, k_tiles)."""
    if splits == 1:
        return work, 0, 0, k_tiles
    split = work // tiles
    first = split * k_tiles // splits
    return work % tiles, split, first, (split + 1) * k_tiles // splits - first


def _holder(x: Any, ctas: Any, total: Any) -> Any:
    """The stream-K CTA whose share holds iteration `x`: CTA c takes iterations [c · total // ctas, (c + 1) · total //
    ctas), so c is the largest with c · total // ctas ≤ x."""
    return ((x + 1) * ctas - 1) // total


def stream_pieces(tile: Any, ctas: Any, tiles: Any, k_tiles: Any) -> tuple[Any, Any]:
    """Stream-K: (the first CTA that works on `tile`, how many do): its pieces, in K order, are workspace slices 0,
    1, ... of the tile."""
    total = tiles * k_tiles
    first = _holder(tile * k_tiles, ctas, total)
    return first, _holder((tile + 1) * k_tiles - 1, ctas, total) - first + 1


def stream_share(work: Any, ctas: Any, tiles: Any, k_tiles: Any) -> tuple[Any, Any, Any, Any]:
    """Stream-K, inside a kernel or in Python: (tile, slice, first k-tile, k-tiles) of work unit `work` of a grid of
    `ctas` persistent CTAs (clusters). The problem's iterations (tile, k-tile), tile by tile, are cut into `ctas`
    shares that differ by at most one; CTA c's work units c, c + ctas, c + 2 · ctas, ... are the pieces of its share,
    one a tile it touches, the way the persistent loop already walks them. A piece's slice is its place among the
    tile's pieces. A unit past the CTA's last (`stream_units`) has no k-tiles."""
    total = tiles * k_tiles
    cta = work % ctas
    start = cta * total // ctas
    tile = start // k_tiles + work // ctas
    low = cutlass.max(start, tile * k_tiles)
    high = cutlass.min((cta + 1) * total // ctas, (tile + 1) * k_tiles)
    return tile, cta - _holder(tile * k_tiles, ctas, total), low - tile * k_tiles, cutlass.max(high - low, 0)


def stream_units(cta: Any, ctas: Any, tiles: Any, k_tiles: Any) -> Any:
    """Stream-K: the end of CTA `cta`'s work units: one past the last of cta, cta + ctas, ..., one a tile its share
    touches."""
    total = tiles * k_tiles
    start, end = cta * total // ctas, (cta + 1) * total // ctas
    return cta + ((end - 1) // k_tiles - start // k_tiles + 1) * ctas


def stream_ctas(tiles: Any, k_tiles: Any, fit: Any) -> Any:
    """Stream-K's persistent grid: every cluster the GPU holds at once (`fit`), each with at least one iteration,
    and at most MAX_SPLITS - 1 a tile. Then a share is at least k_tiles / (MAX_SPLITS - 1) iterations, so the
    boundaries of shares inside one tile are at most MAX_SPLITS - 1, and its pieces at most `MAX_SPLITS`."""
    return cutlass.min(cutlass.min(fit, tiles * k_tiles), tiles * (MAX_SPLITS - 1))


def stream_slices(tiles: int, k_tiles: int, ctas: int) -> int:
    """In Python: the most pieces one tile is cut into, the workspace slices stream-K needs."""
    return max(stream_pieces(tile, ctas, tiles, k_tiles)[1] for tile in range(tiles))


def unit_share(work: Any, ctas: Any, tiles: Any, k_tiles: Any, splits: int, stream_k: bool) -> tuple[Any, ...]:
    """Inside a kernel: (tile, slice, first k-tile, k-tiles) of work unit `work`, split-K's (`k_share`) or stream-K's
    (`stream_share`)."""
    return stream_share(work, ctas, tiles, k_tiles) if stream_k else k_share(work, tiles, k_tiles, splits)


def unit_end(cta: Any, ctas: Any, tiles: Any, k_tiles: Any, splits: int, stream_k: bool) -> Any:
    """Inside a kernel: where CTA `cta`'s work units (cta, cta + ctas, ...) end."""
    return stream_units(cta, ctas, tiles, k_tiles) if stream_k else tiles * splits


def workspace(pW: cute.Pointer, m: Any, n: Any, splits: int, major: str = "n") -> cute.Tensor:
    """In a host: the float32 workspace as an (M, N, S) tensor, slice s of (M, N) at offset s · M · N, row-major, or
    column-major where D is (`major` "m", swap-AB's Dᵀ: then each slice is the row-major (N, M) partial of D). The
    GEMM's TMA store clips each mode on its own, so a tile past M or N writes nothing into the next slice."""
    if major == "n":
        ld = cute.assume(n, divby=VECTOR)  # N holds whole 16-byte vectors of D, hence of float32 (the checks)
        return cute.make_tensor(pW, cute.make_layout((m, n, splits), stride=(ld, 1, m * ld)))
    ld = cute.assume(m, divby=VECTOR)  # column-major D: M is its contiguous extent, of whole vectors
    return cute.make_tensor(pW, cute.make_layout((m, n, splits), stride=(1, ld, n * ld)))


def work_at(coord: Any, config: Any, clusters: tuple[Any, Any]) -> Any:
    """Inside the reduction, or in Python: the work unit (cluster tile) of step 11's raster that holds D's element
    `coord`: `gemm11_pingpong._tile_coord` inverted (groups of `group_m` cluster rows, filled column by column)."""
    clusters_m, clusters_n = clusters
    row = coord[0] // (config.tile_m * config.cluster_m)
    col = coord[1] // (config.tile_n * config.cluster_n)
    first_row = row // config.group_m * config.group_m
    rows = cutlass.min(clusters_m - first_row, config.group_m)
    return first_row * clusters_n + col * rows + row - first_row


@cute.kernel
def _kernel(mW: cute.Tensor, mD: cute.Tensor, mSrc: cute.Tensor, mBias: cute.Tensor, mAux: cute.Tensor,
            alpha: cutlass.Float32, beta: cutlass.Float32, tiler: cutlass.Constexpr, thr_layout: cute.Layout,
            val_layout: cute.Layout, fused: cutlass.Constexpr, stream_k: cutlass.Constexpr,
            clusters_m: cutlass.Int32, clusters_n: cutlass.Int32, k_tiles: cutlass.Int32, ctas: cutlass.Int32):
    tidx, _, _ = cute.arch.thread_idx()
    bidx, _, _ = cute.arch.block_idx()
    splits = cute.size(mW, mode=[2])
    load = cute.make_copy_atom(cute.nvgpu.CopyUniversalOp(), cutlass.Float32, num_bits_per_copy=128)
    store = cute.make_copy_atom(cute.nvgpu.CopyUniversalOp(), mD.element_type,
                                num_bits_per_copy=VECTOR * mD.element_type.width)
    thr_load = cute.make_tiled_copy_tv(load, thr_layout, val_layout).get_slice(tidx)
    thr_store = cute.make_tiled_copy_tv(store, thr_layout, val_layout).get_slice(tidx)
    tile = ((None, None), bidx)
    tDgD = thr_store.partition_D(cute.zipped_divide(mD, tiler)[tile])
    tDcD = thr_load.partition_S(cute.zipped_divide(cute.make_identity_tensor(mD.shape), tiler)[tile])
    pred = per_vector(tDcD, mD.shape, VECTOR)  # N is a multiple of 4: a vector is wholly inside or outside

    # Launched early (programmatic dependent launch): wait here until the split GEMM has finished and its partials
    # are visible. Everything above, the partitions and predicates, overlapped the GEMM's last tiles.
    cute.arch.griddepcontrol_wait()
    # Σ_s W[s], s = 0, 1, ..., S - 1 in this order: the result does not depend on which partial was stored first.
    tWgW = thr_load.partition_S(cute.zipped_divide(mW[(None, None, 0)], tiler)[tile])
    acc = cute.make_fragment_like(tWgW)
    part = cute.make_fragment_like(tWgW)
    cute.copy(load, tWgW, acc, pred=pred)
    if cutlass.const_expr(stream_k is not None):  # stream-K: a tile has its own count of pieces, slices 0, 1, ...
        gemm_tiles = clusters_m * clusters_n  # the GEMM's cluster tiles
        pieces = per_vector_if(tDcD, VECTOR, lambda c: stream_pieces(
            work_at(c, stream_k, (clusters_m, clusters_n)), ctas, gemm_tiles, k_tiles)[1], cutlass.Int32)
        present = cute.make_fragment_like(pred)
    for s in cutlass.range_constexpr(1, splits):
        tWgW = thr_load.partition_S(cute.zipped_divide(mW[(None, None, s)], tiler)[tile])
        if cutlass.const_expr(stream_k is None):
            cute.copy(load, tWgW, part, pred=pred)
        else:  # a slice past the tile's pieces holds no partial of it: add zero
            for i in cutlass.range_constexpr(cute.size(pred)):
                present[i] = pred[i] & (s < pieces[i])
            part.fill(0.0)
            cute.copy(load, tWgW, part, pred=present)
        acc.store(acc.load() + part.load())

    if cutlass.const_expr(not fused.identity):  # the steps' fused epilogue, at each value's (m, n)
        for i in cutlass.range_constexpr(cute.size(acc)):
            if cute.elem_less(tDcD[i], mD.shape):
                acc[i] = epilogue.element(fused, acc[i], tDcD[i], mSrc, mBias, mAux, alpha, beta)
    out = cute.make_fragment_like(tDgD)
    out.store(acc.load().to(mD.element_type))
    cute.copy(store, out, tDgD, pred=pred)


@cute.jit
def host(pW: cute.Pointer, pD: cute.Pointer, m: cutlass.Int32, n: cutlass.Int32, k: cutlass.Int32,
         ldd: cutlass.Int32, stream: Any, pSrc: cute.Pointer, pBias: cute.Pointer, pAux: cute.Pointer,
         alpha: cutlass.Float32, beta: cutlass.Float32, ops: cutlass.Constexpr, splits: cutlass.Constexpr,
         fused: cutlass.Constexpr, stream_k: cutlass.Constexpr = None):
    """The reduction: D (M, N, leading dimension `ldd`) from the `splits` slices of the workspace at `pW`, with the
    fused epilogue `fused` reading C, the bias and aux at `pSrc`, `pBias`, `pAux`. `stream_k`: the stream-K Config
    of the GEMM that stored them, whose tiles have their own counts of pieces (K is read for it only); None:
    split-K, every tile in `splits` slices."""
    mW = workspace(pW, m, n, splits, ops.c_major)
    d_type = device.dtype(ops.c)
    ld = cute.assume(ldd, divby=128 // d_type.width)
    mD = cute.make_tensor(pD, cute.make_layout((m, n), stride=(ld, 1) if ops.c_major == "n" else (1, ld)))
    mSrc, mBias, mAux = epilogue.tensors(fused, pSrc, pBias, pAux, m, n, ops.c_major)
    # 256 threads: 8 rows of 32 threads along N, each 4 rows of one 16-byte vector of float32: a (32, 128) tile a
    # CTA, a warp reading 512 contiguous bytes of a row. A column-major D (swap-AB) the same way round: along M.
    if cutlass.const_expr(ops.c_major == "n"):
        thr_layout = cute.make_ordered_layout((8, 32), order=(1, 0))
        val_layout = cute.make_ordered_layout((4, VECTOR), order=(1, 0))
    else:
        thr_layout = cute.make_ordered_layout((32, 8), order=(0, 1))
        val_layout = cute.make_ordered_layout((VECTOR, 4), order=(0, 1))
    tiler, tv_layout = cute.make_layout_tv(thr_layout, val_layout)
    tiles = cute.size(cute.zipped_divide(mD, tiler), mode=[1])
    grid = (m, n, k, m)  # the stream-K GEMM's (clusters_m, clusters_n, k_tiles, ctas); split-K's reads none of it
    if cutlass.const_expr(stream_k is not None):
        clusters_m = (m + stream_k.tile_m * stream_k.cluster_m - 1) // (stream_k.tile_m * stream_k.cluster_m)
        clusters_n = (n + stream_k.tile_n * stream_k.cluster_n - 1) // (stream_k.tile_n * stream_k.cluster_n)
        k_tiles = (k + stream_k.tile_k - 1) // stream_k.tile_k
        fit = stream_k.sms // (stream_k.cluster_m * stream_k.cluster_n)
        grid = (clusters_m, clusters_n, k_tiles, stream_ctas(clusters_m * clusters_n, k_tiles, fit))
    _kernel(mW, mD, mSrc, mBias, mAux, alpha, beta, tiler, thr_layout, val_layout, fused, stream_k, *grid).launch(
        grid=(tiles, 1, 1), block=(cute.size(tv_layout, mode=[0]), 1, 1), stream=stream, use_pdl=True)


def compile_reduction(ops: Operands, splits: int, fused: epilogue.Fused, d: Any, stream: Any, options: str = "",
                      source: Any = None, bias: Any = None, aux: Any = None, stream_k: Any = None) -> Any:
    """``cute.compile`` the reduction into `d` (D's dtype from `ops`) for `splits` slices and the epilogue `fused`
    (after the stream-K GEMM of Config `stream_k`, if given); on CPU tensors too, as `launcher.compile_for`. The
    extents are runtime values: any serve to compile."""
    pD = make_ptr(device.dtype(ops.c), d.data_ptr(), GMEM, assumed_align=16)  # step 11's checks: 16-byte aligned
    pW = make_ptr(cutlass.Float32, d.data_ptr(), GMEM, assumed_align=16)  # a stand-in: only its type is compiled
    m, n = (cutlass.Int32(x) for x in d.shape)
    ldd = n if ops.c_major == "n" else m
    return cute.compile(host, pW, pD, m, n, cutlass.Int32(1), ldd, stream,
                        *launcher.epilogue_pointers(fused, ops, pD, source, bias, aux), cutlass.Float32(1.0),
                        cutlass.Float32(0.0), ops, splits, fused, stream_k, options=options)


@dataclass(frozen=True)
class Kernels:
    """What a split Config compiles to: the GEMM into the workspace (float32 C, no epilogue) and the reduction, as
    the DSL's compiled functions (which own the code) or, from `__tvm_ffi_object__`, their bare TVM FFI functions."""

    gemm: Any
    reduce: Any
    splits: int

    def __tvm_ffi_object__(self) -> Kernels:  # what the base launcher asks a compiled kernel for
        return replace(self, gemm=self.gemm.__tvm_ffi_object__(), reduce=self.reduce.__tvm_ffi_object__())


class Launcher(launcher.Launcher):
    """Step 11's launcher: `launcher.Launcher`, plus split-K for a Config with ``splits > 1``. The checks, the plan
    cache and the call are the base's; a split Config compiles to `Kernels`, and its plan's function is `run`, which
    takes a workspace from a small cache (per device, stream and size: repeated calls allocate nothing, and calls on
    two streams never share one) and launches both kernels on the call's stream."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.workspaces = Plans(limit=8)  # (device, stream, elements) -> float32 buffer
        self.partials: dict[Any, Any] = {}  # (operands with float32 C, Config) -> the compiled split GEMM

    def _compile(self, key: tuple[Any, ...], a: Any, b: Any, c: Any, stream: Any, **tensors: Any) -> Any:
        ops, config, fused = key
        if not config.partial:
            return super()._compile(key, a, b, c, stream, **tensors)
        # The split GEMM does not depend on D's dtype or the epilogue: one compile serves every reduction.
        partial = (replace(ops, c="float32"), config)
        if partial not in self.partials:
            # The workspace's slice 0, to compile, in D's major (swap-AB's Dᵀ is column-major).
            slice0 = torch.empty(c.shape, dtype=torch.float32, device="meta") if ops.c_major == "n" else \
                torch.empty(c.shape[::-1], dtype=torch.float32, device="meta").t()
            self.partials[partial] = launcher.compile_for(self.host, config, partial[0], a, b, slice0, stream,
                                                          options=launcher.TVM_FFI, fused=epilogue.PLAIN)
        reduce = compile_reduction(ops, config.splits, fused, c, stream, options=launcher.TVM_FFI,
                                   stream_k=config if config.stream_k else None, **tensors)
        return Kernels(self.partials[partial], reduce, config.splits)

    def plan(self, a: Any, b: Any, c: Any, config: Any, epilogue_: Any = None, alpha: Any = 1.0, beta: Any = 0.0,
             source: Any = None, bias: Any = None, aux: Any = None) -> launcher.Plan | None:
        """The base's `plan`; for a split Config, first the check that every split gets a k-tile, for a stream-K one
        its slices (`stream_config`), then for both the workspace's size, and a plan whose function is `run` on this
        call's device."""
        if config.stream_k and isinstance(a, torch.Tensor) and isinstance(c, torch.Tensor) and a.dim() == 2:
            config = self.stream_config(config, a, c)
        if config.partial and isinstance(a, torch.Tensor) and a.dim() == 2 and a.shape[1] > 0:
            k_tiles = -(-a.shape[1] // config.tile_k)
            if config.splits > k_tiles and not config.stream_k:
                raise ValueError(f"splits={config.splits}: K={a.shape[1]} is {k_tiles} k-tiles of {config.tile_k}, "
                                 f"and every split needs one: pass splits at most {k_tiles}, or splits=1")
            elements = config.splits * c.numel() if isinstance(c, torch.Tensor) else 0
            if elements >= 2**31:
                asked, fix = ("stream_k=True", "stream_k=False") if config.stream_k else (
                    f"splits={config.splits}", f"splits at most {(2**31 - 1) // c.numel()}, or splits=1")
                raise ValueError(f"{asked}: the workspace would hold {config.splits} × {c.numel()} = {elements} "
                                 f"partial sums, 2**31 or more (the kernels index with 32 bits): pass {fix}")
        planned = super().plan(a, b, c, config, epilogue_, alpha, beta, source, bias, aux)
        if planned is None or not config.partial:
            return planned
        return planned._replace(fn=functools.partial(self.run, planned.fn, c.device))

    def stream_config(self, config: Any, a: Any, d: Any) -> Any:
        """A stream-K `config` for A `a` and D `d` on their device: ``splits`` set to the workspace slices the
        problem's pieces need (`stream_slices`, at most `MAX_SPLITS`), as the kernels will cut it on this GPU's SMs;
        refused where the Config gives splits itself, or where the share arithmetic would overflow 32 bits."""
        if config.splits != 1:
            raise ValueError(f"Config(stream_k=True, splits={config.splits}): stream-K sets the splits itself, from "
                             f"the problem's shape; pass splits=1 with stream_k=True, or stream_k=False for split-K")
        if a.shape[1] == 0 or d.numel() == 0 or d.dim() != 2:
            return config
        if self.for_device is not None and a.device.type == "cuda":
            config = self.for_device(config, a.device)
        m, n = d.shape[::-1] if config.swap_ab else d.shape  # the kernel's M and N: swap-AB computes Dᵀ
        tiles = -(-m // (config.tile_m * config.cluster_m)) * -(-n // (config.tile_n * config.cluster_n))
        k_tiles = -(-a.shape[1] // config.tile_k)
        ctas = stream_ctas(tiles, k_tiles, config.sms // (config.cluster_m * config.cluster_n))
        if tiles * k_tiles * ctas >= 2**31:
            raise ValueError(f"stream_k=True: {tiles} tiles of {k_tiles} k-tiles on {ctas} clusters overflow the "
                             f"kernels' 32-bit share arithmetic; pass stream_k=False (split-K or none) for a problem "
                             f"this large")
        return replace(config, splits=stream_slices(tiles, k_tiles, ctas))

    def workspace(self, device: Any, stream: int, elements: int) -> Any:
        """A float32 buffer of `elements` on `device` for calls on `stream` (a handle), allocated once."""
        key = (device, stream, elements)
        buffer = self.workspaces.get(key)
        if buffer is None:
            buffer = torch.empty(elements, dtype=torch.float32, device=device)
            self.workspaces.put(key, buffer)
        return buffer

    def run(self, kernels: Kernels, device: Any, pa: int, pb: int, pd: int, m: int, n: int, k: int, lda: int,
            ldb: int, ldd: int, stream: int, src: int, bias: int, aux: int, alpha: float, beta: float) -> None:
        """One split call, with what the base launcher calls a fused step's TVM FFI function with (addresses,
        extents, the stream's handle, alpha and beta): the partial products into the workspace, then the reduction
        into D."""
        w = self.workspace(device, stream, kernels.splits * m * n).data_ptr()
        # The split GEMM lays the workspace out itself (`workspace`, in D's major): the ldc it is passed is not read.
        kernels.gemm(pa, pb, w, m, n, k, lda, ldb, n, stream, w, w, w, 1.0, 0.0)
        kernels.reduce(w, pd, m, n, k, ldd, stream, src, bias, aux, alpha, beta)
