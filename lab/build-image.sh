#!/usr/bin/env bash
# Builds the lab's base image: a minimal Debian rootfs that boots systemd in an
# unprivileged podman container, imported as localhost/gpulab-SUITE-ARCH:RECIPE_HASH and
# tagged :latest. Skipped when an image with the current recipe hash already exists.
# Usage: lab/build-image.sh [--suite bookworm] [--arch amd64|arm64] (arm64 on an amd64 host
# runs under qemu-user: qemu-user-static, binfmt-support, update-binfmts --enable qemu-aarch64)
# Packages come from this host's apt sources and proxy, or GPULAB_DEBIAN_MIRROR,
# GPULAB_DEBIAN_SECURITY_MIRROR, GPULAB_DEBIAN_KEYRING, GPULAB_APT_PROXY (lab/apt_sources.py).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)

suite=bookworm
arch=$(dpkg --print-architecture)
while (($#)); do
  case "$1" in
    --suite) suite=${2:?--suite needs a value}; shift 2 ;;
    --arch) arch=${2:?--arch needs a value}; shift 2 ;;
    -h|--help) sed -n '2,8p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "build-image.sh: unknown argument '$1' (use --suite SUITE, --arch ARCH)" >&2; exit 2 ;;
  esac
done

# The image's package sources (its /etc/apt/sources.list.d/debian.sources), debootstrap's
# mirror and options, the keyrings they name and apt's proxy: this host's apt configuration,
# or the environment's GPULAB_DEBIAN_MIRROR, GPULAB_DEBIAN_SECURITY_MIRROR (none: no security
# updates), GPULAB_DEBIAN_KEYRING and GPULAB_APT_PROXY (none: no proxy). Where neither gives
# a source: one line naming the variable, exit 1 (lab/apt_sources.py).
resolved=$(mktemp -d /var/tmp/gpulab-sources.XXXXXX)
trap 'rm -rf "$resolved"' EXIT
assignments=$(python3 "$here/apt_sources.py" image "$suite" "$resolved") || exit 1
# sets mirror, debootstrap_args, proxy and copy_keyrings
eval "$assignments"
# openssh-server: Ansible's connection into the containers (lab/rootfs/usr/local/sbin/gpulab-lab-sshd).
packages=systemd,systemd-sysv,dbus,python3,python3-apt,sudo,iproute2,procps,ca-certificates,openssh-server
# Units that cannot work, or only get in the way, in an unprivileged container.
masked_units=(
  getty.target console-getty.service getty@.service serial-getty@.service
  systemd-logind.service
  sys-kernel-config.mount sys-kernel-debug.mount sys-kernel-tracing.mount
  sys-fs-fuse-connections.mount dev-hugepages.mount dev-mqueue.mount
  proc-sys-fs-binfmt_misc.automount proc-sys-fs-binfmt_misc.mount
  apt-daily.timer apt-daily-upgrade.timer
)
# GPULAB_IMAGE_REPO: another name, e.g. for a trial build beside the image in use.
repo=${GPULAB_IMAGE_REPO:-localhost/gpulab-$suite-$arch}
debootstrap_cache=${GPULAB_DEBOOTSTRAP_CACHE:-/var/cache/gpulab/debootstrap}

step() { printf '==> [image %s] %s\n' "$suite-$arch" "$*"; }
die() { printf 'build-image.sh: %s\n' "$*" >&2; exit 1; }

# The recipe: this script, the files copied into the rootfs, and the parameters (the resolved
# sources and proxy, not how they were found: an unchanged source keeps the image).
recipe_hash=$(
  {
    printf '%s\n' "$suite" "$arch" "$proxy"
    cat "$resolved/debian.sources" ${copy_keyrings[@]+"${copy_keyrings[@]}"}
    cat "$0"
    (cd "$here/rootfs" && find . -type f | LC_ALL=C sort | while read -r f; do
      printf '%s %s\n' "$f" "$(stat -c %a "$f")"; cat "$f"; done)
  } | sha256sum | cut -c1-12
)
image=$repo:$recipe_hash
# Lab and molecule containers bind-mount this directory (lab/rootfs/usr/local/sbin/gpulab-apt-cache);
# the build's own updates come from it too.
apt_cache=${GPULAB_APT_CACHE:-/var/cache/gpulab/debs}
mkdir -p "$apt_cache"
# This machine's key for Ansible's SSH connection into lab containers: made once, outside
# the image, and handed to each connection (inventory/lab/group_vars/all/connection.yml).
ssh_key=/var/cache/gpulab/lab-ssh/id_ed25519
if [ ! -e "$ssh_key" ]; then
  mkdir -p -m 0700 "${ssh_key%/*}"
  ssh-keygen -q -t ed25519 -N '' -C gpulab-lab -f "$ssh_key"
  step "made the lab's SSH key $ssh_key"
