"""Checks of lesson 3 (tensors, views and thread partitioning): local_partition by hand, a batched transpose kernel
through a padded shared-memory tile (its PTX on a CPU, its results on a GPU), and the shared-memory bank arithmetic
behind the padded tile.

The expected values come from the eager algebra (:mod:`cutecourse.layout`) and the bank model of
:mod:`cutecourse.hw.banks`; the hidden tests (tests/hidden/test_03_tensors_partitioning.py) use the same references
and generators on random inputs.
"""

from __future__ import annotations

import random
from typing import Any

import cutecourse.layout as eager
from cutecourse.grading import wire
from cutecourse.grading.checks import Check, exact_hint, input_of, matrix_cases

# --------------------------------------------------------------------------- 3.1 local_partition by hand


def reference_thread_coords(tile_shape: tuple[int, int], thr_shape: tuple[int, int], thr_stride: tuple[int, int],
                            tid: int) -> list[tuple[int, int]]:
    """The (m, n) coordinates of the tile that ``local_partition(tile, thr_shape:thr_stride, tid)`` gives thread
    `tid`, in the order of the partitioned tensor (its first mode fastest), computed with the eager algebra."""
    thr = eager.make_layout(thr_shape, stride=thr_stride)
    crd = next(eager.idx2crd(i, thr.shape) for i in range(thr.size()) if thr(i) == tid)  # thr(crd) == tid
    tile = eager.make_layout(tile_shape)  # column-major: (m, n) -> m + M * n
    tiled = eager.zipped_divide(tile, thr_shape)  # ((thread tile), (repeats))
    rest = eager.size(eager.get(tiled, 1))
    return [divmod(tiled((crd, j)), tile_shape[0])[::-1] for j in range(rest)]


def random_partition_case(rng: random.Random) -> tuple[tuple[int, int], tuple[int, int], tuple[int, int], int]:
    a, b = rng.randint(1, 8), rng.randint(1, 8)
    tile = (a * rng.randint(1, 5), b * rng.randint(1, 5))
    stride = (b, 1) if rng.random() < 0.5 else (1, a)  # row-major or column-major threads
    return tile, (a, b), stride, rng.randrange(a * b)


def _partition_cases() -> list[tuple[Any, ...]]:
    return [((8, 12), (2, 4), (4, 1), 5), ((32, 32), (8, 32), (32, 1), 37), ((6, 4), (3, 2), (1, 3), 4),
            ((4, 8), (4, 8), (8, 1), 13), ((16, 6), (4, 2), (1, 4), 6)]


def _judge_partition(case: tuple[Any, ...], value: Any, outputs: list[Any]) -> str | None:
    tile, thr_shape, thr_stride, tid = case
    want = reference_thread_coords(tile, thr_shape, thr_stride, tid)
    if not isinstance(value, (list, tuple)) or not all(
            isinstance(c, tuple) and len(c) == 2 and all(isinstance(x, int) for x in c) for c in value):
        return f"expected a list of (m, n) tuples of ints, got {value!r}"
    got = list(value)
    if len(got) != len(want):
        return (f"returned {len(got)} coordinates; every thread owns size(tile) / size(thr_layout) = "
                f"{len(want)} of them")
    if len(set(got)) != len(got):
        twice = next(c for c in got if got.count(c) > 1)
        return (f"{twice} is listed twice: the thread steps by the whole thread shape {thr_shape} in both modes, "
                f"so each of its coordinates comes once")
    if set(got) != set(want):
        stranger = next(c for c in got if c not in want)
        return (f"{stranger} is not thread {tid}'s: find the thread coordinate c with thr_layout(c) == {tid} "
                f"(thr_layout = {thr_shape}:{thr_stride}); the thread owns the elements whose coordinate is "
                f"c modulo the thread shape")
    if got != want:
        return ("the right elements in the wrong order: list them as the partitioned tensor enumerates them, "
                "its first mode (m) fastest")
    return None


thread_coords = Check("thread_coords", "thread_coords", _partition_cases, _judge_partition)

# --------------------------------------------------------------------------- 3.2 the batched transpose through smem


#: (dtype, arch) of the batched transpose's PTX checks: each element width, both archs.
PTX_CASES = [("float32", "sm_80"), ("bfloat16", "sm_80"), ("float16", "sm_90a")]


def ptx_hint(code: Any, dtype: str) -> str | None:
    """What is wrong with the batched transpose's PTX for `dtype` (None if nothing): through a shared-memory tile
    with a barrier, 4 scalar global loads and 4 stores per thread, each guarded by a predicate."""
    from cutecourse.kernels import ptx

    if not isinstance(code, str) or ".entry" not in code:
        return f"expected the PTX text (a str with an .entry), got {type(code).__name__}"
    bits = {"float32": 32, "float16": 16, "bfloat16": 16}[dtype]
    loads, stores = ptx.count(code, f"ld.global.b{bits}"), ptx.count(code, f"st.global.b{bits}")
    if not ptx.count(code, "st.shared") or not ptx.count(code, "ld.shared"):
        return "the PTX never stores to and loads from shared memory: the tile must pass through sT"
    if not ptx.count(code, "bar.sync"):
        return ("no barrier between writing the tile to shared memory and reading it back: a thread would read "
                "elements another thread has not written yet (cute.arch.sync_threads())")
    if loads != 4 or stores != 4:
        return (f"the PTX has {loads} ld.global.b{bits} and {stores} st.global.b{bits}; each of the 256 threads "
                f"should read 4 elements of its matrix's 32x32 tile into shared memory and write 4 back out")
    if ptx.guarded(code) < loads + stores:
        return ("some global accesses are not guarded by a predicate: with M or N not a multiple of 32, threads of "
                "the edge tiles would read and write outside the matrices (compare each element's coordinate in cS "
                "with the shape)")
    return None


