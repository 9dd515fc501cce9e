"""One launch of each transpose step at 8192×8192 fp32, for Nsight Compute:

    ncu --clock-control none --section SpeedOfLight --section MemoryWorkloadAnalysis \\
        python3 benchmarks/transpose_profile.py
"""

import torch

from cutecourse.kernels.transpose import transpose

src = torch.randn(8192, 8192, device="cuda")
dst = torch.empty_like(src)
dst.copy_(src)  # the device copy, for comparison
for variant in ("naive", "smem"):
    transpose(src, dst, variant)
torch.cuda.synchronize()
