#!/usr/bin/env bash
# On a GPU host (root): whole `gpulab run` processes of several payload trees in turn, fusion on
# (glslc on PATH, as on a provisioned worker), for issue 50's start-up changes: the four-node
# graph of payload/benchmarks/end_to_end.py at 2^26 and 2^28, the cpu backend's runs, a cold
# timeline of the working tree, and end_to_end.py --npy with the copy engine's rate.
# Needs from scripts/gpu-host/bundle.sh: build/gpu-host/debs/gl, build/gpu-host/debs/vvl (glslc),
# build/gpu-host/wheels-test and build/gpu-host/wheels-venv; and the native libraries built
# (payload/src/gpulab/native/_lib).
# Each NAME=DIR is a payload/src of another revision, made before the call, for example
#   mkdir -p build/dev/t-6383c1b && git archive 6383c1b payload/src \
#     collections/ansible_collections/gpulab/cluster/plugins/module_utils | tar -x -C build/dev/t-6383c1b
#   (then carry build/dev and pass start=build/dev/t-6383c1b/payload/src);
# the working tree's payload/src runs last, as "head". Writes its outputs to $OUT (or /tmp), at
# most six files (a device call brings back eight).
# Environment: E2E, end_to_end.py's inputs (default --npy; empty: random inputs, with the torch
# script); PAIRS26 and PAIRS28, the rounds at 2^26 (default 10) and 2^28 (default 6; 0: none).
# Usage: [E2E=...] [PAIRS26=N] [PAIRS28=N] scripts/gpu-host/start-ab.sh [NAME=DIR ...]
set -uo pipefail
cd "$(dirname "$0")/../.."
repo=$PWD
bundle=build/gpu-host
out=${OUT:-/tmp}
mkdir -p "$out"

for deb in "$bundle"/debs/gl/*.deb; do dpkg -x "$deb" /; done
mkdir -p /opt/gpulab-vvl
for deb in "$bundle"/debs/vvl/*.deb; do dpkg -x "$deb" /opt/gpulab-vvl; done
ldconfig
ldconfig /opt/gpulab-vvl/usr/lib/x86_64-linux-gnu
export PATH=/opt/gpulab-vvl/usr/bin:$PATH
nvidia-smi -L | tee "$out/gpu.txt"
# A worker's venv: the payload's runtime wheels only (no torch, no .pth hooks).
[ -x /tmp/ab-venv/bin/python ] || {
  python3 -m venv /tmp/ab-venv &&
    /tmp/ab-venv/bin/pip install -q --no-index --find-links "$bundle"/wheels-venv numpy cffi vulkan
}
python=/tmp/ab-venv/bin/python
# end_to_end.py's copy-engine column imports gpulab in the calling interpreter.
python3 -m pip install -q --no-index --no-deps --target /tmp/gpulab-site "$bundle"/wheels-test/*.whl

trees=()
for pair in "$@" "head=payload/src"; do
  name=${pair%%=*}
  copy=/tmp/ab-trees/$name
  rm -rf "$copy" && mkdir -p /tmp/ab-trees && cp -rL "${pair#*=}" "$copy"
  [ -d "$copy/gpulab/native/_lib" ] || cp -r payload/src/gpulab/native/_lib "$copy/gpulab/native/"
  $python -m compileall -q "$copy" >/dev/null
  trees+=("$name=$copy")
done
(cd /tmp && PYTHONPATH=/tmp/ab-trees/head $python -c "
import json, sys
sys.path.insert(0, '$repo/payload/benchmarks')
from end_to_end import four_nodes
json.dump(four_nodes(1 << 26), open('/tmp/ab-g26.json', 'w'))
json.dump(four_nodes(1 << 28), open('/tmp/ab-g28.json', 'w'))
")
# A first run compiles the generated shaders into the cache every later run reads.
PYTHONPATH=/tmp/ab-trees/head $python -m gpulab run /tmp/ab-g26.json --backend vulkan -o /tmp/ab-r.json

ab="python3 payload/benchmarks/trees_ab.py --python $python ${trees[*]}"
$ab --pairs "${PAIRS26:-10}" -- /tmp/ab-g26.json --backend vulkan 2>&1 | tee "$out/ab-g26.txt"
pairs28=${PAIRS28:-6}
[ "$pairs28" = 0 ] || $ab --pairs "$pairs28" -- /tmp/ab-g28.json --backend vulkan 2>&1 | tee "$out/ab-g28.txt"
python3 payload/benchmarks/trees_ab.py --python $python head=/tmp/ab-trees/head --pairs 3 \
  -- /tmp/ab-g26.json --backend cpu 2>&1 | tee "$out/cpu-g26.txt"
PYTHONPATH=/tmp/ab-trees/head $python payload/benchmarks/cold_timeline.py /tmp/ab-timeline-26.json \
  run /tmp/ab-g26.json --backend vulkan -o /tmp/ab-r.json
python3 payload/benchmarks/cold_timeline.py --show /tmp/ab-timeline-26.json >"$out/timeline-26.txt"
e2e=${E2E---npy}
name=end-to-end${e2e:+-npy}
# shellcheck disable=SC2086 # E2E is a list of flags
(cd /tmp && PYTHONPATH=/tmp/ab-trees/head:/tmp/gpulab-site python3 \
  "$repo/payload/benchmarks/end_to_end.py" --python $python --log2n 26 28 --repeats 3 $e2e \
  ${e2e:+--no-torch} --json "$out/$name.json" 2>&1 | tee "$out/$name.txt")
