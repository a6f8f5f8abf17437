"""Fixtures of the rollout and upgrade tests: the cluster under test (the molecule scenario, or a
lab of the same shape with GPULAB_TEST_INVENTORY) and one line per step for lab/molecule-test.sh."""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator

import pytest
from slurm_ops import Slurm

from lab.cluster_under_test import Cluster, inventory_under_test

Record = Callable[..., None]


@pytest.fixture(scope="session")
def slurm() -> Slurm:
    inventory = inventory_under_test()
    if not inventory:
        raise pytest.UsageError("set GPULAB_TEST_INVENTORY (a lab inventory) or use molecule")
    return Slurm(Cluster.load(inventory))


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
    path = os.environ.get("GPULAB_TIMINGS_FILE")
    if path:
        with open(path, "a", encoding="utf-8") as out:
            for item in records:
                out.write(json.dumps(item) + "\n")
