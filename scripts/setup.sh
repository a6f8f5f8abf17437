#!/usr/bin/env bash
# Installs everything gpulab needs on a fresh Debian machine: apt packages, podman
# configured for this kind of host, and the Python venv with the payload and the tools.
# Safe to run again: each step checks before it changes anything.
set -euo pipefail
cd "$(dirname "$0")/.."

APT_PACKAGES=(
  # containers for the lab and molecule; netavark + aardvark-dns give a network's
  # containers DNS by name (CNI, which podman falls back to without them, has none here);
  # netavark sets up the network's NAT with iptables but does not depend on it
  podman runc debootstrap uidmap slirp4netns netavark aardvark-dns iptables
  # Ansible's SSH connection into the lab containers (inventory/lab/group_vars/all/connection.yml)
  openssh-client
  # Vulkan: the loader, lavapipe (a CPU device), the GLSL compiler, vulkaninfo, and the
  # Khronos validation layer that `make test-payload` runs the memory, kernel and graph suites under
  libvulkan1 mesa-vulkan-drivers glslc glslang-tools vulkan-tools vulkan-validationlayers
  # native libraries and their cross builds
  build-essential cmake file gcc-aarch64-linux-gnu g++-aarch64-linux-gnu libc6-dev-arm64-cross
  qemu-user-static binfmt-support
  # a userspace NFS client, for checks over the NFS protocol
  libnfs-utils
  # the shells whose completion scripts the tests run (gpulab completion zsh|fish)
  zsh fish
  # the venv's interpreter (below)
  python3 python3-venv
)
VENV=${GPULAB_VENV:-.venv}
# The venv's interpreter: the distribution's Python, built with profile-guided and link-time
# optimisation, not whichever python3 comes first on PATH. A pyenv build (--enable-shared,
# no PGO) cost Ansible, pytest and the lab's tools 10-12% more CPU for the same checks
# (docs/timing.md). GPULAB_PYTHON names another.
PYTHON=${GPULAB_PYTHON:-/usr/bin/python3}
# The installer of the venv's packages (below).
UV_VERSION=0.13.9

step() { printf '==> %s\n' "$*"; }

missing=()
for p in "${APT_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if ((${#missing[@]})); then
  step "apt: installing ${missing[*]}"
  SUDO=""; [ "$(id -u)" = 0 ] || SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# aarch64 binaries (the cross-built libraries' tests, the arm64 lab image) run under
# qemu-user; with no systemd here to register it at boot, register it on every setup.
if [ ! -e /proc/sys/fs/binfmt_misc/qemu-aarch64 ]; then
  step "binfmt: registering qemu-aarch64"
  [ -e /proc/sys/fs/binfmt_misc/register ] || mount -t binfmt_misc binfmt_misc /proc/sys/fs/binfmt_misc
  update-binfmts --enable qemu-aarch64
fi

# crun fails on hybrid cgroup hosts and setrlimit is refused here (shared/HARNESS.md).
conf=/etc/containers/containers.conf
if ! grep -qs 'gpulab' "$conf"; then
  step "podman: runtime runc, no default ulimits ($conf)"
  mkdir -p /etc/containers
  cat >>"$conf" <<'CONF'
# gpulab: runc instead of crun, and no ulimits (setrlimit is refused on this host)
[containers]
default_ulimits = []

[engine]
runtime = "runc"
CONF
fi
# Networks with DNS by container name: netavark, explicitly, also where CNI networks exist
# (podman keeps CNI as soon as any CNI network has been made).
if ! grep -qs '^network_backend' "$conf"; then
  step "podman: network backend netavark ($conf)"
  printf '\n[network]\nnetwork_backend = "netavark"\n' >>"$conf"
fi

# A venv made from another interpreter is made again (its packages with it).
base=$(readlink -f "$PYTHON")
if [ -x "$VENV/bin/python" ] && [ "$("$VENV/bin/python" -c 'import sys; print(sys._base_executable)' | xargs -r readlink -f)" != "$base" ]; then
  step "venv: $VENV was made from another Python; making it again from $PYTHON"
  rm -rf "$VENV"