fi

if podman image exists "$image"; then
  podman tag "$image" "$repo:latest"
  step "up to date: $image (tagged :latest)"
  exit 0
fi

[ "$(id -u)" = 0 ] || die "must run as root (debootstrap needs it)"
command -v debootstrap >/dev/null || die "debootstrap is not installed (run scripts/setup.sh)"
[ -e "/usr/share/debootstrap/scripts/$suite" ] || die "debootstrap does not know suite '$suite'"
if [ "$arch" != "$(dpkg --print-architecture)" ]; then
  # debootstrap runs the foreign rootfs's binaries in a chroot, and podman runs them in
  # containers: both need qemu-user registered with binfmt_misc, with the F flag (the kernel
  # opens the interpreter at registration, so it need not exist inside the rootfs).
  qemu_arch=$(case "$arch" in arm64) echo aarch64 ;; armhf) echo arm ;; *) echo "$arch" ;; esac)
  binfmt=/proc/sys/fs/binfmt_misc/qemu-$qemu_arch
  command -v "qemu-$qemu_arch-static" >/dev/null \
    || die "cannot run $arch binaries: qemu-$qemu_arch-static is missing (apt-get install qemu-user-static binfmt-support)"
  [ -e "$binfmt" ] \
    || die "cannot run $arch binaries: qemu-$qemu_arch is not registered with binfmt_misc (run: update-binfmts --enable qemu-$qemu_arch)"
  grep -qx enabled "$binfmt" \
    || die "cannot run $arch binaries: binfmt_misc's qemu-$qemu_arch is disabled (run: update-binfmts --enable qemu-$qemu_arch)"
  grep -q '^flags:.*F' "$binfmt" \
    || die "cannot run $arch binaries in a chroot: binfmt_misc's qemu-$qemu_arch lacks the F (fix-binary) flag (use Debian's qemu-user-static)"
fi

start=$SECONDS
work=$(mktemp -d /var/tmp/gpulab-image.XXXXXX)
cleanup() {
  # debootstrap may leave /proc and /sys mounted in the rootfs when it fails:
  # unmount them (deepest first) before deleting anything.
  local m
  for m in $(findmnt -rn -o TARGET | grep -F "$work/" | sort -r || true); do umount -l "$m" || true; done
  rm -rf --one-file-system "$work" "$resolved"
}
trap cleanup EXIT
rootfs=$work/rootfs
mkdir -p "$debootstrap_cache"

step "debootstrap $suite ($arch, minbase) into $rootfs from $mirror"
if ! http_proxy=${proxy:-${http_proxy:-}} debootstrap --variant=minbase --arch="$arch" --include="$packages" \
  --cache-dir="$debootstrap_cache" ${debootstrap_args[@]+"${debootstrap_args[@]}"} \
  "$suite" "$rootfs" "$mirror" >"$work/debootstrap.log" 2>&1; then
  tail -n 20 "$work/debootstrap.log" >&2
  die "debootstrap failed (log above)"
fi
step "debootstrap done in $((SECONDS - start)) s"

step "preparing the rootfs for systemd in a container"
# An empty machine-id: systemd makes a new one at each container's first boot.
: >"$rootfs/etc/machine-id"
rm -f "$rootfs/var/lib/dbus/machine-id"
# No sshd listens and no host key is shared by every container: gpulab-lab-sshd serves one
# connection at a time on stdin and makes the container's host key on its first one.
# Disabled, not masked: a test may still start ssh.service (systemctl enable --now ssh).
rm -f "$rootfs"/etc/ssh/ssh_host_*_key "$rootfs"/etc/ssh/ssh_host_*_key.pub \
  "$rootfs"/etc/systemd/system/multi-user.target.wants/ssh.service "$rootfs"/etc/systemd/system/sshd.service \
  "$rootfs"/etc/systemd/system/sockets.target.wants/ssh.socket
for unit in "${masked_units[@]}"; do
  ln -sfn /dev/null "$rootfs/etc/systemd/system/$unit"