def ptx_case(dtype: str, arch: str) -> tuple[Any, ...]:
    """A PTX case: the arch, then stand-ins of a batch S (2, 64, 96) and its D (2, 96, 64), on the CPU."""
    import numpy as np

    zeros = np.zeros((2, 64, 96), dtype=np.float32)
    return (arch, wire.tensor(zeros, dtype, "cpu"), wire.tensor(zeros.transpose(0, 2, 1), dtype, "cpu"))


def _judge_ptx(case: tuple[Any, ...], value: Any, outputs: list[Any]) -> str | None:
    return ptx_hint(value, case[1]["$tensor"]["dtype"])


batched_ptx = Check("batched_ptx", "batched_host", lambda: [ptx_case(d, a) for d, a in PTX_CASES], _judge_ptx,
                    via="ptx")


def transpose_hint(src: Any, out: Any) -> str | None:
    """What is wrong with `out` as the batched transpose of `src` (B, M, N) (numpy; NaN = never written), or None."""
    import numpy as np

    src, got = np.asarray(src, dtype=np.float64), np.asarray(out, dtype=np.float64)
    want = src.transpose(0, 2, 1)
    if got.shape == want.shape and not np.isnan(got).any() and not np.array_equal(got, want):
        if np.array_equal(got.reshape(-1), src.reshape(-1)):
            return "the output holds S in row-major order, not Sᵀ: write through the view mDT of D"
        if src.shape[0] > 1 and np.array_equal(got, np.broadcast_to(want[:1], want.shape)):
            return "every matrix of the batch holds the first one's transpose: slice the batch with bidz"
    return exact_hint(want, got)


def _transpose_cases() -> list[tuple[Any, ...]]:
    return matrix_cases(303, (((1, 32, 32), "float32"), ((3, 64, 96), "float32"), ((2, 37, 53), "float32"),
                              ((4, 100, 7), "float16"), ((2, 129, 65), "bfloat16")), transposed=True)


def _judge_transpose(case: tuple[Any, ...], value: Any, outputs: list[Any]) -> str | None:
    (out,) = outputs
    return transpose_hint(input_of(case), out)


transpose_batched = Check("transpose_batched", "batched_host", _transpose_cases, _judge_transpose, gpu=80,
                          via="launch")

# --------------------------------------------------------------------------- 3.3, 3.4 banks and padding


def reference_bank(m: int, n: int, col_stride: int, element_bits: int) -> int:
    from cutecourse.hw import banks

    return banks.bank_of(m + n * col_stride, element_bits)


def random_bank_case(rng: random.Random) -> tuple[int, int, int, int]:
    bits = rng.choice([8, 16, 32, 64])
    tile_m = rng.choice([16, 32, 64, 128])
    return rng.randrange(tile_m), rng.randrange(64), tile_m + rng.randint(0, 8), bits


def _bank_cases() -> list[tuple[Any, ...]]:
    return [(0, 1, 64, 32), (3, 5, 65, 32), (7, 2, 66, 16), (1, 3, 64, 16), (5, 9, 33, 64), (6, 4, 65, 8)]


def _judge_bank(case: tuple[Any, ...], value: Any, outputs: list[Any]) -> str | None:
    m, n, col_stride, bits = case
    if not isinstance(value, int) or isinstance(value, bool):
        return f"expected an int bank number, got {value!r}"
    if not 0 <= value < 32:
        return f"got {value}; there are 32 banks, numbered 0-31"
    if value != reference_bank(*case):
        return (f"got {value}; the element sits at offset m + n * col_stride elements, i.e. "
                f"that times {bits // 8} bytes; a bank holds every 32nd 4-byte word")
    return None


smem_bank = Check("smem_bank", "smem_bank", _bank_cases, _judge_bank)


def reference_row_wavefronts(tile_m: int, pad: int, element_bits: int) -> int:
    """Wavefronts for a warp storing row 0 of an M-contiguous (tile_m, 32) tile, thread t -> column t, scalar."""
    from cutecourse.hw import banks

    layout = eager.make_layout((tile_m, 32), stride=(1, tile_m + pad))
    per_phase = min(32, 128 * 8 // element_bits)
    phases = [[(0, n) for n in range(p, p + per_phase)] for p in range(0, 32, per_phase)]
    return banks.wavefronts(layout, element_bits, phases)


def random_wavefront_case(rng: random.Random) -> tuple[int, int, int]:
    return rng.choice([8, 16, 24, 32, 48, 64, 96, 128]), rng.randint(0, 9), rng.choice([16, 32, 64])


def _wavefront_cases() -> list[tuple[Any, ...]]:
    return [(64, 0, 32), (64, 1, 32), (64, 0, 16), (64, 1, 16), (64, 2, 16), (32, 1, 64), (32, 2, 64)]


def _judge_wavefronts(case: tuple[Any, ...], value: Any, outputs: list[Any]) -> str | None:
    tile_m, pad, bits = case
    if not isinstance(value, int) or isinstance(value, bool):
        return f"expected an int, got {value!r}"
    if value != reference_row_wavefronts(*case):
        per_phase = min(32, 128 * 8 // bits)
        return (f"got {value}; split the warp into phases of {per_phase} threads ({per_phase * bits // 8} bytes "
                f"each), and in each "
                f"phase count the most distinct 4-byte words that fall into one bank (threads that share a word "
                f"share it); the answer is the sum over phases")
    return None


row_wavefronts = Check("row_wavefronts", "row_wavefronts", _wavefront_cases, _judge_wavefronts)
