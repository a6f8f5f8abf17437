#!/usr/bin/env bash
# Why `make lab` must converge the lab again; prints nothing when the last converge still
# holds. The last converge that ended without a failure recorded what it converged from
# (build/lab/converged: a checksum of every file the converge reads, from git's list of
# tracked and not-ignored files under the paths below, and the Ansible version); it holds
# while those checksums are the same, no node was created or started since, systemd runs
# every unit it should on every node (`systemctl is-system-running`: no failed unit; every
# enabled service but one-shots active), and Slurm has every node up (no node down, drained,
# failing or invalid). This skips work whose inputs did not change; it is not a check of
# drift that these probes cannot see (a file edited by hand inside a node): CONVERGE=1 in the
# environment converges in any case.
# Usage: lab/converge-reason.sh | lab/converge-reason.sh --record (after a converge passed)
set -euo pipefail
cd "$(dirname "$0")/.."
mark=${GPULAB_CONVERGE_MARK:-build/lab/converged}  # the record (tests point it elsewhere)
# Everything the converge reads: the collection, the inventory and playbooks, the stand-in's
# files, the lab's definition and the payload the payload role builds its wheels from.
INPUTS=(collections inventory payload site.yml ansible.cfg lab/standin.yml lab/standin
  lab/cluster.yml requirements.yml requirements-dev.txt)

inputs() {
  # The Ansible that converges (the venv's, first on PATH under make).
  python3 -c 'import importlib.metadata as m; print("ansible-core", m.version("ansible-core"))' 2>/dev/null \
    || echo "ansible-core missing"
  git ls-files -co --exclude-standard -z -- "${INPUTS[@]}" \
    | while IFS= read -r -d '' f; do [ -f "$f" ] && printf '%s\0' "$f"; done \
    | xargs -0 --no-run-if-empty sha256sum | LC_ALL=C sort -k 2
}

if [ "${1:-}" = --record ]; then
  mkdir -p "$(dirname "$mark")"
  inputs >"$mark.new" && mv "$mark.new" "$mark"
  exit 0
fi

[ -z "${CONVERGE:-}" ] || { echo "asked for with CONVERGE=1"; exit 0; }
[ -s "$mark" ] || { echo "no converge of this lab recorded yet"; exit 0; }
# The first line that differs: a file's checksum (its path), or the Ansible version.
changed=$(diff <(inputs) "$mark" | awk '/^[<>]/ { print (length($2) == 64 && $2 ~ /^[0-9a-f]+$/ ? $3 : "ansible-core'"'"'s version"); exit }') || true
[ -z "$changed" ] || { echo "$changed changed since the last converge"; exit 0; }

. lab/lib.sh
lab_started_before "$mark" || { echo "a node was created or started since the last converge"; exit 0; }

# One podman exec per node, all at once: systemd's state and the enabled services (but
# one-shots) that are not active, a daemon stopped by hand say; on the controller, Slurm's nodes.
probe='systemctl is-system-running 2>&1 | head -n 1
systemctl list-unit-files --type=service --state=enabled --no-legend | awk "{print \$1}" | grep -v @ \
  | xargs --no-run-if-empty systemctl show --property=Id,Type,ActiveState | paste -d " " - - - - \
  | grep -v Type=oneshot | grep -v ActiveState=active || true'
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
for node in "${LAB_NODES[@]}"; do
  podman exec "$LAB_PREFIX$node" sh -c "$probe" >"$dir/$node" 2>&1 &
done
# Slurm's nodes out of service, by gpulab's one Slurm client (run from this tree in the
# controller's python3: one definition of a healthy node, no Slurm command line here).
podman exec -i "$LAB_PREFIX$LAB_CONTROLLER_NODE" python3 - unhealthy \
  <collections/ansible_collections/gpulab/cluster/plugins/module_utils/slurm_client.py >"$dir/slurm" 2>&1 &
wait || true
for node in "${LAB_NODES[@]}"; do
  state=$(head -n 1 "$dir/$node")
  [ "$state" = running ] || { echo "$node: systemd is ${state:-silent}"; exit 0; }
  stopped=$(sed -n '2{s/.*Id=\([^ ]*\).*ActiveState=\([^ ]*\).*/\1 is \2/p}' "$dir/$node")
  [ -z "$stopped" ] || { echo "$node: $stopped"; exit 0; }
done
bad=$(head -n 1 "$dir/slurm")
[ -z "$bad" ] || { echo "Slurm on $LAB_CONTROLLER_NODE: $bad"; exit 0; }
