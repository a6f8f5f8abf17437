"""Makes the in-repository collection importable as ansible_collections.gpulab.cluster, with
its copy of the payload's Slurm client made the way scripts/build-collection.sh makes it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
subprocess.run(["bash", str(REPO / "scripts/build-collection.sh"), "--copy-only"], check=True)
sys.path.insert(0, str(REPO / "collections"))
