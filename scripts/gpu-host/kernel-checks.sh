#!/usr/bin/env bash
# On a GPU host (root, no package manager needed): every registry op, the user kernels and the
# examples under the Khronos validation layer on its GPU, then a user elementwise kernel against
# the built-in saxpy in the same process (payload/benchmarks/user_kernel.py).
# Needs from scripts/gpu-host/bundle.sh: build/gpu-host/debs/gl (the Vulkan loader),
# build/gpu-host/debs/vvl (the layer, glslc) and build/gpu-host/wheels-test; and the payload's
# native libraries built (payload/src/gpulab/native/_lib). Writes its logs to $OUT (or /tmp).
# Usage: scripts/gpu-host/kernel-checks.sh [LOG2N ...]   (the benchmark's sizes; default 26 28)
set -uo pipefail
cd "$(dirname "$0")/../.."
bundle=build/gpu-host
out=${OUT:-/tmp}
sizes=("$@")
[ $# -gt 0 ] || sizes=(26 28)
mkdir -p "$out"

for deb in "$bundle"/debs/gl/*.deb; do dpkg -x "$deb" /; done
# The layer apart, where only this script's runs look for it; glslc and its library on PATH.
mkdir -p /opt/gpulab-vvl
for deb in "$bundle"/debs/vvl/*.deb; do dpkg -x "$deb" /opt/gpulab-vvl; done
ldconfig /opt/gpulab-vvl/usr/lib/x86_64-linux-gnu
export PATH=/opt/gpulab-vvl/usr/bin:$PATH
python3 -m pip install -q --no-index --no-deps --target /tmp/gpulab-site "$bundle"/wheels-test/*.whl
export PYTHONPATH=$PWD/payload/src:/tmp/gpulab-site
nvidia-smi -L
glslc --version | head -1

start=$SECONDS
VK_LAYER_PATH=/opt/gpulab-vvl/usr/share/vulkan/explicit_layer.d GPULAB_VK_VALIDATION=1 \
  python3 -m pytest -q -p no:cacheprovider tests/kernels tests/graph tests/memory \
  tests/payload/test_op_registry.py tests/payload/test_spirv.py \
  >"$out/under-the-layer.txt" 2>&1
echo "under the validation layer: rc=$? in $((SECONDS - start)) s: $(tail -n 1 "$out/under-the-layer.txt")"
grep -E "^(FAILED|ERROR) " "$out/under-the-layer.txt" | cut -c1-220 | head -n 20

python3 payload/benchmarks/user_kernel.py --log2n "${sizes[@]}" --runs 10 | tee "$out/user-kernel.txt"
