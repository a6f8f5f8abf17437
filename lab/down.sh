#!/usr/bin/env bash
# Removes the lab: every container labelled as lab (or named like one) and its network.
# Safe to run when there is no lab.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"

mapfile -t containers < <(
  { podman ps -a --filter "label=$LAB_LABEL" --format '{{.Names}}'
    for n in "${LAB_NODES[@]}"; do podman container exists "$LAB_PREFIX$n" && echo "$LAB_PREFIX$n"; done
  } | sort -u
)
if ((${#containers[@]})); then
  lab_step "removing containers ${containers[*]}"
  podman rm -f -t 5 "${containers[@]}" >/dev/null
fi
if podman network exists "$LAB_NETWORK"; then
  lab_step "removing network $LAB_NETWORK"
  podman network rm -f "$LAB_NETWORK" >/dev/null
fi
if podman volume exists "$LAB_SHARED_VOLUME"; then
  lab_step "removing volume $LAB_SHARED_VOLUME (the shared storage)"
  podman volume rm -f "$LAB_SHARED_VOLUME" >/dev/null
fi
