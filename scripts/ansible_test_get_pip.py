"""Stand-in for the get-pip.py bootstrap script that ansible-test downloads from its own CI host.

That host is not reachable here; the package index is. ansible-test runs this file with each
sanity test's new, empty venv Python and get-pip's arguments (pip options, then the pinned
`pip==X` and friends): Python's ensurepip puts a pip in the venv, and that pip installs the
pinned versions from the package index. scripts/ansible-test-sanity.sh puts it in ansible-test's
cache, where ansible-test looks before downloading.
"""

from __future__ import annotations

import subprocess
import sys

# get-pip.py's own flags; pip install does not know them.
GET_PIP_ONLY = {"--no-setuptools", "--no-wheel"}

if __name__ == "__main__":
    # In a process of its own: ensurepip turns off pip's configuration (the index, its
    # certificates) in the environment of the process that calls it.
    subprocess.run([sys.executable, "-m", "ensurepip"], check=True)
    arguments = [argument for argument in sys.argv[1:] if argument not in GET_PIP_ONLY]
    subprocess.run([sys.executable, "-m", "pip", "install", *arguments], check=True)
