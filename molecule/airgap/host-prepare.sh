#!/usr/bin/env bash
# What the air-gapped scenario needs on this machine before its containers (lab/molecule-test.sh
# runs it first, prepare.yml again): the flat repository of the packages the roles of
# converge.yml install, as their vars/ name them (munge's; Slurm's client, controller and worker
# packages), and of what those need beyond the image. Prints the repository's directory; one line
# and exit 1 where it cannot be made (lab/flat-repo.sh says how to provide it).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
roles=$root/collections/ansible_collections/gpulab/cluster/roles
packages=$(python3 - "$roles" <<'PY'
import sys, yaml
roles = sys.argv[1]
munge = yaml.safe_load(open(f"{roles}/munge/vars/Debian.yml"))
slurm = yaml.safe_load(open(f"{roles}/slurm/vars/Debian.yml"))
names = munge["_munge_packages"] + [
    name for key in ("_slurm_client_packages", "_slurm_controller_packages", "_slurm_worker_packages")
    for name in slurm[key]
]
print(" ".join(dict.fromkeys(names)))
PY
)
# shellcheck disable=SC2086 # one package a word
exec bash "$root/lab/flat-repo.sh" "${GPULAB_AIRGAP_REPO:-/var/cache/gpulab/airgap-repo}" $packages
