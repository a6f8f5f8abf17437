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

# Why the running lab cannot be kept; empty when it can. One podman call reads every
# container (each call costs a second or more on a busy 2-core machine).
stale_reason() {
  local image_id subnet n c line name image mounts caps devices
  image_id=$(podman image inspect --format '{{.Id}}' "$LAB_IMAGE")
  # One call answers both: whether the network exists, and its subnet.
  subnet=$(podman network inspect --format '{{range .Subnets}}{{.Subnet}}{{end}}' "$LAB_NETWORK" 2>/dev/null) \
    || { echo "network $LAB_NETWORK is missing"; return; }
  [ -z "$LAB_SUBNET" ] || [ "$subnet" = "$LAB_SUBNET" ] \
    || { echo "network $LAB_NETWORK is not on subnet $LAB_SUBNET"; return; }
  declare -A found=()
  while IFS='|' read -r name image mounts caps devices; do
    [ -n "$name" ] && found[$name]="$image|$mounts|$caps|$devices"
  done < <(podman container inspect --format \
    '{{.Name}}|{{.Image}}| {{range .Mounts}}{{.Destination}} {{end}}|{{.EffectiveCaps}}| {{range .HostConfig.Devices}}{{.PathInContainer}} {{end}}' \
    "${LAB_NODES[@]/#/$LAB_PREFIX}" 2>/dev/null || true)
  for n in "${LAB_NODES[@]}"; do
    c=$LAB_PREFIX$n
    [ -n "${found[$c]:-}" ] || { echo "$c is missing"; return; }
    IFS='|' read -r image mounts caps devices <<<"${found[$c]}"
    [ "$image" = "$image_id" ] || { echo "$c runs an older image than $LAB_IMAGE"; return; }
    [[ "$mounts " == *" $LAB_SHARED_PATH "* ]] || { echo "$c has no shared volume at $LAB_SHARED_PATH"; return; }
  done
  IFS='|' read -r image mounts caps devices <<<"${found[$LAB_PREFIX$LAB_STORAGE_NODE]}"
  [[ $caps == *CAP_DAC_READ_SEARCH* ]] \
    || { echo "$LAB_PREFIX$LAB_STORAGE_NODE lacks CAP_DAC_READ_SEARCH (nfs-ganesha needs it)"; return; }
  IFS='|' read -r image mounts caps devices <<<"${found[$LAB_PREFIX$LAB_STANDIN_NODE]}"
  for n in "${LAB_STANDIN_DEVICES[@]}"; do
    [[ "$devices " == *" $n "* ]] || { echo "$LAB_PREFIX$LAB_STANDIN_NODE lacks the stand-in's $n"; return; }
  done
  for c in $(podman ps -a --filter "label=$LAB_LABEL" --format '{{.Names}}'); do
    [[ " ${LAB_NODES[*]/#/$LAB_PREFIX} " == *" $c "* ]] || { echo "$c is not part of the lab any more"; return; }
  done
}

create() {
  bash "$here/down.sh"
  lab_step "network $LAB_NETWORK"
  podman network create --label "$LAB_LABEL" ${LAB_SUBNET:+--subnet "$LAB_SUBNET"} "$LAB_NETWORK" >/dev/null
  lab_step "volume $LAB_SHARED_VOLUME (the shared storage, at $LAB_SHARED_PATH on every node)"
  podman volume create --label "$LAB_LABEL" "$LAB_SHARED_VOLUME" >/dev/null
  local n extra
  for n in "${LAB_NODES[@]}"; do
    lab_step "starting $LAB_PREFIX$n"
    # The node's capabilities (storage1: DAC_READ_SEARCH for nfs-ganesha), device nodes
    # (the Jetson stand-in: the host's /dev/null at Tegra's GPU node names) and address, with
    # every node's names in its /etc/hosts, lab/cluster.yml.
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
  mapfile -t stopped < <(podman ps -a --filter "label=$LAB_LABEL" --filter status=created \
    --filter status=exited --filter status=stopped --filter status=paused --format '{{.Names}}')
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

# Every node at once: wait for systemd, then seed its apt archive from the shared one
# (one podman exec per node).
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
for n in "${LAB_NODES[@]}"; do
  # A container just started may not have its system bus yet: ask again until it answers.
  podman exec "$LAB_PREFIX$n" sh -c \
    'for i in $(seq 30); do s=$(timeout 120 systemctl is-system-running --wait 2>/dev/null);
       [ -n "$s" ] && break; sleep 1; done
     echo "${s:-no answer from systemctl}"; /usr/local/sbin/gpulab-apt-cache seed' \
    >"$work/$n" 2>&1 &
done
wait
for n in "${LAB_NODES[@]}"; do
  state=$(head -n1 "$work/$n")
  case "$state" in
    running) lab_step "$n: systemd running" ;;
    degraded)
      lab_step "$n: systemd degraded; failed units:"
      podman exec "$LAB_PREFIX$n" systemctl --failed --no-legend --plain | sed 's/^/      /' ;;
    *) echo "up.sh: systemd in $LAB_PREFIX$n did not boot (state '$state')" >&2; exit 1 ;;
  esac
done
lab_step "up in $((SECONDS - start)) s: ${LAB_NODES[*]} (inventory: inventory/lab)"
