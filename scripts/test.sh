#!/usr/bin/env bash
# `make test`'s checks, in two lanes at once: molecule's default scenario (the longest, about
# 8 min) and the others (the native checks, the collection tests, the payload tests (the memory,
# kernel and graph suites under the Vulkan validation layer), the two halves of lint,
# ansible-test sanity, the monitoring scenario's alerts end to end, the site's path). Every
# check of the sequential run, none dropped.
# The others are one queue, run from the start at the lowest CPU priority (nice 19, their
# containers too) on what molecule leaves of the cores: molecule's steps follow each other and
# decide when the run ends, so they take the cores whenever they need them, and a queued check
# runs while they wait (on apt and dpkg in the cold converge, on Slurm jobs and containers
# later). The queue is longest first, with the short checks last, so that when molecule ends
# its lane takes the checks the other lane has not begun and both cores work to the end.
# The collection tests' node check and molecule's converge build the same payload wheelhouse
# (the checkout's build/payload, from its payload/: inventory/node-check and the lab's inventory
# name both) if it is missing: the collection tests wait in
# the queue until the cold converge has ended, and then reuse it.
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
# line per converge, the cold one first.
timings=$PWD/$logs/molecule-timings
rm -f "$logs"/*.log "$logs"/*.status "$timings"
prebuilt=(-o setup -o collection -o image -o native)
other_checks=(native-sanitize native-arm64 test-payload test-collection lint-ansible lint-python test-sanity test-monitoring test-site)
after_cold_converge=test-collection

# Machine-wide CPU time, busy and in all, in seconds: what the run used of what 2 x its
# wall time offered (the floor of a run on this machine is busy / cores).
cpu_seconds() {
  awk '/^cpu /{busy = $2 + $3 + $4 + $7 + $8; print busy / 100, (busy + $5 + $6) / 100}' /proc/stat
}

# run_check NAME [NICENESS]: one check's make target, its log and its exit status (a file: the
# molecule check runs in a subshell).
run_check() {
  local name=$1 niceness=${2:-0} start=$SECONDS rc seconds
  local check=(nice -n "$niceness" make --no-print-directory "${prebuilt[@]}" "$name")
  if ((niceness > 0)); then
    # In a session of its own, whose autogroup gets the same nice: the kernel shares the CPU
    # between sessions (autogroups) and between containers' cgroups before it looks at a
    # process's nice, so a nice 19 check in molecule's session took half the cores from the
    # nodes' containers whenever Ansible itself waited.
    setsid --wait sh -c 'echo "$0" >/proc/self/autogroup 2>/dev/null; exec "$@"' "$niceness" \
      "${check[@]}" >"$logs/$name.log" 2>&1 &
    background_check=$!
    wait "$background_check"
    rc=$?
    background_check=
  else
    "${check[@]}" >"$logs/$name.log" 2>&1
    rc=$?
  fi
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

# Ctrl-C or TERM stops the whole run: the queued check in its own session and molecule's lane
# in its own process group (below); the terminal's Ctrl-C reaches neither.
background_check=
molecule=
stop() {
  trap '' INT TERM
  [ -n "$background_check" ] && kill -- "-$background_check" 2>/dev/null
  [ -n "$molecule" ] && kill -- "-$molecule" 2>/dev/null
  exit 130
}
trap stop INT TERM

read -r busy0 all0 < <(cpu_seconds)
start=$SECONDS
echo "==> [test] molecule's default scenario; beside it, at nice 19: ${other_checks[*]}; logs in $logs/"
# The queue: one line per check not yet begun; a lane takes the first under the lock.
queue=$logs/queue
printf '%s\n' "${other_checks[@]}" >"$queue"
next_check() {
  flock "$queue.lock" sh -c 'head -n 1 "$1"; sed -i 1d "$1"' - "$queue"
}
converges_measured() {
  local n
  n=$(grep -c '"playbook": "converge.yml"' "$timings" 2>/dev/null)
  echo "${n:-0}"
}
# run_lane NICENESS [MOLECULE_PID]: the queue's checks, one after another, until it is empty;
# beside a running molecule, $after_cold_converge waits for its cold converge.
run_lane() {
  local check
  while check=$(next_check) && [ -n "$check" ]; do
    if [ "$check" = "$after_cold_converge" ] && [ -n "${2:-}" ]; then
      while kill -0 "$2" 2>/dev/null && (($(converges_measured) < 1)); do
        sleep 2
      done
    fi
    run_check "$check" "$1"
  done
}
# Molecule's lane in a process group of its own (job control on while it starts), so that
# stop() can end it with all it started: a background list without job control would ignore
# SIGINT and go on with the queue.
set -m
{
  GPULAB_TIMINGS_FILE=$timings run_check test-molecule
  run_lane 0
} &
molecule=$!
set +m
run_lane 19 "$molecule"
wait "$molecule"
read -r busy1 all1 < <(cpu_seconds)

# molecule's own summary (lab/molecule-test.sh prints it last): its steps' times.
sed -n '/^=\{64\}$/,/^=\{64\}$/p' "$logs/test-molecule.log"
failed=()
for check in test-molecule "${other_checks[@]}"; do
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
