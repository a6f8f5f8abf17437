"""The upgrade tests use the rollout scenario's Slurm helpers and fixtures (its tests/)."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "rollout/tests"))

from slurm_fixtures import record_step, slurm  # after the path above

__all__ = ["record_step", "slurm"]
