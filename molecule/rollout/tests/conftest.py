"""The rollout tests' fixtures (slurm_fixtures.py, shared with molecule/upgrade)."""

from __future__ import annotations

from slurm_fixtures import record_step, slurm

__all__ = ["record_step", "slurm"]
