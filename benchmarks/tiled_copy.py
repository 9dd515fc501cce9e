"""Copy steps and axpby against torch's device copy, measured in the same run on the same data.

    python benchmarks/tiled_copy.py [--gib 1] [--reps 30]

Bandwidth counts bytes read plus bytes written. Times are medians over repetitions of 10 back-to-back launches
(CUDA events, after a warm-up), alternating two buffer sets, each larger than the 60 MB L2.
"""

from __future__ import annotations

import argparse

import torch
from tqdm import tqdm

from cutecourse.bench import median_ms
from cutecourse.kernels import axpby, copy_naive, copy_predicated, copy_tiled


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gib", type=float, default=1.0, help="size of one source matrix")
    parser.add_argument("--reps", type=int, default=30)
    args = parser.parse_args()
    rows = []
    for dtype in tqdm((torch.float32, torch.float16), desc="dtypes"):
        size = torch.empty(0, dtype=dtype).element_size()
        n = 8192
        m = int(args.gib * 2**30 / (n * size)) // 256 * 256
        # Ragged: M is no multiple of the tile (32 rows), so the last row of tiles is partial and needs predicates;
        # rows keep a 128-byte pitch, as in the aligned case, so the two differ only by predication.
        shapes = {"aligned": (m, n), "ragged": (m - 7, n)}
        for label, (rm, rn) in shapes.items():
            srcs = [torch.randn(rm, rn, device="cuda").to(dtype) for _ in range(2)]
            dsts = [torch.empty_like(s) for s in srcs]
            ys = [torch.randn_like(s) for s in srcs]
            kernels = {"torch copy": lambda i: dsts[i].copy_(srcs[i]),
                       "naive": lambda i: copy_naive.copy(srcs[i], dsts[i]),
                       "predicated": lambda i: copy_predicated.copy(srcs[i], dsts[i]),
                       "axpby (3 streams)": lambda i: axpby.axpby(srcs[i], ys[i], dsts[i], 2.0, -1.0)}
            if label == "aligned":
                kernels["tiled"] = lambda i: copy_tiled.copy(srcs[i], dsts[i])
            for name, fn in kernels.items():
                dsts[0].fill_(float("nan"))  # poisoned: a kernel that skips elements cannot pass on old results
                fn(0)
                torch.cuda.synchronize()
                if name.startswith("axpby"):
                    torch.testing.assert_close(dsts[0], (2.0 * srcs[0].float() - ys[0].float()).to(dtype),
                                               msg=f"{name} {dtype} {label}: wrong result")
                else:
                    assert torch.equal(dsts[0], srcs[0]), f"{name} {dtype} {label}: wrong result"
                ms = median_ms(fn, args.reps)
                streams = 3 if name.startswith("axpby") else 2
                rows.append((str(dtype).removeprefix("torch."), label, (rm, rn), name, ms,
                             streams * rm * rn * size / ms / 1e6))
    print(f"\n{torch.cuda.get_device_name()}  one matrix = {args.gib:g} GiB  median of {args.reps}x10 launches")
    print(f"{'dtype':8} {'shape':14} {'kernel':18} {'ms':>8} {'GB/s':>7} {'x copy':>7}")
    copy = {(r[0], r[1]): r[5] for r in rows if r[3] == "torch copy"}
    for dtype, label, shape, name, ms, gbs in rows:
        print(f"{dtype:8} {str(shape):14} {name:18} {ms:8.3f} {gbs:7.0f} {gbs / copy[(dtype, label)]:7.3f}")
    for dtype in ("float32", "float16"):
        tiled = next(r[5] for r in rows if r[:2] == (dtype, "aligned") and r[3] == "tiled")
        pred = next(r[5] for r in rows if r[:2] == (dtype, "ragged") and r[3] == "predicated")
        print(f"{dtype}: predicated on the ragged shape / tiled on the aligned one = {pred / tiled:.3f}")


if __name__ == "__main__":
    main()
