#!/usr/bin/env bash
# Ensures the lab is up: the nodes of lab/cluster.yml (controller1, storage1, worker1, worker2
# the Jetson stand-in) as systemd containers named gpulab-lab-NODE (hostname NODE) on the
# podman network gpulab-lab (lab/lib.sh reads the names).
# A lab that is complete and runs the current image is kept (stopped containers are
# started), so a second converge meets the same hosts; otherwise, or with --fresh, the
# lab is removed and created anew. Waits until systemd has booted in each container.
# Usage: lab/up.sh [--fresh]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"
start=$SECONDS

fresh=false
case "${1:-}" in
  "") ;;
  --fresh) fresh=true ;;
  *) echo "up.sh: unknown argument '$1' (use --fresh to recreate the lab)" >&2; exit 2 ;;
esac
podman image exists "$LAB_IMAGE" || { echo "up.sh: image $LAB_IMAGE is missing: run 'make image'" >&2; exit 1; }
mkdir -p "$LAB_APT_CACHE"

# Why the running lab cannot be kept; empty when it can.
stale_reason() {
  local image_id n c
  image_id=$(podman image inspect --format '{{.Id}}' "$LAB_IMAGE")
  podman network exists "$LAB_NETWORK" || { echo "network $LAB_NETWORK is missing"; return; }
  for n in "${LAB_NODES[@]}"; do
    c=$LAB_PREFIX$n
    podman container exists "$c" || { echo "$c is missing"; return; }
    [ "$(podman inspect --format '{{.Image}}' "$c")" = "$image_id" ] \
      || { echo "$c runs an older image than $LAB_IMAGE"; return; }
    [[ " $(podman inspect --format '{{range .Mounts}}{{.Destination}} {{end}}' "$c") " == *" $LAB_SHARED_PATH "* ]] \
      || { echo "$c has no shared volume at $LAB_SHARED_PATH"; return; }
  done
  podman inspect --format '{{.EffectiveCaps}}' "$LAB_PREFIX$LAB_STORAGE_NODE" | grep -q CAP_DAC_READ_SEARCH \
    || { echo "$LAB_PREFIX$LAB_STORAGE_NODE lacks CAP_DAC_READ_SEARCH (nfs-ganesha needs it)"; return; }
  local devices
  devices=" $(podman inspect --format '{{range .HostConfig.Devices}}{{.PathInContainer}} {{end}}' "$LAB_PREFIX$LAB_STANDIN_NODE") "
  for n in "${LAB_STANDIN_DEVICES[@]}"; do
    [[ $devices == *" $n "* ]] || { echo "$LAB_PREFIX$LAB_STANDIN_NODE lacks the stand-in's $n"; return; }
  done
  for c in $(podman ps -a --filter "label=$LAB_LABEL" --format '{{.Names}}'); do
    [[ " ${LAB_NODES[*]/#/$LAB_PREFIX} " == *" $c "* ]] || { echo "$c is not part of the lab any more"; return; }
  done
}

create() {
  bash "$here/down.sh"
  lab_step "network $LAB_NETWORK"
  podman network create --label "$LAB_LABEL" "$LAB_NETWORK" >/dev/null
  lab_step "volume $LAB_SHARED_VOLUME (the shared storage, at $LAB_SHARED_PATH on every node)"
  podman volume create --label "$LAB_LABEL" "$LAB_SHARED_VOLUME" >/dev/null
  local n extra
  for n in "${LAB_NODES[@]}"; do
    lab_step "starting $LAB_PREFIX$n"
    # The node's capabilities (storage1: DAC_READ_SEARCH for nfs-ganesha) and device nodes
    # (the Jetson stand-in: the host's /dev/null at Tegra's GPU node names), lab/cluster.yml.
    read -r -a extra <<<"${LAB_RUN_OPTIONS[$n]}"
    # No --privileged: systemd runs in podman's systemd mode; setrlimit is refused on
    # this host, hence --ulimit host. The alias lets the other nodes resolve NODE.
    podman run -d --name "$LAB_PREFIX$n" --hostname "$n" --label "$LAB_LABEL" \
      --network "$LAB_NETWORK" --network-alias "$n" --systemd always --ulimit host \
      --volume "$LAB_APT_CACHE:$LAB_APT_CACHE_PATH" \
      --volume "$LAB_SHARED_VOLUME:$LAB_SHARED_PATH" "${extra[@]}" \
      "$LAB_IMAGE" >/dev/null
  done
}

reason=$($fresh && echo "--fresh" || stale_reason)
if [ -z "$reason" ]; then
  stopped=()
  for n in "${LAB_NODES[@]}"; do
    [ "$(podman inspect --format '{{.State.Running}}' "$LAB_PREFIX$n")" = true ] || stopped+=("$LAB_PREFIX$n")
  done
  if ((${#stopped[@]})) && ! podman start "${stopped[@]}" >/dev/null; then
    reason="${stopped[*]} would not start"
  elif ((${#stopped[@]})); then
    lab_step "kept the lab; started ${stopped[*]}"
  else
    lab_step "kept the running lab (current image, all containers)"
  fi
fi
if [ -n "$reason" ]; then
  lab_step "creating a new lab: $reason"
  create
fi

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
