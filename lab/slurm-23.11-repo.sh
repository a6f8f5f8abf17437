#!/usr/bin/env bash
# A local apt repository with Slurm 23.11, the release between Debian 12's 22.05 and Debian
# 13's 24.11 (docs/operations.md, "Debian 12 to Debian 13"). No Debian build of 23.x is
# reachable from here; this is Ubuntu 24.04's build, a stand-in for the rebuild a site would
# serve, with the MySQL client library its slurmdbd links (Debian ships none). It needs glibc
# 2.38: it installs on Debian 13, not on Debian 12.
# Downloads once, from the Ubuntu archive that GPULAB_UBUNTU_MIRROR names or this host's apt
# sources have (lab/apt_sources.py), through this host's apt proxy; without either it stops at
# once in one line. Prints the repository's directory (a flat repository: `deb [trusted=yes]
# file:DIR ./`); a site without that archive puts the .deb files there itself.
# Usage: lab/slurm-23.11-repo.sh [DIR]   (default GPULAB_SLURM_2311_REPO, else
# /var/cache/gpulab/slurm-23.11)
set -euo pipefail
dir=${1:-${GPULAB_SLURM_2311_REPO:-/var/cache/gpulab/slurm-23.11}}
packages=(slurm-client slurm-wlm-basic-plugins slurmctld slurmd slurmdbd slurm-wlm-mysql-plugin
  libmysqlclient21)

if [ ! -s "$dir/Packages" ]; then
  if ! archive=$(python3 "$(dirname "$0")/apt_sources.py" archive ubuntu 2>&1); then
    echo "slurm-23.11-repo.sh: Slurm 23.11 comes from Ubuntu 24.04's archive; ${archive#apt_sources.py: }," \
      "or put its .deb files and their Packages index in $dir (dpkg-scanpackages)" >&2
    exit 1
  fi
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
  mkdir -p "$work/lists/partial" "$work/cache" "$work/debs"
  cat >"$work/sources.list" <<SOURCES
deb [trusted=yes] $archive noble main universe
deb [trusted=yes] $archive noble-updates main universe
SOURCES
  apt=(-oDir::Etc::SourceList="$work/sources.list" -oDir::Etc::SourceParts=/dev/null
    -oDir::State::Lists="$work/lists" -oDir::Cache="$work/cache" -oAPT::Architecture=amd64
    -oAPT::Architectures=amd64 -oAcquire::AllowInsecureRepositories=true -oAPT::Sandbox::User=root)
  apt-get "${apt[@]}" update -qq >/dev/null 2>&1 || apt-get "${apt[@]}" update  # unsigned: trusted=yes
  (cd "$work/debs" && apt-get "${apt[@]}" download "${packages[@]}" >/dev/null)
  (cd "$work/debs" && dpkg-scanpackages --multiversion . 2>/dev/null >Packages)
  mkdir -p "$(dirname "$dir")"
  rm -rf "$dir.tmp" && mv "$work/debs" "$dir.tmp" && rm -rf "$dir" && mv "$dir.tmp" "$dir"
fi
echo "$dir"
