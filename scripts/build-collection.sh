#!/usr/bin/env bash
# Builds the gpulab.cluster collection: copies roles/ (the one source of the roles) into
# the collection's roles/, and the payload's Slurm client (the one source of Slurm's argv and
# output parsing) and NVIDIA driver reader (the one source of which /dev/nvidiaN is which GPU)
# into its module_utils/, then runs `ansible-galaxy collection build` into
# build/collection. ansible.cfg's collections_path = ./collections makes `gpulab.cluster.*`
# resolve from the repository itself; install the tarball elsewhere with
# `ansible-galaxy collection install`. --copy-only makes the copies and builds nothing
# (tests/collection/conftest.py runs it).
# Usage: scripts/build-collection.sh [--copy-only]
set -euo pipefail
cd "$(dirname "$0")/.."

collection=collections/ansible_collections/gpulab/cluster
shared_module_utils=(payload/src/gpulab/submit/slurm_client.py payload/src/gpulab/backends/nvidia_driver.py)
out=${GPULAB_COLLECTION_OUT:-build/collection}
galaxy=ansible-galaxy
[ -x .venv/bin/ansible-galaxy ] && galaxy=.venv/bin/ansible-galaxy

rm -rf "$collection/roles"
mkdir -p "$collection/roles"
cp -a roles/. "$collection/roles/"
cp "${shared_module_utils[@]}" "$collection/plugins/module_utils/"
[ "${1:-}" = --copy-only ] && exit 0
mkdir -p "$out"
find "$collection" -name __pycache__ -type d -prune -exec rm -rf {} +
"$galaxy" collection build --force --output-path "$out" "$collection"
