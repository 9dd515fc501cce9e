"""The classic mbarrier mistakes, made safe to run: a producer thread signals one mbarrier, a consumer warp waits on
it a bounded number of times, and each scenario says whether the wait completed and after how many tries.

An mbarrier (a 64-bit word in shared memory) counts a *phase*. ``mbarrier_init(bar, count)`` starts phase 0 with
`count` pending arrivals and no pending bytes. The phase completes, and the next one starts with the same count,
when both have reached zero. Three rules follow, and breaking any one of them hangs a pipeline:

1. **Arrival count.** Every phase needs exactly `count` arrivals (``mbarrier_arrive``). Initialise with the number
   of threads (or elected threads) that really arrive: init with 2 and arrive once, and the phase never completes.
2. **Expect-tx bytes.** ``mbarrier_arrive_and_expect_tx(bar, bytes)`` arrives *and* adds `bytes` to the pending
   bytes; each TMA or bulk copy that names the barrier (``cute.copy(..., mbar_ptr=bar)``) subtracts what it
   delivered when it lands. Arm exactly the bytes the copies deliver: arm 512 for a 256-byte copy, and the phase
   never completes. (This is also why the consumer may read the tile once the phase completes: the bytes are in.)
3. **Parity.** A wait names the phase by its parity: ``mbarrier_try_wait(bar, P)`` is true once the most recent
   phase of parity P has completed, i.e. once the barrier's current phase has parity ``1 - P``. A fresh barrier is
   in phase 0, so the phase "before" it (parity 1) counts as complete: waiting for parity 0 blocks until phase 0
   completes, and waiting for parity 1 passes at once, before anything has arrived. After phase 0 completes the
   barrier is in phase 1: parity 0 passes (phase 0 is done) and parity 1 blocks until phase 1 completes. So the
   k-th use of a barrier (k = 0, 1, ...) waits for parity ``k % 2``: a consumer of a ring of `stages` slots waits
   for ``(kt // stages) % 2``, and a producer's first wait on a fresh "empty" barrier uses parity 1, which passes.
   Get it wrong one way and the wait blocks on a phase nobody completes; the other way and it passes on data that
   has not arrived.

The kernel, one CTA of two warps: warp 0's elected thread initialises the barrier while the CTA fills a 256-byte
shared buffer with -1; after a CTA barrier the elected thread, the producer, arrives as the scenario says (its first
arrive arming the expected bytes) and starts a 256-byte bulk copy of 1..64 (int32) into the buffer. A second CTA
barrier before warp 1 waits makes each outcome deterministic: a plain arrive has completed its phase (or not) by
then, and only a copy's bytes can still be in flight. Warp 1, the consumers, then calls ``mbarrier_try_wait`` at
most `tries` times (each call may suspend the thread for a while, so a wrong wait costs at most `tries` of those,
and never more than `max_cycles`), and reports whether it completed, how many calls it made, the cycles spent, and
the sum of the buffer it reads on completion (2080 when the copy landed, -64 when nothing did).

    run("right")          # Outcome(completed=True, tries=1, cycles=..., seen=2080)
    run("arrival_count")  # Outcome(completed=False, tries=1000, cycles=..., seen=None): a hang, bounded
    run_all()             # every scenario of SCENARIOS
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, NamedTuple

import cutlass
import cutlass.cute as cute
from cutlass.cute.nvgpu import cpasync
from cutlass.cute.runtime import make_ptr

from cutecourse.kernels import launch, ptx

WORDS = 64  # int32 words the bulk copy moves: 256 bytes
COPY_BYTES = WORDS * 4
SENTINEL = -1  # what the buffer holds before the copy lands
MAX_TRIES = 1_000_000


@dataclass(frozen=True)
class Scenario:
    """One way of using the barrier: what the producer does and which parity the consumers wait for."""

    what: str  # the rule kept or broken, in words
    count: int  # the arrival count mbarrier_init sets
    arrivals: int  # arrives the producer makes; the first also arms `expect_bytes` when that is not 0
    expect_bytes: int  # bytes the producer's first arrive expects
    copy: bool  # whether the producer starts the bulk copy of COPY_BYTES that completes bytes on the barrier
    parity: int  # the parity the consumers wait for
    completes: bool  # what the rules predict


SCENARIOS = {
    "right": Scenario("count 1, one arrive arming 256 bytes, a 256-byte copy, wait for parity 0", 1, 1, COPY_BYTES,
                      True, 0, True),
    "arrival_count": Scenario("rule 1 broken: count 2 but one arrive", 2, 1, COPY_BYTES, True, 0, False),
    "expect_tx": Scenario("rule 2 broken: 512 bytes armed, 256 delivered", 1, 1, 2 * COPY_BYTES, True, 0, False),
    "parity": Scenario("rule 3 broken: phase 0 completed (a plain arrive), then a wait for parity 1, which is phase 1",
                       1, 1, 0, False, 1, False),
    "fresh_parity": Scenario("rule 3 broken the other way: parity 1 on a fresh barrier passes with nothing arrived",
                             1, 0, 0, False, 1, True),
}


class Outcome(NamedTuple):
    completed: bool  # the wait saw the phase complete
    tries: int  # mbarrier_try_wait calls made
    cycles: int  # SM cycles the consumer spent waiting
    seen: int | None  # sum of the buffer the consumer read on completion (2080: the copy's data; -64: none)


@cute.kernel
def _kernel(gSrc: cute.Tensor, mOut: cute.Tensor, count: cutlass.Int32, arrivals: cutlass.Int32,
            expect_bytes: cutlass.Int32, copy: cutlass.Int32, parity: cutlass.Int32, tries: cutlass.Int32,
            max_cycles: cutlass.Int64):
    tidx, _, _ = cute.arch.thread_idx()
    warp = cute.arch.make_warp_uniform(cute.arch.warp_idx())
    smem = cutlass.memory.SmemAllocator()
    bar = smem.allocate_array(cutlass.Int64, 1)
    sData = smem.allocate_tensor(cutlass.Int32, cute.make_layout(WORDS), 16)

    if warp == 0:
        with cute.arch.elect_one():
            cute.arch.mbarrier_init(bar, count)
    if tidx < WORDS:
        sData[tidx] = cutlass.Int32(SENTINEL)
    cute.arch.mbarrier_init_fence()
    cute.arch.fence_proxy("async.shared", space="cta")  # the sentinel is written before the copy's bytes
    cute.arch.barrier()

    if warp == 0:
        # The producer: its arrives (the first arming the expected bytes), then the copy that delivers them.
        with cute.arch.elect_one():
            for a in cutlass.range(arrivals, unroll=1):
                if a == 0 and expect_bytes > 0:
                    cute.arch.mbarrier_arrive_and_expect_tx(bar, expect_bytes)
                else:
                    cute.arch.mbarrier_arrive(bar)
            if copy != 0:
                atom = cute.make_copy_atom(cpasync.CopyBulkG2SOp(), cutlass.Int32, num_bits_per_copy=COPY_BYTES * 8)
                cute.copy(atom, gSrc, sData, mbar_ptr=bar)
    cute.arch.barrier()

    if warp == 1:
        # The consumers: a bounded wait, where a pipeline would loop until the phase completes.
        done = cutlass.Boolean(False)
        calls = cutlass.Int32(0)
        start = cute.arch.clock64()
        spent = cutlass.Int64(0)
        while (not done) and calls < tries and spent < max_cycles:
            done = cute.arch.mbarrier_try_wait(bar, parity)
            calls += 1
            spent = cute.arch.clock64() - start
        seen = cutlass.Int32(0)
        if done:
            for i in cutlass.range(WORDS, unroll_full=True):
                seen += sData[i]
        if cute.arch.lane_idx() == 0:
            mOut[0, 0] = cutlass.Int64(1) if done else cutlass.Int64(0)
            mOut[0, 1] = calls.to(cutlass.Int64)
            mOut[0, 2] = spent
            mOut[0, 3] = seen.to(cutlass.Int64)
    cute.arch.barrier()  # no thread leaves while the copy may still write the CTA's shared memory


@cute.jit
def host(pSrc: cute.Pointer, mOut: cute.Tensor, count: cutlass.Int32, arrivals: cutlass.Int32,
         expect_bytes: cutlass.Int32, copy: cutlass.Int32, parity: cutlass.Int32, tries: cutlass.Int32,
         max_cycles: cutlass.Int64, stream: Any):
    gSrc = cute.make_tensor(pSrc, cute.make_layout(WORDS))  # a global-memory tensor, as bulk copies need
    _kernel(gSrc, mOut, count, arrivals, expect_bytes, copy, parity, tries, max_cycles).launch(
        grid=(1, 1, 1), block=(2 * cute.arch.WARP_SIZE, 1, 1), stream=stream)


def _arguments(key: Any, src: Any, out: Any) -> list[Any]:
    return [make_ptr(cutlass.Int32, src.data_ptr(), cute.AddressSpace.gmem, assumed_align=16), launch.cute_tensor(out)]


def _scalars(scenario: Scenario, tries: int, max_cycles: int) -> tuple[int, ...]:
    return (scenario.count, scenario.arrivals, scenario.expect_bytes, int(scenario.copy), scenario.parity, tries,
            max_cycles)


def compile(key: Any, src: Any, out: Any, stream: Any, options: str = "") -> Any:
    """``cute.compile`` the demo (one kernel for every scenario: they differ in runtime arguments); `src` (1, 64)
    int32 and `out` (1, 4) int64 may be CPU tensors (compiling without a GPU)."""
    scalars = [cutlass.Int32(0)] * 6 + [cutlass.Int64(0)]  # count, arrivals, expect_bytes, copy, parity, tries
    return cute.compile(host, *_arguments(key, src, out), *scalars, stream, options=options)


_launcher = launch.Launcher(compile, _arguments)


def buffers(device: Any = "cuda") -> tuple[Any, Any]:
    """(src, out): the 64 int32 words 1..64 the copy moves, and the consumer's report."""
    import torch

    return (torch.arange(1, WORDS + 1, dtype=torch.int32, device=device).view(1, WORDS),
            torch.zeros(1, 4, dtype=torch.int64, device=device))


