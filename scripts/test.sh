#!/usr/bin/env bash
# `make test`'s checks, in two lanes at once: molecule's default scenario (the longest, about
# 8 min) and the others (the collection tests, lint, payload tests, ansible-test sanity, the
# native tests). Every check of the sequential run, none dropped.
# The others start once molecule has measured its cold and idempotent converges, so that
# those two figures are taken with the machine to themselves (on 2 cores they came out 1.6x
# and 1.9x slower beside the other checks), and run at the lowest CPU priority (nice 19) on
# what molecule leaves of the cores, while its later steps wait on Slurm jobs and containers.
# They are one queue, longest first: when molecule ends, its lane takes the checks the other
# lane has not begun, so that both cores work to the end.
# By then molecule's converge has built the payload's wheelhouse
# (build/payload), which the collection tests' node check reuses instead of building it at the
# same time. The two short native checks run apart, from the start, also at nice 19:
# molecule's first half minute (its lab tests, destroy, create, prepare) left a core about half
# idle, and at the end they were the checks that ran on one lane while the other waited.
# Each check's output goes to build/test/CHECK.log; a check that
# fails prints its log when it ends, the others go on, and the exit status is 1 if any failed.
# The shared prerequisites (setup, collection, image, native) are built before this runs:
# the checks' make targets are called with them marked done (make -o), so that two
# streams never build them at once.
# Usage: scripts/test.sh     (from the Makefile's test target)
set -uo pipefail
cd "$(dirname "$0")/.."

logs=build/test
mkdir -p "$logs"
# Molecule's timings as lab/molecule-test.sh records them: one {"playbook": "converge.yml", ...}
# line per converge.
timings=$PWD/$logs/molecule-timings
rm -f "$logs"/*.log "$logs"/*.status "$timings"
prebuilt=(-o setup -o collection -o image -o native)
early_checks=(native-arm64 native-sanitize)
other_checks=(test-collection test-payload lint test-sanity)

# Machine-wide CPU time, busy and in all, in seconds: what the run used of what 2 x its
# wall time offered (the floor of a run on this machine is busy / cores).
cpu_seconds() {
  awk '/^cpu /{busy = $2 + $3 + $4 + $7 + $8; print busy / 100, (busy + $5 + $6) / 100}' /proc/stat
}

# run_check NAME [NICENESS]: one check's make target, its log and its exit status (a file: the
# molecule check runs in a subshell).
run_check() {
  local name=$1 niceness=${2:-0} start=$SECONDS rc seconds
  nice -n "$niceness" make --no-print-directory "${prebuilt[@]}" "$name" >"$logs/$name.log" 2>&1
  rc=$?
  seconds=$((SECONDS - start))
  echo "$rc" >"$logs/$name.status"
  if ((rc == 0)); then
    printf '==> [test] %-16s passed in %4d s\n' "$name" "$seconds"
  else
    printf '==> [test] %-16s FAILED (exit %d) in %d s; its log (%s):\n' "$name" "$rc" "$seconds" "$logs/$name.log"
    sed 's/^/    /' "$logs/$name.log"
  fi
  return "$rc"
}

read -r busy0 all0 < <(cpu_seconds)
start=$SECONDS
echo "==> [test] molecule's default scenario; beside it from the start: ${early_checks[*]}; after its idempotent converge: ${other_checks[*]}; logs in $logs/"
# The queue: one line per check not yet begun; a lane takes the first under the lock.
queue=$logs/queue
printf '%s\n' "${other_checks[@]}" >"$queue"
next_check() {
  flock "$queue.lock" sh -c 'head -n 1 "$1"; sed -i 1d "$1"' - "$queue"
}
# run_lane NICENESS: the queue's checks, one after another, until it is empty.
run_lane() {
  local check
  while check=$(next_check) && [ -n "$check" ]; do
    run_check "$check" "$1"
  done
}
converges_measured() {
  local n
  n=$(grep -c '"playbook": "converge.yml"' "$timings" 2>/dev/null)
  echo "${n:-0}"
}
{
  GPULAB_TIMINGS_FILE=$timings run_check test-molecule
  run_lane 0
} &
molecule=$!
{
  for check in "${early_checks[@]}"; do
    run_check "$check" 19
  done
} &
early=$!
while kill -0 "$molecule" 2>/dev/null && (($(converges_measured) < 2)); do
  sleep 2
done
wait "$early"
# At the lowest CPU priority, with every process they start (their containers too): molecule's
# steps follow each other and decide when the run ends, so they take the cores when they need
# them, and the other checks use what molecule leaves (its waits on Slurm jobs and containers,
# the converge of the one worker it adds).
run_lane 19
wait "$molecule"
read -r busy1 all1 < <(cpu_seconds)

# molecule's own summary (lab/molecule-test.sh prints it last): its steps' times.
sed -n '/^=\{64\}$/,/^=\{64\}$/p' "$logs/test-molecule.log"
failed=()
for check in test-molecule "${early_checks[@]}" "${other_checks[@]}"; do
  read -r rc <"$logs/$check.status" || rc=1
  ((rc == 0)) || failed+=("$check")
done
awk -v b="$busy1" -v b0="$busy0" -v a="$all1" -v a0="$all0" -v w="$((SECONDS - start))" 'BEGIN {
  printf "==> [test] CPU: %.0f s busy of the %.0f s the cores offered (%.0f%%): on these cores no\n", b - b0, a - a0, 100 * (b - b0) / (a - a0)
  printf "    order of the same work takes less than %.0f s\n", w * (b - b0) / (a - a0) }'
if ((${#failed[@]})); then
  echo "==> [test] FAILED in $((SECONDS - start)) s: ${failed[*]}"
  exit 1
fi
echo "==> [test] every check passed in $((SECONDS - start)) s"
