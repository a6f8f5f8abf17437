#!/usr/bin/env bash
# `ansible-test sanity` on the gpulab.cluster collection: every test that runs offline on this
# machine's Python (the venv's), in ansible-test's own venvs, whose pinned tools come from the
# package index. Skipped, and why:
#   pslint      PowerShell modules only; the collection has none (and there is no pwsh here).
#   shellcheck  needs the shellcheck binary, which the venv cannot install; the collection's
#               shell is Jinja templates of scripts, which shellcheck cannot read.
# tests/sanity/ignore-X.Y.txt (one per ansible-core release: add one when ansible-core moves)
# ignores, and why: the GPLv3 header (the collection is MIT) and the shebang of two templates
# of scripts (they are rendered to executables, not run from the collection).
# ansible-test fetches a pip bootstrap script from a host that is not reachable here:
# scripts/ansible_test_get_pip.py stands in for it, put where ansible-test looks first.
# Usage: scripts/ansible-test-sanity.sh [more ansible-test sanity options]
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x .venv/bin/ansible-test ] && export PATH="$PWD/.venv/bin:$PATH"

python=$(dirname "$(command -v ansible-test)")/python  # the Python that has ansible-test
pip_version=$("$python" - <<'PY'
import inspect, re
from ansible_test._internal import python_requirements
print(re.search(r"pip='([0-9.]+)'", inspect.getsource(python_requirements.get_venv_packages))[1])
PY
)
cache=${HOME}/.ansible/test/cache
mkdir -p "$cache"
cp scripts/ansible_test_get_pip.py "$cache/get_pip_${pip_version//./_}.py"

cd collections/ansible_collections/gpulab/cluster
version=$("$python" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
exec ansible-test sanity --python "$version" --skip-test pslint --skip-test shellcheck "$@"
