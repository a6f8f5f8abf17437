"""The cluster an inventory describes, as the molecule scenarios' tests see it.

The tests run against a molecule scenario (molecule sets MOLECULE_INVENTORY_FILE; its
directory holds the scenario's whole inventory: the platforms, the groups from lab/cluster.yml
and the group_vars) or against the lab (GPULAB_TEST_INVENTORY=inventory/lab). Hosts are
reached as Ansible reaches them, over its SSH connection with the inventory's options, through
testinfra's SSH backend: one multiplexed connection per host, about 10 ms a command where a
`podman exec` takes 160 ms.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any, TypeVar

import jinja2
import pytest
import testinfra
from testinfra.host import Host

T = TypeVar("T")
# Where the tests' multiplexed SSH connections live: beside Ansible's (its control_path_dir).
CONTROL_DIR = os.path.expanduser("~/.ansible/cp")
# The host variables that hold ssh options, in the order Ansible's ssh connection uses them.
SSH_OPTION_VARS = ("ansible_ssh_args", "ansible_ssh_common_args", "ansible_ssh_extra_args")


def wait_for(probe: Callable[[], T], timeout: float, interval: float = 1.0) -> T:
    """Polls probe until it returns a truthy value or timeout seconds pass; returns that value.

    Daemons settle asynchronously: the tests wait for what they check.
    """
    deadline = time.monotonic() + timeout
    while True:
        value = probe()
        if value or time.monotonic() > deadline:
            return value
        time.sleep(interval)


def inventory_under_test() -> str | None:
    """The inventory the tests run against, or None outside molecule without the variable."""
    if os.environ.get("GPULAB_TEST_INVENTORY"):
        return os.environ["GPULAB_TEST_INVENTORY"]
    molecule_file = os.environ.get("MOLECULE_INVENTORY_FILE")
    return str(Path(molecule_file).parent) if molecule_file else None


def _rendered(value: Any, hostvars: dict[str, Any]) -> Any:
    """A variable as Ansible would see it where it names another ("{{ lab_shared_path }}")."""
    if isinstance(value, str) and "{{" in value:
        return (
            jinja2.Environment(undefined=jinja2.StrictUndefined).from_string(value).render(hostvars)
        )
    return value


@dataclass(frozen=True)
class Cluster:
    """The hosts, groups and variables of the inventory under test."""

    inventory: str
    groups: dict[str, list[str]]
    hostvars: dict[str, dict[str, Any]]
    _node_names: dict[str, str] = field(default_factory=dict, compare=False, repr=False)
    _nodes: dict[str, Host] = field(default_factory=dict, compare=False, repr=False)

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
    def storage(self) -> str:
        return self.groups["storage"][0]

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
        hostvars = self.hostvars[self.controller]
        return _rendered(hostvars.get(name, default), hostvars)

    def node(self, host: str) -> Host:
        """The host over SSH as Ansible reaches it: the inventory's user, key and SSH options
        (the lab's ProxyCommand among them), one connection per host kept open."""
        if host not in self._nodes:
            hostvars = self.hostvars[host]
            connection = hostvars.get("ansible_connection", "ssh")
            if connection not in ("ssh", "ansible.builtin.ssh"):
                raise pytest.UsageError(
                    f"{host}: ansible_connection is {connection!r}; the tests reach hosts over ssh"
                )
            options = " ".join(
                str(_rendered(hostvars[name], hostvars))
                for name in SSH_OPTION_VARS
                if hostvars.get(name)
            )
            Path(CONTROL_DIR).mkdir(parents=True, exist_ok=True)
            user = hostvars.get("ansible_user", "root")
            self._nodes[host] = testinfra.get_host(
                f"ssh://{user}@{self.container(host)}",
                ssh_identity_file=_rendered(hostvars.get("ansible_ssh_private_key_file"), hostvars),
                ssh_extra_args=f"{options} -o ControlPath={CONTROL_DIR}/%C",
            )
        return self._nodes[host]

    def node_name(self, host: str) -> str:
        """The host's Slurm NodeName: its hostname, which may differ from its inventory name."""
        if host not in self._node_names:
            self._node_names[host] = self.node(host).check_output("hostname").strip()
        return self._node_names[host]


def load_cluster_under_test() -> Cluster:
    """The cluster of inventory_under_test(); a pytest usage error when there is none."""
    inventory = inventory_under_test()
    if not inventory:
        raise pytest.UsageError(
            "set GPULAB_TEST_INVENTORY (a lab inventory, e.g. inventory/lab) or use molecule"
        )
    return Cluster.load(inventory)


def append_timings(records: Iterable[dict[str, object]]) -> None:
    """Appends each record as one JSON line to $GPULAB_TIMINGS_FILE, which lab/molecule-test.sh
    prints at the end; nothing when the variable is unset."""
    path = os.environ.get("GPULAB_TIMINGS_FILE")
    if path:
        with open(path, "a", encoding="utf-8") as out:
            for record in records:
                out.write(json.dumps(record) + "\n")
