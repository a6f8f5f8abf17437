#!/usr/bin/env bash
# Starts the lab: controller, storage, worker1, worker2 as systemd containers named
# gpulab-lab-NODE (hostname NODE) on the podman network gpulab-lab, after removing any
# stale lab. Waits until systemd has booted in each. The inventory is inventory/lab.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"
start=$SECONDS

podman image exists "$LAB_IMAGE" || { echo "up.sh: image $LAB_IMAGE is missing: run 'make image'" >&2; exit 1; }
bash "$here/down.sh"

lab_step "network $LAB_NETWORK"
podman network create --label "$LAB_LABEL" "$LAB_NETWORK" >/dev/null
mkdir -p "$LAB_APT_CACHE"

for n in "${LAB_NODES[@]}"; do
  lab_step "starting $LAB_PREFIX$n"
  # No --privileged: systemd runs in podman's systemd mode; setrlimit is refused on
  # this host, hence --ulimit host.
  podman run -d --name "$LAB_PREFIX$n" --hostname "$n" --label "$LAB_LABEL" \
    --network "$LAB_NETWORK" --network-alias "$n" --systemd always --ulimit host \
    --volume "$LAB_APT_CACHE:/var/cache/gpulab/debs" \
    "$LAB_IMAGE" >/dev/null
done

for n in "${LAB_NODES[@]}"; do
  state=$(podman exec "$LAB_PREFIX$n" timeout 120 systemctl is-system-running --wait || true)
  case "$state" in
    running) lab_step "$n: systemd running" ;;
    degraded)
      lab_step "$n: systemd degraded; failed units:"
      podman exec "$LAB_PREFIX$n" systemctl --failed --no-legend --plain | sed 's/^/      /' ;;
    *) echo "up.sh: systemd in $LAB_PREFIX$n did not boot (state '$state')" >&2; exit 1 ;;
  esac
  podman exec "$LAB_PREFIX$n" /usr/local/sbin/gpulab-apt-cache seed
done
lab_step "up in $((SECONDS - start)) s: ${LAB_NODES[*]} (inventory: inventory/lab)"
