#!/usr/bin/env bash
# On the development machine (Debian 12): everything a GPU host without a package manager needs
# for scripts/gpu-host/slurm.sh, fetched by package name from this machine's own apt and pip
# configuration into build/gpu-host/, and the payload's wheelhouse for the host's Python built
# by the payload role itself into build/payload/ (where the role's build tasks on the host find it).
#   build/gpu-host/debs/slurm  Debian 12's Slurm 22.05 and munge, and the libraries they need that
#                              a bare Ubuntu 24.04 lacks (slurm.sh unpacks only those it lacks)
#   build/gpu-host/debs/gl     the Vulkan loader and libglvnd, which NVIDIA's ICD loads
#   build/gpu-host/debs/tools  vulkaninfo and its X libraries (unpacked apart, into /opt/gpulab-vt)
#   build/gpu-host/debs/vvl    the Khronos validation layer and glslc, for the payload's suites
#                              under the layer and its user kernels (scripts/gpu-host/kernel-checks.sh;
#                              slurm.sh leaves them alone)
#   build/gpu-host/wheels      ansible-core and its dependencies for the host's Python
#   build/gpu-host/wheels-test pytest, hypothesis and the payload's own dependencies, for kernel-checks.sh
#   build/gpu-host/wheels-venv numpy, cffi and vulkan: start-ab.sh's venv, as a worker's (no torch)
# Usage: scripts/gpu-host/bundle.sh [PYTHON_VERSION]   (default 3.12: Ubuntu 24.04's)
set -euo pipefail
cd "$(dirname "$0")/../.."
python_version=${1:-3.12}
bundle=build/gpu-host

say() { echo "==> [gpu-host bundle] $*"; }

# shellcheck source=/dev/null
. /etc/os-release
if [ "${VERSION_CODENAME:-}" != bookworm ]; then
  echo "scripts/gpu-host/bundle.sh: this machine runs ${PRETTY_NAME:-an unknown system}; the bundle is Debian 12's" \
    "Slurm 22.05 and munge, fetched with this machine's apt: run it on Debian 12 (bookworm)" >&2
  exit 2
fi

slurm_debs=(slurmd slurmctld slurm-client slurm-wlm-basic-plugins libslurm38 munge libmunge2
  libhwloc15 liblua5.1-0 libdbus-1-3 libjson-c5 libyaml-0-2)
gl_debs=(libvulkan1 libglvnd0 libegl1 libgl1 libglx0 libopengl0 libgles2)
tool_debs=(vulkan-tools libwayland-client0 libx11-6 libx11-data libxcb1 libxau6 libxdmcp6 libbsd0 libmd0 libffi8)
# The layer's and glslc's own dependencies (libc6, libgcc-s1, libstdc++6 >= 12) are on any Ubuntu
# 24.04 already.
vvl_debs=(vulkan-validationlayers glslc libshaderc1)

fetch() {
  local dir=$1; shift
  rm -rf "$dir" && mkdir -p "$dir"
  # _apt cannot write into root's build folder: download unsandboxed, quietly.
  (cd "$dir" && apt-get download -q -o APT::Sandbox::User=root "$@" >/dev/null)
}
[ -n "$(find /var/lib/apt/lists -name '*_Packages*' -print -quit)" ] || apt-get update -q >/dev/null
fetch "$bundle/debs/slurm" "${slurm_debs[@]}"
fetch "$bundle/debs/gl" "${gl_debs[@]}"
fetch "$bundle/debs/tools" "${tool_debs[@]}"
fetch "$bundle/debs/vvl" "${vvl_debs[@]}"
say "debs: $(find "$bundle/debs" -name '*.deb' | wc -l) packages ($(du -sh "$bundle/debs" | cut -f1)): $(
  find "$bundle/debs/slurm" -name 'slurmd_*.deb' -printf '%f')"

rm -rf "$bundle/wheels" && mkdir -p "$bundle/wheels"
python3=${PYTHON:-.venv/bin/python}
"$python3" -m pip download --quiet --only-binary=:all: --python-version "$python_version" \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
  --dest "$bundle/wheels" "ansible-core==$("$python3" -c 'import ansible; print(ansible.__version__)')" \
  "cryptography>=42,<51"
say "wheels: $(ls "$bundle/wheels" | wc -l) for Python $python_version ($(du -sh "$bundle/wheels" | cut -f1))"
rm -rf "$bundle/wheels-test" && mkdir -p "$bundle/wheels-test"
"$python3" -m pip download --quiet --only-binary=:all: --python-version "$python_version" \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
  --dest "$bundle/wheels-test" pytest hypothesis cffi vulkan jsonschema
say "test wheels: $(ls "$bundle/wheels-test" | wc -l) for Python $python_version ($(du -sh "$bundle/wheels-test" | cut -f1))"
rm -rf "$bundle/wheels-venv" && mkdir -p "$bundle/wheels-venv"
"$python3" -m pip download --quiet --only-binary=:all: --python-version "$python_version" \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
  --dest "$bundle/wheels-venv" numpy cffi vulkan
say "venv wheels: $(ls "$bundle/wheels-venv" | wc -l) for Python $python_version"

# The payload role's own build tasks, for one worker of this architecture and Python.
target="$(uname -m)-cp${python_version/./}"
ANSIBLE_CONFIG=$PWD/ansible.cfg .venv/bin/ansible-playbook -i localhost, -c local \
  -e "{\"_payload_targets\": [\"$target\"]}" scripts/gpu-host/wheelhouse.yml >"$bundle/wheelhouse.log" ||
  { cat "$bundle/wheelhouse.log"; exit 1; }
# The release the role names for this tree (what the host's converge will look for).
release=$(.venv/bin/python roles/payload/files/payload_release.py source payload |
  .venv/bin/python -c 'import json, sys; print(json.load(sys.stdin)["release"])')
say "payload wheelhouse for $target: build/payload/$release/$target ($(du -sh "build/payload/$release/$target" | cut -f1))"
say "carry build/gpu-host and build/payload/$release to the GPU host, then run scripts/gpu-host/slurm.sh there as root"
