"""MUNGE: one key everywhere, credentials made on one node are accepted on another."""

from __future__ import annotations

from conftest import Cluster
from testinfra.host import Host

KEY = "/etc/munge/munge.key"


def test_munge_running_and_enabled(cluster: Cluster, hostname: str) -> None:
    service = cluster.node(hostname).service("munge")
    assert service.is_running
    assert service.is_enabled


def test_key_is_private_to_munge(cluster: Cluster, hostname: str) -> None:
    key = cluster.node(hostname).file(KEY)
    assert key.is_file
    assert key.mode == 0o400
    assert key.user == "munge"
    assert key.group == "munge"


def test_key_is_the_same_on_every_node(cluster: Cluster) -> None:
    sums = {name: cluster.node(name).file(KEY).sha256sum for name in cluster.hosts}
    assert len(set(sums.values())) == 1, f"munge keys differ: {sorted(sums.items())}"


def _decodes(encoder: Host, decoder: Host) -> bool:
    """unmunge on `decoder` accepts a credential made by munge on `encoder`."""
    credential = encoder.check_output("munge -n")
    result = decoder.run("printf '%%s\\n' %s | unmunge", credential)
    return result.rc == 0 and "Success" in result.stdout


def test_credentials_cross_nodes(cluster: Cluster, controller: Host, worker: str) -> None:
    node = cluster.node(worker)
    assert _decodes(node, controller), f"controller rejects a credential from {worker}"
    assert _decodes(controller, node), f"{worker} rejects a credential from the controller"
