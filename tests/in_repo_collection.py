"""The in-repository collection, importable as ansible_collections.gpulab.cluster, with its
copy of the payload's Slurm client made the way scripts/build-collection.sh makes it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def use_collection() -> None:
    """Copy the Slurm client into module_utils and put the collection on sys.path."""
    subprocess.run(["bash", str(REPO / "scripts/build-collection.sh"), "--copy-only"], check=True)
    if str(REPO / "collections") not in sys.path:
        sys.path.insert(0, str(REPO / "collections"))
