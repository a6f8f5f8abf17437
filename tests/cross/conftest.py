"""Makes the in-repository collection importable as ansible_collections.gpulab.cluster."""

from __future__ import annotations

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "collections"))
