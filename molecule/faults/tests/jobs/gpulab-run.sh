#!/bin/bash
# A fault-test job that runs the real payload: WAIT_S seconds first, so that a fault can
# strike while the job runs, then `gpulab run` of DIR/drill-graph.json. gpulab writes its
# result atomically (a temporary file renamed), so DIR/JOBID.gpulab.json is complete or absent.
# Usage: gpulab-run.sh DIR WAIT_S
set -euo pipefail
dir=$1 wait_s=$2
sleep "$wait_s"
exec gpulab run "$dir/drill-graph.json" --output "$dir/$SLURM_JOB_ID.gpulab.json"
