#!/bin/bash
# A fault-test job that writes over NFS (libnfs, user space: the lab's kernel has no NFS
# client): STEPS parts, one a second, then a manifest naming them, written last. A write
# that fails is retried for up to RETRY_S seconds, as a hard mount waits for its server;
# then the job fails with one clear line and no manifest, so nothing partial looks complete.
# nfs-cp never overwrites: every attempt writes its own name (NAME.aN). QUERY (e.g.
# ?uid=2000&gid=2000) follows each file's URL: root's libnfs speaking for a user, as a kernel
# mount does (the export takes privileged ports only).
# Usage: write-nfs.sh NFS_URL STEPS [RETRY_S [QUERY]]
set -uo pipefail
url=$1 steps=$2 retry_s=${3:-120} query=${4:-}
run=${SLURM_RESTART_COUNT:-0}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# put LOCAL NAME: writes LOCAL as $url/NAME.aN and prints NAME.aN; exits 75 when it cannot.
put() {
  local src=$1 name=$2 attempt=0 deadline=$((SECONDS + retry_s)) err
  while true; do
    attempt=$((attempt + 1))
    if err=$(nfs-cp "$src" "$url/$name.a$attempt$query" 2>&1); then
      echo "$name.a$attempt"
      return 0
    fi
    if [ "$SECONDS" -ge "$deadline" ]; then
      echo "fault-job: cannot write $url/$name over NFS for $retry_s s: $err" >&2
      return 75
    fi
    echo "fault-job: retrying $url/$name (attempt $attempt: $err)" >&2
    sleep 2
  done
}

for i in $(seq 1 "$steps"); do
  echo "$SLURM_JOB_ID $i" >"$tmp/part"
  written=$(put "$tmp/part" "$SLURM_JOB_ID.r$run.p$i") || exit 75
  echo "part $i $written" >>"$tmp/manifest"
  sleep 1
done
echo "$SLURM_JOB_ID done $steps" >>"$tmp/manifest"
put "$tmp/manifest" "$SLURM_JOB_ID.r$run.result" >/dev/null || exit 75
echo "fault-job: $SLURM_JOB_ID wrote $steps parts over NFS from $(hostname)"
