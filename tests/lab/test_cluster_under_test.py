"""The scenarios' tests reach each node as Ansible does: over SSH, with the inventory's options."""

from __future__ import annotations

import shlex
from typing import Any

import pytest

from lab.cluster_under_test import CONTROL_DIR, Cluster


def _cluster(**hostvars: Any) -> Cluster:
    base = {
        "ansible_connection": "ansible.builtin.ssh",
        "ansible_host": "gpulab-lab-worker1",
        "ansible_user": "root",
        "gpulab_lab_ssh_key": "/keys/id_ed25519",
        "ansible_ssh_private_key_file": "{{ gpulab_lab_ssh_key }}",
        "ansible_ssh_args": "-o ControlMaster=auto -o ControlPersist=300s",
        "ansible_ssh_common_args": "-o 'ProxyCommand=podman exec -i %h sshd' -o LogLevel=ERROR",
    }
    return Cluster("inventory/lab", {"workers": ["worker1"]}, {"worker1": base | hostvars})


def test_a_node_is_reached_over_ssh_with_the_inventorys_options() -> None:
    backend = _cluster().node("worker1").backend
    assert backend.NAME == "ssh"
    assert (backend.host.user, backend.host.name) == ("root", "gpulab-lab-worker1")
    assert backend.ssh_identity_file == "/keys/id_ed25519"  # the templated key, rendered
    options = shlex.split(backend.ssh_extra_args)
    assert "ProxyCommand=podman exec -i %h sshd" in options  # %h: the container, as for Ansible
    assert "ControlPersist=300s" in options
    assert f"ControlPath={CONTROL_DIR}/%C" in options  # one connection per host, kept open


def test_a_node_is_one_host_object_per_session() -> None:
    cluster = _cluster()
    assert cluster.node("worker1") is cluster.node("worker1")


def test_a_connection_other_than_ssh_is_a_usage_error() -> None:
    with pytest.raises(pytest.UsageError, match="worker1: ansible_connection is 'podman'"):
        _cluster(ansible_connection="podman").node("worker1")
