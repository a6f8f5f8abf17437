"""Fixtures of the rollout and upgrade tests: the cluster under test (the molecule scenario, or a
lab of the same shape with GPULAB_TEST_INVENTORY) and one line per step for lab/molecule-test.sh."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest
from slurm_ops import Slurm

from lab.cluster_under_test import append_timings, load_cluster_under_test

Record = Callable[..., None]


@pytest.fixture(scope="session")
def slurm() -> Slurm:
    return Slurm(load_cluster_under_test())


@pytest.fixture
def record_step() -> Iterator[Record]:
    """Prints one line per step and appends it to $GPULAB_TIMINGS_FILE (lab/molecule-test.sh)."""
    records: list[dict[str, object]] = []

    def record(step: str, seconds: float, lost: int, detail: str = "") -> None:
        print(f"\nstep {step}: {seconds:.1f} s, jobs lost: {lost or 'none'}")
        if detail:
            print(f"  {detail}")
        records.append({"step": step, "seconds": seconds, "lost": lost})

    yield record
    append_timings(records)