fi
if [ ! -x "$VENV/bin/python" ]; then
  step "venv: creating $VENV ($PYTHON)"
  "$PYTHON" -m venv "$VENV"
fi
site=$("$VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_path("purelib"))')
stamp="$VENV/.gpulab-deps"
want=$(cat requirements-dev.txt payload/pyproject.toml | sha256sum | cut -c1-16)
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  step "venv: installing the payload and the tools"
  # uv (from PyPI, into the venv) installs the same requirements as pip in 3-5 s instead of
  # 15-20: it fetches in parallel and links the files from its cache, and it compiles nothing.
  # The bytecode is compiled next, on every core: this machine and CI set
  # PYTHONDONTWRITEBYTECODE, so a module without its .pyc is compiled anew by every process.
  # Left out: the ansible package, which is only collections (15,000 Python files) that
  # Ansible's collection loader compiles from source on each import, never reading bytecode
  # (ansible/utils/collection_loader/_collection_finder.py, get_code).
  # pip installs them where uv cannot (an index only pip's configuration names, for one).
  if "$VENV/bin/pip" install -q "uv==$UV_VERSION" &&
    "$VENV/bin/uv" pip install -q --python "$VENV/bin/python" -r requirements-dev.txt -e payload; then
    "$VENV/bin/python" -m compileall -q -j 0 -x '/ansible_collections/' "$site" >/dev/null
  else
    step "venv: uv failed; installing with pip"
    "$VENV/bin/pip" install -q -r requirements-dev.txt -e payload
  fi
  echo "$want" >"$stamp"
fi
# The lab image's bytecode cache for Ansible's module_utils (docs/timing.md), in the venv too:
# its Python runs the modules of every task on this machine (the tests' local hosts, tasks
# delegated to localhost), each compiling ansible.module_utils from its zip otherwise.
image_site=lab/rootfs/usr/lib/python3/dist-packages
for f in gpulab_zipimport_cache.py gpulab-zipimport-cache.pth; do
  cmp -s "$image_site/$f" "$site/$f" || install -m 0644 "$image_site/$f" "$site/$f"
done
# With PYTHONDONTWRITEBYTECODE set (this machine and CI set it) nothing a process compiles is
# kept: the editable payload would be compiled again by each gpulab process (35-60 ms a
# start), the cache module by each Python start in the venv. Python still reads bytecode that
# is there, and recompiles a module whose source is newer.
"$VENV/bin/python" -m compileall -q payload/src "$site/gpulab_zipimport_cache.py"
# promtool (`make test-rules`: the monitoring role's alert rules checked and unit-tested) from
# the distribution's `prometheus` package, the one the monitoring role installs on the
# servers, so the rules are checked by the version that runs them. Only the binary, into the
# venv: installing the package here would also start a Prometheus daemon on this machine
# (its init script, no systemd needed), listening on every interface. apt-get download
# fetches it through this machine's apt configuration; `apt-get update` first where apt has
# no lists yet.
if [ ! -x "$VENV/bin/promtool" ]; then
  step "promtool: from Debian's prometheus package into $VENV/bin"
  debs=$(mktemp -d)
  if ! (cd "$debs" && apt-get download -q prometheus >/dev/null 2>&1); then
    SUDO=""; [ "$(id -u)" = 0 ] || SUDO=sudo
    $SUDO apt-get update -qq
    (cd "$debs" && apt-get download -q prometheus >/dev/null)
  fi
  dpkg-deb --fsys-tarfile "$debs"/prometheus_*.deb | tar -xO ./usr/bin/promtool >"$VENV/bin/promtool.tmp"
  chmod 0755 "$VENV/bin/promtool.tmp" && mv "$VENV/bin/promtool.tmp" "$VENV/bin/promtool"
  rm -rf "$debs"
fi
step "setup done ($("$VENV/bin/python" --version), $(podman --version))"
