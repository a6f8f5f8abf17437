#!/bin/bash
# A fault-test job: STEPS numbered lines, one a second, into DIR on the shared storage.
# The result appears only when complete (a rename), so a job cut short leaves no result,
# and a requeued run starts its own part file.
# Usage: write-local.sh DIR STEPS
set -euo pipefail
dir=$1 steps=$2
part=$dir/$SLURM_JOB_ID.run${SLURM_RESTART_COUNT:-0}.part
# One line per start of this job: a job that Slurm ran twice has two.
echo "$(hostname) run${SLURM_RESTART_COUNT:-0}" >>"$dir/$SLURM_JOB_ID.starts"
: >"$part"
for i in $(seq 1 "$steps"); do
  echo "$SLURM_JOB_ID $i" >>"$part"
  sleep 1
done
echo "$SLURM_JOB_ID done $steps" >>"$part"
mv "$part" "$dir/$SLURM_JOB_ID.result"
echo "fault-job: $SLURM_JOB_ID wrote $steps steps on $(hostname)"
