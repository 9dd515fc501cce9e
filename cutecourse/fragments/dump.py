"""Register dumps: one warp runs one instruction and writes what each lane really holds, so that a GPU test can hold
the simulator (:mod:`cutecourse.fragments.lanes`) to the hardware.

- ``ldmatrix_dump(rows, num_matrices, transpose)``: ``rows`` (64 * num_matrices 16-bit values, the stacked 8 x 8
  matrices row after row) go to shared memory; lane ``t`` gives the address of row ``t`` (the DSL's own ldmatrix atom,
  tiled over exactly its matrices, decides that, as in any kernel); the result ``out[lane, register, half]`` is
  what ``ldmatrix.x{n}[.trans]`` put in lane ``lane``'s registers (lane = ``%laneid``).
- ``mma_c_dump(a, b)``: one ``mma.sync.m16n8k{K}`` of A (16, K) and B (8, K) (both K-major, B as (N, K)), operands
  loaded by the TiledMMA's own partitions; ``out[lane, value]`` is lane ``lane``'s fp32 accumulator ``value``,
  and ``c`` (16, 8) the product stored through the same partition.

``ptx_of(kind, arch, ...)`` compiles either on a CPU (no GPU needed) for the census test. Needs the CuTe DSL and, to
run, torch with an sm_80+ GPU.
"""

from __future__ import annotations

from typing import Any

import cutlass
import cutlass.cute as cute
from cutlass.cute.runtime import from_dlpack

from cutecourse.kernels import launch, ptx

_DTYPES = {"float16": cutlass.Float16, "bfloat16": cutlass.BFloat16}