done
if [ "$arch" != "$(dpkg --print-architecture)" ]; then
  # Under qemu-user systemd cannot set up a unit's credentials (it mounts a private
  # filesystem for them, a call qemu-user refuses): units that load any, such as
  # systemd-tmpfiles-setup and systemd-sysusers, fail at boot with 243/CREDENTIALS.
  # The lab passes no credentials: reset those settings in a drop-in of each such unit.
  for unit_file in "$rootfs"/usr/lib/systemd/system/*.service; do
    keys=$(grep -oE '^(Load|LoadEncrypted|Set|SetEncrypted|Import)Credential=' "$unit_file" | sort -u || true)
    [ -n "$keys" ] || continue
    dropin=$rootfs/etc/systemd/system/${unit_file##*/}.d
    mkdir -p "$dropin"
    printf '# lab/build-image.sh: no credentials under qemu-user\n[Service]\n%s\n' "$keys" >"$dropin/gpulab-qemu-user.conf"
  done
fi
rm -f "$rootfs/etc/apt/sources.list"
cp "$resolved/debian.sources" "$rootfs/etc/apt/sources.list.d/debian.sources"
for keyring in ${copy_keyrings[@]+"${copy_keyrings[@]}"}; do
  [ -e "$rootfs$keyring" ] || install -D -m 0644 "$keyring" "$rootfs$keyring"
done
if [ -n "$proxy" ]; then
  printf '// lab/build-image.sh: apt'"'"'s proxy on the host that built the image (GPULAB_APT_PROXY)\nAcquire::http::Proxy "%s";\n' \
    "$proxy" >"$rootfs/etc/apt/apt.conf.d/01gpulab-proxy"
fi
cp -a "$here/rootfs/." "$rootfs/"

# debootstrap installs the suite's last point release; a maintained host also has the
# security and point-release updates since. Without them each node's first converge
# upgraded what its packages pin to a newer version (perl-base; python3.11 with
# python3-venv, which byte-compiles the standard library again: 3-4 CPU-s a node, more
# under qemu). The shared .deb cache stands in for the rootfs's archive while they install.
step "applying the updates of $suite-security and $suite-updates"
mount -t proc proc "$rootfs/proc"
mount --bind "$apt_cache" "$rootfs/var/cache/apt/archives"
if ! { chroot "$rootfs" apt-get -q update \
    && DEBIAN_FRONTEND=noninteractive chroot "$rootfs" apt-get -y -q \
      -o Dpkg::Options::=--force-confold --no-install-recommends dist-upgrade; } \
    >"$work/upgrade.log" 2>&1; then
  tail -n 20 "$work/upgrade.log" >&2
  die "applying the updates failed (log above)"
fi
rm -rf "$apt_cache/partial" "$apt_cache/lock"
umount "$rootfs/var/cache/apt/archives" "$rootfs/proc"
step "$(grep -c '^Unpacking' "$work/upgrade.log" || true) packages updated"

chroot "$rootfs" apt-get clean
rm -rf "$rootfs"/var/lib/apt/lists/* "$rootfs"/var/cache/apt/*.bin "$rootfs"/var/log/*.log \
  "$rootfs"/tmp/* "$rootfs"/var/tmp/*
# An ancient apt index: the first converge's cache_valid_time forces an apt-get update.
mkdir -p "$rootfs/var/lib/apt/lists/partial"
touch -d @0 "$rootfs/var/lib/apt/lists"

step "importing into podman as $image"
tar -C "$rootfs" --numeric-owner --xattrs -c . | podman import --quiet \
  --change 'CMD ["/lib/systemd/systemd"]' \
  --change 'ENV container=podman' \
  --change 'STOPSIGNAL SIGRTMIN+3' \
  --change "LABEL gpulab.recipe=$recipe_hash" \
  --change "LABEL gpulab.suite=$suite" \
  --change "LABEL gpulab.arch=$arch" \
  --arch "$arch" \
  - "$image" >/dev/null
podman tag "$image" "$repo:latest"

# Older recipes of this image are no longer wanted (one still used by a container stays).
for old in $(podman images --format '{{.Repository}}:{{.Tag}}' "$repo"); do
  [ "$old" = "$image" ] || [ "$old" = "$repo:latest" ] || podman rmi "$old" >/dev/null 2>&1 || true
done

step "built $image (:latest) in $((SECONDS - start)) s"
