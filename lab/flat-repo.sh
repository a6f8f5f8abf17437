#!/usr/bin/env bash
# Makes DIR a flat apt repository of PACKAGEs and of every package they need beyond what the
# lab image has: what a site without internet carries to its hosts, for
# gpulab.cluster.apt_sources (`uris: [file:DIR]`, `suites: [./]`, `trusted: true`;
# docs/operations.md, "Mirrors, proxies and air-gapped sites"). apt resolves and downloads them in
# a throwaway container of the image (GPULAB_IMAGE, default the lab's), from the image's own
# sources (this host's: lab/build-image.sh), through the shared .deb cache; dpkg-scanpackages
# writes the index. Kept while DIR holds the same packages for the same image; where the
# image's sources cannot be read, one line says what to put in DIR instead.
# Usage: lab/flat-repo.sh DIR PACKAGE...   (prints DIR)
set -euo pipefail

die() { printf 'flat-repo.sh: %s\n' "$*" >&2; exit 1; }
(($# >= 2)) || { echo "usage: flat-repo.sh DIR PACKAGE..." >&2; exit 2; }
dir=$1
shift
image=${GPULAB_IMAGE:-localhost/gpulab-bookworm-amd64:latest}
apt_cache=${GPULAB_APT_CACHE:-/var/cache/gpulab/debs}
provide="put the .deb files of $* and of what they need into $dir with their index (dpkg-scanpackages . > Packages)"

command -v dpkg-scanpackages >/dev/null || die "dpkg-scanpackages is missing (apt-get install dpkg-dev)"
image_id=$(podman image inspect --format '{{.Id}}' "$image" 2>/dev/null) || die "no image $image (make image)"
key=$(printf '%s\n' "$image_id" "$@" | sha256sum | cut -c1-16)
if [ -s "$dir/Packages" ] && [ "$(cat "$dir/.gpulab-repo" 2>/dev/null)" = "$key" ]; then
  echo "$dir"
  exit 0
fi

mkdir -p "$apt_cache" "$(dirname "$dir")"
work=$(mktemp -d "$dir.XXXXXX")  # beside DIR: moved into place whole
trap 'rm -rf "$work"' EXIT
# In the container: the image's sources read; the packages downloaded (links to the shared
# cache where it has them, new ones copied back to it); the .deb file of each package apt would
# install there, named as apt names it (EPOCH:VERSION as EPOCH%3aVERSION), copied out.
# shellcheck disable=SC2016 # expanded by the container's shell
resolve='
  /usr/local/sbin/gpulab-apt-cache seed
  if ! apt-get -q update >/tmp/update.log 2>&1 || grep -q "^[WE]: " /tmp/update.log; then
    grep "^[WE]: " /tmp/update.log | head -n 1 >&2
    exit 3
  fi
  apt-get -y -q --download-only --no-install-recommends install "$@" >/tmp/download.log 2>&1 \
    || { tail -n 5 /tmp/download.log >&2; exit 4; }
  /usr/local/sbin/gpulab-apt-cache save
  apt-get -s --no-install-recommends install "$@" \
    | sed -nE "s/^Inst ([^ ]+) (\[[^]]*\] )?\(([^ ]+) .*\[([^]]+)\]\)$/\1_\3_\4.deb/p" \
    | sed "s/:/%3a/g" >/tmp/debs
  while read -r deb; do cp -L "/var/cache/apt/archives/$deb" /out/; done </tmp/debs
'
if ! podman run --rm --ulimit host -v "$apt_cache:/var/cache/gpulab/debs" -v "$work:/out" \
    "$image" sh -euc "$resolve" sh "$@" 2>"$work.log"; then
  reason=$(tail -n 1 "$work.log")
  rm -f "$work.log"
  die "the packages could not be fetched from $image's sources (${reason:-no reason given}): make the image where its sources are reachable, or $provide"
fi
rm -f "$work.log"
(cd "$work" && dpkg-scanpackages --multiversion . 2>/dev/null >Packages)
[ -s "$work/Packages" ] || die "no package came out for $*: $provide"
echo "$key" >"$work/.gpulab-repo"
chmod 0755 "$work"
rm -rf "$dir"
mv "$work" "$dir"
echo "$dir"
