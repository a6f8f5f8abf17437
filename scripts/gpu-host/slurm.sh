#!/usr/bin/env bash
# Real Slurm on one GPU host that has no package manager and no systemd (the device machine:
# Ubuntu 24.04, an NVIDIA GPU, root), from the repository root, as root:
#   scripts/gpu-host/slurm.sh [-e VAR=VALUE ...]      (ansible-playbook options, passed on)
# 1. installs what scripts/gpu-host/bundle.sh fetched on the development machine: Debian 12's
#    Slurm 22.05 and munge (.deb files unpacked into /, libraries the host has left alone), the
#    Vulkan loader where there is none, ansible-core in /opt/gpulab-ansible;
# 2. renders this node's Slurm files with playbooks/node-check.yml, with a real host's settings:
#    slurm_cgroups enabled (cgroup v2, ConstrainDevices), the node's memory as slurmd measures it,
#    slurm_gpu_shards 4, a 15 s health check interval (so that the drills take minutes);
# 3. installs exactly those files (compared byte for byte), starts munged, slurmctld and slurmd,
#    and waits until the node is idle.
# Every way in which this differs from a systemd host is printed and written to
# build/gpu-host/run/differences.txt; scripts/gpu-host/drills.py then runs jobs through it.
set -euo pipefail
cd "$(dirname "$0")/../.."
repo=$PWD
bundle=$repo/build/gpu-host
run=$bundle/run
render=$repo/build/node-check/slurm
conf_dir=/etc/slurm
ansible_venv=/opt/gpulab-ansible
start=$(date +%s)
rm -rf "$run" && mkdir -p "$run"
: >"$run/differences.txt"

say() { echo "==> [gpu-host] $*"; }
differs() {
  echo "==> [gpu-host] differs from a systemd host: $*"
  echo "- $*" >>"$run/differences.txt"
}
fail() {
  echo "scripts/gpu-host/slurm.sh: $*" >&2
  exit 1
}

[ "$(id -u)" = 0 ] || fail "run it as root (it installs Slurm into / and starts its daemons)"
[ -d "$bundle/debs/slurm" ] || fail "no $bundle/debs: run scripts/gpu-host/bundle.sh on the development machine and bring build/gpu-host along"
if [ "$(ps -o comm= -p 1)" = systemd ]; then
  fail "PID 1 is systemd here: converge site.yml on this host instead (the slurm role runs the daemons as services)"
fi

# --- 1. Install ----------------------------------------------------------------------------
# A library package is unpacked only when none of its shared objects is known to ldconfig:
# unpacking Debian's copy over the host's newer one would downgrade it. (No `cmd | grep -q`
# in this script: grep stops reading at the first match and pipefail then reports the writer's
# SIGPIPE as a failure.)
unpack_debs() {
  local known_libraries
  known_libraries=$(ldconfig -p)
  local root=$1; shift
  local deb sos
  for deb in "$@"; do
    sos=$(dpkg-deb -c "$deb" | awk '{print $NF}' | grep -E '/lib[^/]*\.so\.[0-9]+$' | xargs -r -n1 basename || true)
    if [ -n "$sos" ] && [ "$root" = / ] && grep -qF -e "$(head -n 1 <<<"$sos")" <<<"$known_libraries"; then
      echo "$(basename "$deb"): the host has $(head -n 1 <<<"$sos") already" >>"$run/install.log"
      continue
    fi
    dpkg-deb -x "$deb" "$root"
    echo "$(basename "$deb"): unpacked into $root" >>"$run/install.log"
  done
}

