#!/usr/bin/env bash
# Issue 17's measurements in one batch (about 2 minutes on an H200): matmul against torch
# (cuBLAS SGEMM, TF32 off) at 1024, 4096, 8192, 1000^3 and 4097x33x4095; jacobi's GB/s per
# sweep and % of the copy peak at 4096 and 16384 against torch's same sweep; every matmul
# tile by hand (GPULAB_MATMUL_TILE: one shape at every size) to see whether the choice per
# size is the best; the numerical checks (selftest, and the matmul tile tests when pytest is
# here).
#
#     PYTHONPATH=payload/src bash payload/benchmarks/h200_issue17.sh [OUT_DIR]
#
# Run from the repository root. The rows go to OUT_DIR (default: a new temporary folder) as
# JSON; the tables to stdout. Without a torch that sees CUDA, the rows are Vulkan's alone.
set -uo pipefail

out=${1:-$(mktemp -d /tmp/gpulab-issue17.XXXXXX)}
mkdir -p "$out"
python=${PYTHON:-python3}
gpulab() { timeout "$1" "$python" -m gpulab "${@:2}"; }

compare=()
if "$python" -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then
    compare=(--compare torch)
else
    echo "(torch with CUDA is not importable here: Vulkan rows only)"
fi

echo "== device"
gpulab 30 devices | head -n 20
echo "== matmul (tile chosen per device and size)"
gpulab 75 bench --ops matmul --sizes 1024 2048 4096 8192 --shapes 1000x1000x1000 4097x33x4095 \
    "${compare[@]}" --no-overhead --json "$out/matmul.json"
echo "== jacobi (10 sweeps per op)"
gpulab 45 bench --ops jacobi --sizes 4096 16384 "${compare[@]}" --no-overhead \
    --json "$out/jacobi.json"
for tile in 32x16x8 16x16x8 16x8x8 8x8x8; do
    echo "== matmul with GPULAB_MATMUL_TILE=$tile"
    GPULAB_MATMUL_TILE=$tile gpulab 30 bench --ops matmul --sizes 1024 4096 8192 \
        --shapes 1000x1000x1000 --no-overhead --json "$out/matmul-$tile.json" | grep '^matmul'
done
echo "== selftest"
gpulab 60 selftest --backend vulkan
if "$python" -c 'import pytest' 2>/dev/null; then
    echo "== matmul tile tests"
    timeout 60 "$python" -m pytest -q -p no:cacheprovider tests/kernels/test_kernels_matmul.py
fi
echo "rows in $out"
