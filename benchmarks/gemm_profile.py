"""One launch each of torch.matmul and GEMM steps, for Nsight Compute (same random-normal data as benchmarks/gemm.py):

    ncu --clock-control none -k regex:"nvjet|kernel_" --section SpeedOfLight \\
        --section ComputeWorkloadAnalysis python3 benchmarks/gemm_profile.py --shape 4096x4096x4096 --steps 9

(cuBLAS's Hopper kernels are named nvjet_*, the DSL's kernel_cutlass_*.)
"""

import argparse

import torch
from gemm import kernels_to_time  # benchmarks/gemm.py

parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("--shape", default="4096x4096x4096")
parser.add_argument("--dtype", default="bfloat16")
parser.add_argument("--steps", nargs="+", type=int, default=[9])
parser.add_argument("--variants", nargs="*", default=[], metavar="STEP:FIELD=VALUE,...", help="as in gemm.py")
args = parser.parse_args()
m, n, k = (int(x) for x in args.shape.split("x"))
dtype = getattr(torch, args.dtype)
torch.manual_seed(0)
a = torch.randn(m, k, device="cuda", dtype=dtype)
b = torch.randn(n, k, device="cuda", dtype=dtype).t()
c = torch.empty(m, n, device="cuda", dtype=dtype)
torch.matmul(a, b, out=c)
for gemm, config in kernels_to_time(args.steps, args.variants).values():
    gemm(a, b, c, config)
torch.cuda.synchronize()
