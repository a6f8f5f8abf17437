"""The daemon and cluster accounts have the same numeric IDs on every node."""

from __future__ import annotations

from conftest import Cluster


def _accounts(cluster: Cluster) -> list[str]:
    return ["munge", "slurm", *(u["name"] for u in cluster.var("identity_users", []))]


def test_uids_and_gids_agree_on_every_node(cluster: Cluster) -> None:
    for account in _accounts(cluster):
        ids = {}
        for name in cluster.hosts:
            user = cluster.node(name).user(account)
            assert user.exists, f"{account} missing on {name}"
            ids[name] = (user.uid, user.gid)
        assert len(set(ids.values())) == 1, f"{account} IDs differ: {ids}"
