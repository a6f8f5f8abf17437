#!/usr/bin/env bash
# Runs `molecule test` for one scenario (default: molecule/default, the full cluster) and
# prints its timings at the end: the cold converge, the idempotent converge and the round
# trip of a one-line Slurm job. Extra arguments go to molecule (e.g. -- -vvv).
# Usage: lab/molecule-test.sh [--scenario NAME] [MOLECULE ARGS...]
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
. lab/lib.sh

scenario=default
if [ "${1:-}" = --scenario ]; then
  scenario=${2:?--scenario needs a name}
  shift 2
fi
scenario_file=molecule/$scenario/molecule.yml
[ -f "$scenario_file" ] || { echo "molecule-test.sh: no scenario '$scenario' ($scenario_file is missing)" >&2; exit 2; }

state=$root/lab/.state
mkdir -p "$state" "$LAB_APT_CACHE"
# A caller that follows the run's progress names the file (scripts/test.sh).
export GPULAB_TIMINGS_FILE=${GPULAB_TIMINGS_FILE:-$state/molecule-timings-$scenario}
rm -f "$GPULAB_TIMINGS_FILE"

start=$SECONDS
# What the scenario needs on this machine before any container (molecule/NAME/host-prepare.sh:
# package repositories no configured source may have): where it cannot be had, its one line
# says how to provide it, and nothing is made.
if [ -x "molecule/$scenario/host-prepare.sh" ]; then
  "molecule/$scenario/host-prepare.sh" >/dev/null || exit 1
fi
# molecule's destroy (molecule/shared/destroy.yml) removes the containers the scenario's
# place in lab/cluster.yml has now: containers left on its network by an older definition
# or a killed run would keep the network in use. Remove them, the network and the shared
# volume first.
network=$(python3 lab/cluster.py network "$scenario") || exit 2
volume=$(python3 lab/cluster.py volume "$scenario") || exit 2
leftovers=$(podman ps -a --filter "network=$network" --format '{{.Names}}')
if [ -n "$leftovers" ]; then
  echo "==> removing containers left on $network:" $leftovers
  podman rm -f -t 5 $leftovers >/dev/null
fi
if podman network exists "$network"; then podman network rm -f "$network" >/dev/null; fi
remove_volumes() { podman volume rm -f "$volume" >/dev/null 2>&1; }
remove_volumes
# The lab scripts, inventory and scenarios must describe the same cluster (1 s).
pytest -q -p no:cacheprovider tests/lab && molecule test --scenario-name "$scenario" "$@"
rc=$?
total=$((SECONDS - start))
remove_volumes

# One JSON line per record: {"playbook": ..., "seconds": ...} from the callback
# (molecule/shared/plugins/callback), {"step": ..., "seconds": ...} from grow.yml,
# {"job_round_trip": ...} and {"fault": ...} from the verify tests.
python3 - "$GPULAB_TIMINGS_FILE" "$total" "$rc" "$scenario" <<'PY'
import json, sys
path, total, rc, scenario = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
records = []
try:
    with open(path, encoding="utf-8") as f:
        records = [json.loads(line) for line in f if line.strip()]
except FileNotFoundError:
    pass
converges = [r["seconds"] for r in records if r.get("playbook") == "converge.yml"]
trips = [r["job_round_trip"] for r in records if "job_round_trip" in r]
def fmt(values, i, digits=1):
    return f"{values[i]:.{digits}f} s" if len(values) > i else "not measured"
print("=" * 64)
print(f"molecule test ({scenario}): {'PASSED' if rc == 0 else f'FAILED (exit {rc})'} in {total} s")
print(f"  cold converge                 {fmt(converges, 0)}")
print(f"  idempotent converge           {fmt(converges, 1)}")
print(f"  one-line Slurm job round trip {fmt(trips, 0, digits=3)}")
# The steps after the idempotent converge (molecule/default: check.yml, drift.yml, grow.yml),
# and the converges inside drift.yml and grow.yml ({"step": ..., "seconds": ...}).
for r in records:
    if r.get("playbook") in ("check.yml", "drift.yml", "grow.yml"):
        print(f"  {r['playbook']:<29} {r['seconds']:.1f} s")
for r in records:
    if "step" in r:
        print(f"    {r['step']}: {r['seconds']:.1f} s")
# {"fault": ..., "recovery_s": ..., "lost": ...} from a fault scenario's tests (molecule/faults).
faults = [r for r in records if "fault" in r]
if faults:
    print(f"  {'fault':<29} {'recovery':>9}   job results lost")
    for r in faults:
        lost = "none" if r["lost"] == 0 else str(r["lost"])
        print(f"  {r['fault']:<29} {r['recovery_s']:>7.1f} s   {lost}")
# {"step": ..., "seconds": ..., "lost": ...} from the rollout and upgrade scenarios' tests
# (grow.yml's steps have no "lost": printed above).
steps = [r for r in records if "step" in r and "lost" in r]
if steps:
    print(f"  {'step':<34} {'time':>8}   jobs lost")
    for r in steps:
        lost = "none" if r["lost"] == 0 else str(r["lost"])
        print(f"  {r['step']:<34} {r['seconds']:>6.1f} s   {lost}")
print("=" * 64)
PY
exit "$rc"
