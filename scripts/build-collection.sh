#!/usr/bin/env bash
# Builds the gpulab.cluster collection into build/collection with `ansible-galaxy collection
# build`. The roles and playbooks live in the collection itself (the repository's roles/ is a
# link to its roles/). Two module_utils are byte-identical copies of payload modules, committed
# so that a git install of the collection has them: the Slurm client (the one source of Slurm's
# argv and output parsing) and the NVIDIA driver reader (the one source of which /dev/nvidiaN
# is which GPU). This script refreshes them first; tests/collection/test_packaging.py fails
# when a committed copy differs from its source. ansible.cfg's collections_path = ./collections
# makes `gpulab.cluster.*` resolve from the repository itself; install the tarball elsewhere
# with `ansible-galaxy collection install`. --copy-only refreshes the copies and builds nothing.
# Usage: scripts/build-collection.sh [--copy-only]
set -euo pipefail
cd "$(dirname "$0")/.."

collection=collections/ansible_collections/gpulab/cluster
shared_module_utils=(payload/src/gpulab/submit/slurm_client.py payload/src/gpulab/backends/nvidia_driver.py)
out=${GPULAB_COLLECTION_OUT:-build/collection}
galaxy=ansible-galaxy
[ -x .venv/bin/ansible-galaxy ] && galaxy=.venv/bin/ansible-galaxy

cp "${shared_module_utils[@]}" "$collection/plugins/module_utils/"
[ "${1:-}" = --copy-only ] && exit 0
mkdir -p "$out"
"$galaxy" collection build --force --output-path "$out" "$collection"
