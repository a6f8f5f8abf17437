"""Fixtures for the fault tests: the cluster under test, a healthy start, and the fault record.

The tests run against the molecule scenario (molecule sets MOLECULE_INVENTORY_FILE) or a
lab of the same shape (GPULAB_TEST_INVENTORY). Faults are injected with the real container
runtime (`podman restart`) and systemd inside the containers (`podman exec`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest
from lab_ops import Lab
from submit_ops import SshSubmit

from lab.cluster_under_test import append_timings, load_cluster_under_test

Record = Callable[..., None]


@pytest.fixture(scope="session")
def lab() -> Lab:
    return Lab(load_cluster_under_test())


@pytest.fixture(scope="session")
def ssh_submit(lab: Lab, tmp_path_factory: pytest.TempPathFactory) -> Iterator[SshSubmit]:
    """`gpulab submit --host` from this machine to the controller (sshd set up once, and
    removed again after the drills)."""
    submit = SshSubmit.prepare(lab, tmp_path_factory.mktemp("ssh"))
    try:
        yield submit
    finally:
        submit.cleanup()


@pytest.fixture
def healthy_lab(lab: Lab) -> Lab:
    """Every worker in service before a fault: one fault's aftermath must not hide in the next."""
    states = lab.wait_workers_in_service(timeout=240)
    assert all(lab.in_service(state) for state, _ in states.values()), (
        f"workers not in service: {states}"
    )
    return lab


@pytest.fixture
def record_fault() -> Iterator[Record]:
    """Prints one line per fault and appends it to $GPULAB_TIMINGS_FILE for lab/molecule-test.sh."""
    records: list[dict[str, object]] = []

    def record(fault: str, recovery_s: float, lost: list[str], detail: str = "") -> None:
        lost_text = "none" if not lost else f"{len(lost)} ({'; '.join(lost)})"
        print(f"\nfault {fault}: recovered in {recovery_s:.1f} s, job results lost: {lost_text}")
        if detail:
            print(f"  {detail}")
        records.append({"fault": fault, "recovery_s": round(recovery_s, 1), "lost": len(lost)})

    yield record
    append_timings(records)
