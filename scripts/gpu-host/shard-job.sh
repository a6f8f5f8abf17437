#!/bin/bash
# One of N jobs meant to share a GPU (--gres=shard:1), by scripts/gpu-host/drills.py and
# molecule/default/tests/test_sharing.py: usage shard-job.sh RUN_DIR N. It says it started, then
# waits until all N have: they all get past that point only if Slurm runs them at the same time
# (a queued one would leave the others waiting until they give up, exit 9). Then it records the
# GPU variables Slurm set and runs RUN_DIR/graph.json on the GPU, compared with the cpu backend.
set -u
run=$1 jobs=$2
touch "$run/started-$SLURM_JOB_ID"
for _ in $(seq 480); do
  (( $(find "$run" -name 'started-*' | wc -l) >= jobs )) && break
  sleep 0.25
done
(( $(find "$run" -name 'started-*' | wc -l) >= jobs )) || { echo "the others never started"; exit 9; }
env | grep -E '^(SLURM_SHARDS_ON_NODE|SLURM_(JOB|STEP)_GPUS|CUDA_VISIBLE_DEVICES|GPU_DEVICE_ORDINAL)=' \
  >"$run/env-$SLURM_JOB_ID"
exec gpulab run "$run/graph.json" --compare cpu --output "$run/result-$SLURM_JOB_ID.json"
