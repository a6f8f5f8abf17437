"""Fixtures for the cluster tests: the cluster under test, and a testinfra host per node.

The tests run against the molecule scenario or against the lab
(GPULAB_TEST_INVENTORY=inventory/lab): lab/cluster_under_test.py reads the inventory.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from testinfra.host import Host

from lab.cluster_under_test import Cluster, append_timings, load_cluster_under_test, wait_for

__all__ = ["GANESHA_EXPORT", "Cluster"]  # the tests import them from here

# nfs-ganesha's export file on the storage node (roles/nfs_server/vars/main.yml).
GANESHA_EXPORT = "/etc/ganesha/gpulab-export.conf"


_CLUSTER: Cluster | None = None


def cluster_under_test() -> Cluster:
    global _CLUSTER  # noqa: PLW0603 - loaded once per session, also at collection time
    if _CLUSTER is None:
        _CLUSTER = load_cluster_under_test()
    return _CLUSTER


@pytest.fixture(scope="session")
def cluster() -> Cluster:
    return cluster_under_test()


@pytest.fixture(scope="session")
def controller(cluster: Cluster) -> Host:
    return cluster.node(cluster.controller)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Parametrize `hostname` over every host, `worker` over the workers group, `standin`
    over the Jetson stand-ins and `lavapipe_worker` over the other workers."""
    cluster = cluster_under_test()
    if "hostname" in metafunc.fixturenames:
        metafunc.parametrize("hostname", cluster.hosts)
    if "worker" in metafunc.fixturenames:
        metafunc.parametrize("worker", cluster.workers)
    if "standin" in metafunc.fixturenames:
        metafunc.parametrize("standin", cluster.jetson_standins)
    if "lavapipe_worker" in metafunc.fixturenames:
        others = [w for w in cluster.workers if w not in cluster.jetson_standins]
        metafunc.parametrize("lavapipe_worker", others)


@pytest.fixture
def timings() -> Iterator[dict[str, float]]:
    """Figures a test measured; appended to $GPULAB_TIMINGS_FILE for lab/molecule-test.sh."""
    figures: dict[str, float] = {}
    yield figures
    if figures:
        append_timings([figures])


@pytest.fixture(scope="session")
def eventually() -> Any:
    """Polls `probe` until it returns a truthy value (daemons settle asynchronously)."""

    def wait(probe: Any, timeout: float = 60.0, interval: float = 1.0) -> Any:
        return wait_for(probe, timeout, interval)

    return wait
