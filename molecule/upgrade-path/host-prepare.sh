#!/usr/bin/env bash
# What the upgrade-path scenario needs on this machine before its containers (lab/molecule-test.sh
# runs it first, prepare.yml again): Slurm 23.11's local repository (lab/slurm-23.11-repo.sh),
# downloaded once from an Ubuntu archive, or one line naming GPULAB_UBUNTU_MIRROR and the
# repository's directory. Prints the directory.
set -euo pipefail
exec bash "$(dirname "$0")/../../lab/slurm-23.11-repo.sh"
