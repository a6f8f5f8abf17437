# Shared names for lab/up.sh and lab/down.sh (sourced, not run).
# The lab: one systemd container per inventory host, on its own podman network.
# Everything carries the label below, so a stale lab is found and removed whole.
LAB_PREFIX=gpulab-lab-
LAB_NETWORK=gpulab-lab
LAB_LABEL=gpulab.lab=1
LAB_NODES=(controller1 storage1 worker1 worker2)   # = inventory/lab/hosts.yml = Slurm NodeNames
LAB_IMAGE=${GPULAB_LAB_IMAGE:-localhost/gpulab-bookworm-amd64:latest}
# .deb files shared by all lab and molecule containers (see lab/rootfs/usr/local/sbin/gpulab-apt-cache)
LAB_APT_CACHE=${GPULAB_APT_CACHE:-/var/cache/gpulab/debs}

lab_step() { printf '==> [lab] %s\n' "$*"; }