def _scenario(name: str) -> Scenario:
    if name not in SCENARIOS:
        raise ValueError(f"scenario={name!r}: pick one of {', '.join(SCENARIOS)}")
    return SCENARIOS[name]


def run(scenario: str = "right", tries: int = 1000, max_cycles: int = 2 * 10**8) -> Outcome:
    """Run one scenario of SCENARIOS on the GPU (sm_90): the consumers' wait, at most `tries` calls of
    ``mbarrier_try_wait`` and `max_cycles` SM cycles (0.1 s at 2 GHz), and what they saw."""
    import torch

    chosen = _scenario(scenario)
    if not isinstance(tries, int) or not 100 <= tries <= MAX_TRIES:
        raise ValueError(f"tries={tries!r}: pass 100 to {MAX_TRIES} (a wait that gives up must outlast the copy "
                         "it waits for, which may still be writing shared memory), e.g. tries=1000")
    if not isinstance(max_cycles, int) or not 10**6 <= max_cycles <= 2**62:
        raise ValueError(f"max_cycles={max_cycles!r}: pass at least 10**6 cycles (about 0.5 ms), e.g. 2 * 10**8")
    major, minor = torch.cuda.get_device_capability()
    if major < 9:
        raise RuntimeError(f"the mbarrier demo needs an sm_90 (Hopper) GPU or newer: mbarrier waits with expect-tx "
                           f"and bulk copies are Hopper's; this GPU is sm_{major}{minor}")
    src, out = buffers()
    _launcher(None, src, out, scalars=_scalars(chosen, tries, max_cycles))
    torch.cuda.synchronize()
    completed, calls, cycles, seen = out[0].tolist()
    return Outcome(bool(completed), calls, cycles, seen if completed else None)


def run_all(tries: int = 1000) -> dict[str, Outcome]:
    """Every scenario's outcome, in the order of SCENARIOS."""
    return {name: run(name, tries) for name in SCENARIOS}


def kernel_ptx(arch: str = "sm_90a") -> str:
    """The demo's PTX for `arch` (sm_90 or newer: mbarrier waits, expect-tx and bulk copies are Hopper's), compiled
    without a GPU."""
    from cutlass.cute.runtime import make_fake_stream

    found = re.fullmatch(r"sm_(\d{2,3})[af]?", arch) if isinstance(arch, str) else None
    if found is None or int(found.group(1)) < 90:
        raise ValueError(f"arch={arch!r}: the demo's mbarrier waits, expect-tx and bulk copy need sm_90 or newer; "
                         "pass arch='sm_90a'")

    src, out = buffers(device="cpu")
    return ptx.ptx_of(lambda options: compile(None, src, out, make_fake_stream(), options), arch)


def mbarrier_instructions(code: str) -> dict[str, int]:
    """How many times each mbarrier instruction, and the bulk copy that completes bytes on one, appears in `code`."""
    return {op: n for op, n in sorted(ptx.census(code).items()) if op.startswith(("mbarrier", "cp.async.bulk"))}
