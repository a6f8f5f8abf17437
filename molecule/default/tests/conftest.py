"""Fixtures for the cluster tests: the inventory, and a testinfra host per node.

The tests run against the molecule scenario (molecule sets MOLECULE_INVENTORY_FILE) or
against the lab (GPULAB_TEST_INVENTORY=inventory/lab). Hosts are reached with testinfra's
podman backend, `podman://CONTAINER`, far faster than going through Ansible.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import pytest
import testinfra
from testinfra.host import Host


@dataclass(frozen=True)
class Cluster:
    """The hosts, groups and variables of the inventory under test."""

    inventory: str
    groups: dict[str, list[str]]
    hostvars: dict[str, dict[str, Any]]

    @classmethod
    def load(cls, inventory: str) -> Cluster:
        out = subprocess.run(
            ["ansible-inventory", "-i", inventory, "--list"],
            check=True,
            capture_output=True,
            text=True,
        ).stdout
        data = json.loads(out)
        groups = {
            name: sorted(body.get("hosts", []))
            for name, body in data.items()
            if name != "_meta" and isinstance(body, dict)
        }
        return cls(inventory, groups, data["_meta"]["hostvars"])

    @cached_property
    def hosts(self) -> list[str]:
        return sorted(self.hostvars)

    @property
    def controller(self) -> str:
        return self.groups["controller"][0]

    @property
    def workers(self) -> list[str]:
        return self.groups["workers"]

    @property
    def jetson_standins(self) -> list[str]:
        """Workers that stand in for a Jetson (lab/standin.yml); none in some scenarios."""
        return self.groups.get("jetson_standin", [])

    def container(self, host: str) -> str:
        return str(self.hostvars[host].get("ansible_host", host))

    def var(self, name: str, default: Any = None) -> Any:
        """A variable as every host sees it (group_vars/all)."""
        return self.hostvars[self.controller].get(name, default)

    def node(self, host: str) -> Host:
        return testinfra.get_host(f"podman://{self.container(host)}")

    def node_name(self, host: str) -> str:
        """The host's Slurm NodeName: its hostname, which may differ from its inventory name."""
        if host not in self._node_names:
            self._node_names[host] = self.node(host).check_output("hostname").strip()
        return self._node_names[host]

    @cached_property
    def _node_names(self) -> dict[str, str]:
        return {}


def _inventory() -> str:
    inventory = os.environ.get("GPULAB_TEST_INVENTORY") or os.environ.get("MOLECULE_INVENTORY_FILE")
    if not inventory:
        raise pytest.UsageError("set GPULAB_TEST_INVENTORY (e.g. inventory/lab) or use molecule")
    return inventory


_CLUSTER: Cluster | None = None


def cluster_under_test() -> Cluster:
    global _CLUSTER  # noqa: PLW0603 - loaded once per session, also at collection time
    if _CLUSTER is None:
        _CLUSTER = Cluster.load(_inventory())
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
    path = os.environ.get("GPULAB_TIMINGS_FILE")
    if path and figures:
        with open(path, "a", encoding="utf-8") as out:
            out.write(json.dumps(figures) + "\n")


@pytest.fixture(scope="session")
def eventually() -> Any:
    """Polls `probe` until it returns a truthy value (daemons settle asynchronously)."""

    def wait(probe: Any, timeout: float = 60.0, interval: float = 1.0) -> Any:
        deadline = time.monotonic() + timeout
        while True:
            value = probe()
            if value or time.monotonic() > deadline:
                return value
            time.sleep(interval)

    return wait
