"""The monitoring scenario's fixtures: the cluster under test (molecule's inventory, or a lab of
the same shape with GPULAB_TEST_INVENTORY)."""

from __future__ import annotations

import pytest

from lab.cluster_under_test import Cluster, load_cluster_under_test


@pytest.fixture(scope="session")
def cluster() -> Cluster:
    return load_cluster_under_test()
