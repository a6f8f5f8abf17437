# Shared names for lab/up.sh and lab/down.sh (sourced, not run).
# The lab: one systemd container per inventory host, on its own podman network.
# Everything carries the label below, so a stale lab is found and removed whole.
LAB_PREFIX=gpulab-lab-
LAB_NETWORK=gpulab-lab
LAB_LABEL=gpulab.lab=1
LAB_NODES=(controller1 storage1 worker1 worker2)   # = inventory/lab/hosts.yml = Slurm NodeNames
# worker2 is the Jetson stand-in (inventory group jetson_standin, lab/standin.yml): a
# Debian container with L4T r36's marks. Its Tegra GPU nodes are the host's /dev/null,
# bound at the names JetPack 6's nvgpu and nvmap drivers create (legacy and igpu0 names).
LAB_STANDIN_NODE=worker2
LAB_STANDIN_DEVICES=(
  /dev/nvmap
  /dev/nvhost-ctrl-gpu /dev/nvhost-gpu /dev/nvhost-as-gpu /dev/nvhost-tsg-gpu /dev/nvhost-power-gpu
  /dev/nvgpu/igpu0/ctrl /dev/nvgpu/igpu0/channel /dev/nvgpu/igpu0/as /dev/nvgpu/igpu0/tsg
  /dev/nvgpu/igpu0/power
)
# The shared storage: storage1 exports this volume with nfs-ganesha, and every node has it
# at the same path, standing in for the NFS mount the lab's kernel cannot make
# (inventory/lab/group_vars/all/storage.yml declares this substitution).
LAB_SHARED_VOLUME=gpulab-lab-shared
LAB_SHARED_PATH=/srv/gpulab
LAB_STORAGE_NODE=storage1   # = the inventory's storage group
LAB_IMAGE=${GPULAB_LAB_IMAGE:-localhost/gpulab-bookworm-amd64:latest}
# .deb files shared by all lab and molecule containers (see lab/rootfs/usr/local/sbin/gpulab-apt-cache)
LAB_APT_CACHE=${GPULAB_APT_CACHE:-/var/cache/gpulab/debs}

lab_step() { printf '==> [lab] %s\n' "$*"; }
