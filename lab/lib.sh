# Shared names for lab/up.sh and lab/down.sh (sourced, not run), from lab/cluster.yml's place
# `lab` (python3 lab/cluster.py shell lab prints them):
# LAB_NODES, each run as container $LAB_PREFIX$NODE (hostname NODE) on network $LAB_NETWORK
# (subnet LAB_SUBNET) with its own `podman run` options ${LAB_RUN_OPTIONS[NODE]} (capabilities,
# devices, its address and every node's names for its /etc/hosts);
# LAB_CONTROLLER_NODE (group controller), LAB_STORAGE_NODE (group storage) and the Jetson stand-in LAB_STANDIN_NODE (group
# jetson_standin) with its Tegra device nodes LAB_STANDIN_DEVICES, bound from /dev/null;
# the shared storage, volume LAB_SHARED_VOLUME at LAB_SHARED_PATH on every node (storage1
# exports it with nfs-ganesha: it stands in for the NFS mount the lab's kernel cannot make);
# LAB_IMAGE; the host's .deb cache LAB_APT_CACHE, at LAB_APT_CACHE_PATH in every container.
# Everything carries the label below, so a stale lab is found and removed whole.
lab_definition=$(python3 "$(dirname "${BASH_SOURCE[0]}")/cluster.py" shell lab) || return 1
eval "$lab_definition"
unset lab_definition
LAB_LABEL=gpulab.lab=1

lab_step() { printf '==> [lab] %s\n' "$*"; }

# Whether every lab node was started (or created) before FILE was last written: one podman call.
lab_started_before() {
  local started
  started=$(podman container inspect --format '{{.State.StartedAt.Unix}}' "${LAB_NODES[@]/#/$LAB_PREFIX}" 2>/dev/null \
    | sort -n | tail -n 1) || true
  [ -n "$started" ] && ((started < $(stat -c %Y "$1")))
}
