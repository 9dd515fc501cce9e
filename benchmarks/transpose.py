"""Transpose bandwidth against the device copy, measured in the same run on the same data.

    python benchmarks/transpose.py [--size 8192] [--reps 50]

For each dtype: a device-to-device copy of the matrix (torch), the naive (layouts only) and the smem transpose,
and torch's own ``x.t().contiguous()``. Bandwidth counts bytes read plus bytes written; the ratio is to the copy.
Times are medians of CUDA-event timings of 10 back-to-back launches after a warm-up, over two buffer sets (each
512 MiB at 8192² fp32, far past the 60 MB L2) used in turn.
"""

from __future__ import annotations

import argparse
import time

import torch
from tqdm import tqdm

from cutecourse.bench import median_ms
from cutecourse.kernels.transpose import plan, transpose


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=8192)
    parser.add_argument("--reps", type=int, default=50)
    parser.add_argument("--sweep", action="store_true", help="also time other smem tiles and block sizes")
    args = parser.parse_args()
    n = args.size
    rows = []
    shapes = [(64, 256)] + ([(64, 128), (128, 256), (128, 512), (32, 64)] if args.sweep else [])
    kernels = ["copy", "naive"] + [f"smem {t}x{t}/{th}" for t, th in shapes] + ["torch .t().contiguous()"]
    jobs = [(dtype, name) for dtype in (torch.float32, torch.float16, torch.bfloat16) for name in kernels]
    for dtype, name in tqdm(jobs, desc="timing"):
        srcs = [torch.randn(n, n, device="cuda").to(dtype) for _ in range(2)]
        dsts = [torch.empty(n, n, device="cuda", dtype=dtype) for _ in range(2)]
        if name == "copy":
            fn = lambda i: dsts[i].copy_(srcs[i])  # noqa: E731
        elif name.startswith("torch"):
            fn = lambda i: dsts[i].copy_(srcs[i].t())  # noqa: E731
        else:
            variant, tile, threads = (name, 64, 256) if name == "naive" else (
                "smem", *map(int, name.split()[1].split("x")[1].split("/")))
            kw = {"variant": variant, "tile": tile, "threads": threads}
            try:
                transpose(srcs[0], dsts[0], **kw)
                torch.cuda.synchronize()
            except Exception as exc:  # a configuration the GPU refuses (e.g. too much shared memory) is reported
                print(f"{name} {dtype}: {type(exc).__name__}: {str(exc).strip().splitlines()[0][:100]}")
                continue
            assert torch.equal(dsts[0], srcs[0].t()), f"{name} {dtype}: wrong result"
            fn = lambda i, kw=kw: transpose(srcs[i], dsts[i], **kw)  # noqa: E731
        ms = median_ms(fn, args.reps)
        gbs = 2 * n * n * srcs[0].element_size() / ms / 1e6
        vector = plan(srcs[0], dsts[0], **kw).vector if name.startswith(("naive", "smem")) else ""
        rows.append((str(dtype).removeprefix("torch."), name, vector, ms, gbs))
    print(f"\n{torch.cuda.get_device_name()}  {n}x{n}  median of {args.reps}")
    print(f"{'dtype':9} {'kernel':26} {'vec':>3} {'ms':>8} {'GB/s':>8} {'x copy':>7}")
    copy = {r[0]: r[4] for r in rows if r[1] == "copy"}
    for dtype, name, vector, ms, gbs in rows:
        print(f"{dtype:9} {name:26} {vector!s:>3} {ms:8.3f} {gbs:8.0f} {gbs / copy[dtype]:7.3f}")
    small, out = torch.randn(64, 64, device="cuda"), torch.empty(64, 64, device="cuda")
    transpose(small, out)
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(200):
        transpose(small, out)
    torch.cuda.synchronize()
    print(f"launcher host time: {(time.perf_counter() - start) / 200 * 1e6:.0f} µs per call (64x64, cached compile)")


if __name__ == "__main__":
    main()
