#!/usr/bin/env bash
# Builds the gpulab.cluster collection into build/collection with `ansible-galaxy collection
# build`. Everything lives in the collection itself: the roles and playbooks (the repository's
# roles/ is a link to its roles/), and the two module_utils the payload shares, the Slurm client
# and the NVIDIA driver reader (the payload's gpulab/submit/slurm_client.py and
# gpulab/placement/nvidia_driver.py are links to them), so a git install has them all and there
# is nothing to copy. One built file joins them first: the payload's sdist, at the payload
# role's files/gpulab.tar.gz (scripts/payload-sdist.py; git ignores it), from which the role
# builds the workers' wheels wherever the tarball is installed. ansible.cfg's
# collections_path = ./collections makes `gpulab.cluster.*` resolve from the repository itself;
# install the tarball elsewhere with `ansible-galaxy collection install`.
# Usage: scripts/build-collection.sh
set -euo pipefail
cd "$(dirname "$0")/.."

collection=collections/ansible_collections/gpulab/cluster
out=${GPULAB_COLLECTION_OUT:-build/collection}
galaxy=ansible-galaxy
python=python3
[ -x .venv/bin/ansible-galaxy ] && galaxy=.venv/bin/ansible-galaxy
[ -x .venv/bin/python ] && python=.venv/bin/python

"$python" scripts/payload-sdist.py "$collection/roles/payload/files/gpulab.tar.gz"

mkdir -p "$out"
# Its one line of success ("Created collection ...") is not news in `make lab`'s output;
# errors still go to stderr.
"$galaxy" collection build --force --output-path "$out" "$collection" >/dev/null
