#!/usr/bin/env bash
# Builds the gpulab.cluster collection: copies roles/ (the one source of the roles) into
# the collection's roles/ and runs `ansible-galaxy collection build` into build/collection.
# ansible.cfg's collections_path = ./collections makes `gpulab.cluster.*` resolve from the
# repository itself; install the tarball elsewhere with `ansible-galaxy collection install`.
set -euo pipefail
cd "$(dirname "$0")/.."

collection=collections/ansible_collections/gpulab/cluster
out=${GPULAB_COLLECTION_OUT:-build/collection}
galaxy=ansible-galaxy
[ -x .venv/bin/ansible-galaxy ] && galaxy=.venv/bin/ansible-galaxy

rm -rf "$collection/roles"
mkdir -p "$collection/roles" "$out"
cp -a roles/. "$collection/roles/"
find "$collection" -name __pycache__ -type d -prune -exec rm -rf {} +
"$galaxy" collection build --force --output-path "$out" "$collection"
