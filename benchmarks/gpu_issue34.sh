#!/usr/bin/env bash
# Issue 34 on an H200, in two parts of under 10 minutes each (the device runs one command at a time):
#   bash benchmarks/gpu_issue34.sh tests   # the new GPU tests and the regressions the new host signatures could cause
#   bash benchmarks/gpu_issue34.sh bench   # the shape suite, then the small-M Config candidates of steps 10 and 11
# CSVs and charts go to $OUT (the device's result folder), else benchmarks/results/.
set -u
cd "$(dirname "$0")/.."
if [ -f .gpu/setup.sh ]; then source .gpu/setup.sh; fi
PY=${PYTHON:-python3}
DEST=${OUT:-benchmarks/results}
mkdir -p "$DEST"
case "${1:-}" in
tests)
    $PY -m pytest -q -p no:cacheprovider -rs \
        tests/gpu/test_gemm_strides_gpu.py tests/gpu/test_dispatch_gpu.py tests/gpu/test_epilogue_gpu.py \
        "tests/gpu/test_gemm_gpu.py::test_step_matches_float64_torch_on_random_shapes" \
        "tests/gpu/test_gemm_gpu.py::test_a_cpu_operand_and_unsupported_strides_are_refused" \
        "tests/gpu/test_gemm_gpu.py::test_each_step_names_the_arch_it_needs" 2>&1 | tail -60
    ;;
bench)
    $PY benchmarks/gemm_shapes.py --rounds 3 --settle-ms 200 --csv "$DEST/gemm-shapes-h200.csv" 2>&1 \
        | grep -v "correct; first call" | tail -80
    $PY benchmarks/gemm.py --steps 10 11 --dtypes bfloat16 --rounds 3 --settle-ms 200 \
        --shapes 1x6144x4096 16x6144x4096 64x6144x4096 128x6144x4096 128x4096x14336 1024x1536x512 256x8192x8192 \
                 1024x1024x16384 \
        --variants 11:cluster_m=1 11:tile_m=64,tile_n=128,cluster_m=1 11:tile_m=64,tile_n=64,cluster_m=1 \
                   11:tile_m=64,tile_n=256,cluster_m=1 10:tile_m=128,tile_n=128,cluster_m=1 \
        --csv "$DEST/small-m-candidates-h200.csv" --chart "$DEST/small-m-candidates-h200.svg" 2>&1 \
        | grep -v "correct; first call" | tail -60
    ;;
*)
    echo "usage: bash benchmarks/gpu_issue34.sh tests|bench" >&2
    exit 2
    ;;
esac