# The marker remembers an earlier run's unpacking, so that a second run still reports it.
loader_marker=/var/lib/gpulab-gpu-host/loader-from-debs
if ! grep -q 'libvulkan\.so\.1 ' <<<"$(ldconfig -p)"; then
  unpack_debs / "$bundle"/debs/gl/*.deb
  mkdir -p "$(dirname "$loader_marker")" && touch "$loader_marker"
fi
if [ -e "$loader_marker" ]; then
  differs "the Vulkan loader and libglvnd came from Debian 12's .deb files (unpacked), not from the driver's packages"
fi
mkdir -p /opt/gpulab-vt
unpack_debs /opt/gpulab-vt "$bundle"/debs/tools/*.deb
printf '#!/bin/sh\nLD_LIBRARY_PATH=/opt/gpulab-vt/usr/lib/x86_64-linux-gnu exec /opt/gpulab-vt/usr/bin/vulkaninfo "$@"\n' \
  >/usr/local/bin/vulkaninfo
chmod 0755 /usr/local/bin/vulkaninfo

# NVIDIA's ICD where the loader finds it without help (slurmd runs the health check with an
# empty environment): a driver package puts it there. Copied only when the loader finds no
# NVIDIA device without help: a second manifest would list the GPU twice.
if [[ $(env -i /usr/local/bin/vulkaninfo --summary 2>/dev/null) != *NVIDIA* ]]; then
  found=$(find / -xdev -name 'nvidia_icd*.json' -path '*vulkan/icd.d*' 2>/dev/null | head -n 1)
  [ -n "$found" ] || fail "no NVIDIA Vulkan ICD (nvidia_icd.json) anywhere on this host"
  mkdir -p /etc/vulkan/icd.d "$(dirname "$loader_marker")"
  cp "$found" /etc/vulkan/icd.d/nvidia_icd.json
  echo "$found" >"$(dirname "$loader_marker")/icd-copied-from"
fi
if [ -e "$(dirname "$loader_marker")/icd-copied-from" ]; then
  differs "NVIDIA's Vulkan ICD was copied from $(cat "$(dirname "$loader_marker")/icd-copied-from") to /etc/vulkan/icd.d (the driver's packages install it where the loader looks)"
fi

unpack_debs / "$bundle"/debs/slurm/*.deb
# Debian installs Slurm's binaries as *-wlm behind alternatives (update-alternatives runs in the
# packages' scripts, which dpkg-deb -x does not run); slurmd starts slurmstepd by its plain name.
for bin in /usr/sbin/*-wlm /usr/bin/*-wlm; do
  [ -e "$bin" ] && ln -sf "$(basename "$bin")" "${bin%-wlm}"
done
ldconfig
differs "Slurm and munge were unpacked from Debian 12's .deb files (dpkg-deb -x): no maintainer scripts ran, so this script makes their users, folders and links"

if [ ! -x "$ansible_venv/bin/ansible-playbook" ]; then
  python3 -m venv "$ansible_venv"
  "$ansible_venv/bin/pip" install --quiet --no-index --no-deps "$bundle"/wheels/*.whl
fi
say "installed: $(slurmd -V), munge $(munged -V 2>&1 | awk '{print $2}'), $("$ansible_venv/bin/ansible" --version | head -n 1) ($(($(date +%s) - start)) s)"

# --- 2. Render this node's Slurm files with the roles -------------------------------------
real_memory=$(slurmd -C | tr ' ' '\n' | sed -n 's/^RealMemory=//p')
say "rendering with playbooks/node-check.yml (slurmd -C: RealMemory=$real_memory)"
PATH=$ansible_venv/bin:$PATH ANSIBLE_CONFIG=$repo/ansible.cfg ANSIBLE_DISPLAY_SKIPPED_HOSTS=false \
  ansible-playbook -i inventory/node-check playbooks/node-check.yml \
  -e vulkan_install_packages=false -e slurm_cgroups=enabled -e slurm_node_real_memory="$real_memory" \
  -e slurm_gpu_shards=4 -e slurm_health_check_interval=15 -e slurm_def_mem_per_cpu=4096 \
  "$@" >"$run/node-check.log" 2>&1 || { tail -n 40 "$run/node-check.log"; fail "playbooks/node-check.yml failed (log: $run/node-check.log)"; }
grep -A3 '^PLAY RECAP' "$run/node-check.log" | sed -n 2p | sed 's/^/==> [gpu-host] node-check: /'
cp "$repo/build/node-check/node-check-report.md" "$run/"

# --- 3. Install exactly those files and start the daemons ---------------------------------
getent group slurm >/dev/null || groupadd --system slurm
getent passwd slurm >/dev/null || useradd --system --gid slurm --home-dir /nonexistent --shell /usr/sbin/nologin slurm
getent group munge >/dev/null || groupadd --system munge
getent passwd munge >/dev/null || useradd --system --gid munge --home-dir /nonexistent --shell /usr/sbin/nologin munge

mkdir -p "$conf_dir"
program=$(sed -n 's/^HealthCheckProgram=//p' "$render/slurm.conf")
for file in slurm.conf plugins.conf nodes.conf gres.conf cgroup.conf; do
  [ -e "$render/$file" ] || continue
  install -m 0644 "$render/$file" "$conf_dir/$file"
  cmp -s "$render/$file" "$conf_dir/$file"
done
if [ -n "$program" ]; then
  install -m 0755 "$render/gpulab-healthcheck" "$program"
  cmp -s "$render/gpulab-healthcheck" "$program"
  # The program asks Slurm through gpulab's Slurm client, where the slurm role installs it.
  install -D -m 0644 "$repo/collections/ansible_collections/gpulab/cluster/plugins/module_utils/slurm_client.py" \
    /usr/local/lib/gpulab/slurm_client.py
fi
say "installed the rendered files unchanged (cmp): $(cd "$render" && ls | tr '\n' ' ')-> $conf_dir${program:+, $program}"
cp "$render"/* "$run/"

install -d -o slurm -g slurm -m 0755 /var/lib/slurm /var/lib/slurm/slurmctld /var/log/slurm
install -d -m 0755 /var/lib/slurm/slurmd
install -d -o munge -g munge -m 0700 /etc/munge /var/lib/munge /var/log/munge
install -d -o munge -g munge -m 0755 /run/munge
if [ ! -s /etc/munge/munge.key ]; then
  dd if=/dev/urandom of=/etc/munge/munge.key bs=1024 count=1 status=none
  chown munge:munge /etc/munge/munge.key
  chmod 0400 /etc/munge/munge.key
fi

# cgroup v2 without systemd (cgroup.conf's IgnoreSystemd=yes): slurmd makes its step cgroups
# beside its own, so it starts in a leaf of a subtree that delegates the controllers it uses,
# as systemd would have placed it (system.slice/slurmd.service).
cgroups=no
if [ -e "$conf_dir/cgroup.conf" ]; then
  cgroups=yes
  [ "$(stat -f -c %T /sys/fs/cgroup)" = cgroup2fs ] || fail "cgroup.conf is there but /sys/fs/cgroup is not cgroup v2"
  for controller in cpuset cpu memory pids; do
    grep -qw "$controller" /sys/fs/cgroup/cgroup.subtree_control || echo "+$controller" >/sys/fs/cgroup/cgroup.subtree_control
  done
  mkdir -p /sys/fs/cgroup/system.slice
  echo "+cpuset +cpu +memory +pids" >/sys/fs/cgroup/system.slice/cgroup.subtree_control
  for unit in munge slurmctld slurmd; do mkdir -p "/sys/fs/cgroup/system.slice/$unit.service"; done
  differs "cgroup.conf has IgnoreSystemd=yes (the slurm role writes it where PID 1 is not systemd); this script made /sys/fs/cgroup/system.slice with +cpuset +cpu +memory +pids and a leaf per daemon, which systemd makes on its hosts"
fi

# Runs a daemon in its own leaf cgroup (when cgroups are used), as systemd would.
start_daemon() {
  local unit=$1; shift
  if [ "$cgroups" = yes ]; then
    setsid bash -c 'echo $$ >"/sys/fs/cgroup/system.slice/$0.service/cgroup.procs" && exec "$@"' "$unit" "$@" \
      </dev/null >>"$run/$unit.out" 2>&1 &
  else
    setsid "$@" </dev/null >>"$run/$unit.out" 2>&1 &
  fi
}

pkill -x munged || true
pkill -x slurmd || true
pkill -x slurmctld || true
sleep 1
start_daemon munge runuser -u munge -- /usr/sbin/munged --foreground
for _ in $(seq 50); do [ -S /run/munge/munge.socket.2 ] && break; sleep 0.1; done
munge -n | unmunge >/dev/null || { cat "$run/munge.out"; fail "munged does not answer"; }
differs "munged, slurmctld and slurmd run in the foreground started by this script (setsid), not as systemd services: nothing restarts them when they die"

start_daemon slurmctld /usr/sbin/slurmctld -D
for _ in $(seq 100); do [[ $(scontrol ping 2>/dev/null) == *UP* ]] && break; sleep 0.2; done
[[ $(scontrol ping 2>&1) == *UP* ]] || { tail -n 20 /var/log/slurm/slurmctld.log; fail "slurmctld does not answer"; }
start_daemon slurmd /usr/sbin/slurmd -D

node=$(sed -n 's/^NodeName=\([^ ]*\) .*/\1/p' "$conf_dir/nodes.conf" | head -n 1)
state=""
for _ in $(seq 120); do
  state=$(sinfo --noheader --Node --nodes="$node" --format=%t 2>/dev/null | head -n 1)
  [ "$state" = idle ] && break
  sleep 0.5
done
[ "$state" = idle ] || { sinfo -N -l; tail -n 30 /var/log/slurm/slurmd.log; fail "node $node is '$state', not idle"; }
say "node $node is idle: $(scontrol show node "$node" | grep -oE '(Gres|CfgTRES)=[^ ]+' | tr '\n' ' ')"
say "slurm on this host differs from a systemd host in $(wc -l <"$run/differences.txt") ways (build/gpu-host/run/differences.txt)"
say "ready in $(($(date +%s) - start)) s; next: /opt/gpulab/venv/bin/python scripts/gpu-host/drills.py"