@cute.kernel
def _ldmatrix_kernel(mRows: cute.Tensor, mOut: cute.Tensor, tiled_copy: cute.TiledCopy, elements: cutlass.Constexpr):
    lane = cute.arch.lane_idx()
    smem = cutlass.memory.SmemAllocator()
    sRows = smem.allocate_tensor(mRows.element_type, cute.make_layout(elements), 16)  # rows of 16 bytes, aligned
    for i in cutlass.range_constexpr(elements // 32):
        sRows[lane + 32 * i] = mRows[lane + 32 * i]
    cute.arch.sync_threads()
    thr_copy = tiled_copy.get_slice(lane)
    regs = cute.make_rmem_tensor(thr_copy.partition_D(sRows).shape, mRows.element_type)
    cute.copy(tiled_copy, thr_copy.partition_S(sRows), regs)
    for i in cutlass.range_constexpr(cute.size(regs)):  # value i = half i % 2 of register i // 2
        mOut[lane, i] = regs[i]


@cute.jit
def ldmatrix_host(mRows: cute.Tensor, mOut: cute.Tensor, stream: Any, num_matrices: cutlass.Constexpr,
                  transpose: cutlass.Constexpr):
    atom = cute.make_copy_atom(cute.nvgpu.warp.LdMatrix8x8x16bOp(transpose, num_matrices), mRows.element_type)
    elements = 64 * num_matrices
    # The atom over exactly its own matrices: thread t's source is row t of the stacked matrices (rows of lanes past
    # 8 * num_matrices repeat, and the hardware ignores them), its destination the atom's registers.
    tiled_copy = cute.make_tiled_copy(atom, atom.layout_dst_tv, (elements,))
    _ldmatrix_kernel(mRows, mOut, tiled_copy, elements).launch(grid=(1, 1, 1), block=(32, 1, 1), stream=stream)


@cute.kernel
def _mma_kernel(mA: cute.Tensor, mB: cute.Tensor, mC: cute.Tensor, mOut: cute.Tensor, tiled_mma: cute.TiledMma):
    lane = cute.arch.lane_idx()
    thr_mma = tiled_mma.get_slice(lane)
    tCgA = thr_mma.partition_A(mA)
    tCgB = thr_mma.partition_B(mB)
    tCgC = thr_mma.partition_C(mC)
    tCrA, tCrB = tiled_mma.make_fragment_A(tCgA), tiled_mma.make_fragment_B(tCgB)
    for i in cutlass.range_constexpr(cute.size(tCrA)):
        tCrA[i] = tCgA[i]
    for i in cutlass.range_constexpr(cute.size(tCrB)):
        tCrB[i] = tCgB[i]
    acc = tiled_mma.make_fragment_C(tCgC)
    acc.fill(0.0)
    cute.gemm(tiled_mma, acc, tCrA, tCrB, acc)
    for i in cutlass.range_constexpr(cute.size(acc)):
        mOut[lane, i] = acc[i]
        tCgC[i] = acc[i]


@cute.jit
def mma_host(mA: cute.Tensor, mB: cute.Tensor, mC: cute.Tensor, mOut: cute.Tensor, stream: Any,
             k: cutlass.Constexpr):
    op = cute.nvgpu.warp.MmaF16BF16Op(mA.element_type, cutlass.Float32, (16, 8, k))
    _mma_kernel(mA, mB, mC, mOut, cute.make_tiled_mma(op)).launch(grid=(1, 1, 1), block=(32, 1, 1), stream=stream)


def _check(name: str, t: Any, shape: tuple[int, ...], dtypes: tuple[str, ...]) -> None:
    import torch

    if not isinstance(t, torch.Tensor) or tuple(t.shape) != shape or launch.dtype_name(t) not in dtypes:
        got = f"{type(t).__name__} {tuple(t.shape)} {t.dtype}" if isinstance(t, torch.Tensor) else type(t).__name__
        raise ValueError(f"{name} must be a {shape} tensor of {' or '.join(dtypes)}, got {got}: e.g. "
                         f"torch.randn{shape}.to(torch.{dtypes[0]}).cuda()")
    if not t.is_contiguous():
        raise ValueError(f"{name} must be contiguous: {name}.contiguous()")


def _ldmatrix_args(rows: Any, num_matrices: int, transpose: bool) -> list[Any]:
    import torch

    from cutecourse.fragments.atoms import ldmatrix

    ldmatrix(num_matrices, transpose)  # refuses a count or flag the instruction does not have
    _check("rows", rows, (64 * num_matrices,), tuple(_DTYPES))
    out = torch.full((32, 2 * num_matrices), float("nan"), dtype=rows.dtype, device=rows.device)
    return [rows, out]


def _mma_args(a: Any, b: Any) -> list[Any]:
    import torch

    from cutecourse.fragments.atoms import mma_atom

    k = a.shape[-1] if isinstance(a, torch.Tensor) else None
    mma_atom(k)
    _check("a", a, (16, k), tuple(_DTYPES))
    _check("b", b, (8, k), (launch.dtype_name(a),))
    nan = float("nan")
    return [a, b, torch.full((16, 8), nan, device=a.device), torch.full((32, 4), nan, device=a.device)]


_COMPILED: dict[Any, Any] = {}


def _run(host: Any, key: Any, tensors: list[Any], *constants: Any) -> None:
    stream = launch.current_stream(tensors[0].get_device())
    cute_tensors = [from_dlpack(t) for t in tensors]
    fn = _COMPILED.get(key)
    if fn is None:
        fn = _COMPILED[key] = cute.compile(host, *cute_tensors, stream, *constants)
    fn(*cute_tensors, stream)


def ldmatrix_dump(rows: Any, num_matrices: int = 4, transpose: bool = False) -> Any:
    """Run ldmatrix.x{num_matrices}[.trans] on the GPU: (32, num_matrices, 2), each lane's registers' halves."""
    tensors = _ldmatrix_args(rows, num_matrices, transpose)
    _run(ldmatrix_host, ("ldmatrix", num_matrices, transpose, rows.dtype), tensors, num_matrices, transpose)
    return tensors[1].view(32, num_matrices, 2)


def mma_c_dump(a: Any, b: Any) -> tuple[Any, Any]:
    """Run one mma.sync.m16n8k{K} on the GPU: (each lane's 4 fp32 accumulators (32, 4), C (16, 8) = a @ b.T)."""
    tensors = _mma_args(a, b)
    k = a.shape[1]
    _run(mma_host, ("mma", k, a.dtype), tensors, k)
    return tensors[3], tensors[2]


def ptx_of(kind: str, arch: str, dtype: str = "float16", num_matrices: int = 4, transpose: bool = False,
           k: int = 16) -> str:
    """The PTX of a dump kernel (`kind` "ldmatrix" or "mma") compiled for `arch` from CPU tensors: no GPU needed."""
    import torch
    from cutlass.cute.runtime import make_fake_stream

    if dtype not in _DTYPES:
        raise ValueError(f"dtype={dtype!r}; the dumps take {' or '.join(_DTYPES)}")
    t = getattr(torch, dtype)
    if kind == "ldmatrix":
        tensors = _ldmatrix_args(torch.zeros(64 * num_matrices, dtype=t), num_matrices, transpose)
        host = ldmatrix_host
        constants = (num_matrices, transpose)
    elif kind == "mma":
        tensors = _mma_args(torch.zeros(16, k, dtype=t), torch.zeros(8, k, dtype=t))
        host = mma_host
        constants = (k,)
    else:
        raise ValueError(f"kind={kind!r}; the dumps are 'ldmatrix' and 'mma'")
    return ptx.compile_ptx(host, *[from_dlpack(x) for x in tensors], make_fake_stream(), *constants, arch=arch)
