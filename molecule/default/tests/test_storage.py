"""Shared storage: exported to the cluster only, root squashed, the same bytes over NFS.

The lab's kernel has no NFS client: its nodes see the share as the volume nfs-ganesha
exports, attached at the mount point. These tests prove over the NFS protocol (libnfs,
user space) that the export and each node's mount point are the same storage.
"""

from __future__ import annotations

import secrets
import subprocess

from conftest import GANESHA_EXPORT, Cluster
from testinfra.host import Host


def storage(cluster: Cluster) -> str:
    return cluster.groups["storage"][0]


def export_url(cluster: Cluster) -> str:
    return f"nfs://{storage(cluster)}{cluster.var('nfs_server_export_path')}"


def address(host: Host) -> str:
    return host.check_output("hostname -I").split()[0]


def test_export_lists_only_the_cluster(cluster: Cluster) -> None:
    conf = cluster.node(storage(cluster)).file(GANESHA_EXPORT).content_string
    client_block = conf.split("CLIENT", 1)[1]
    listed = client_block.split("Clients =", 1)[1].split(";", 1)[0]
    clients = {c.strip() for c in listed.split(",")}
    nodes = cluster.groups["controller"] + cluster.workers
    assert clients == {address(cluster.node(h)) for h in nodes}
    assert "Squash = root_squash;" in conf
    assert "PrivilegedPort = true;" in conf


def test_a_host_outside_the_cluster_is_refused(cluster: Cluster) -> None:
    # This machine reaches the lab's network but is not among the export's clients.
    ip = address(cluster.node(storage(cluster)))
    export = cluster.var("nfs_server_export_path")
    result = subprocess.run(
        ["nfs-ls", f"nfs://{ip}{export}"],
        check=False,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode != 0
    assert "MNT3ERR_ACCES" in result.stderr + result.stdout


def test_root_on_a_client_is_squashed(cluster: Cluster, worker: str) -> None:
    node, server = cluster.node(worker), cluster.node(storage(cluster))
    name = f"jobs/root-squash-{worker}-{secrets.token_hex(4)}"
    node.check_output(
        "echo squash > /tmp/root-squash && nfs-cp /tmp/root-squash %s/%s",
        export_url(cluster),
        name,
    )
    path = f"{cluster.var('nfs_server_export_path')}/{name}"
    try:
        assert server.file(path).uid != 0
    finally:
        server.run("rm -f %s", path)


def test_a_users_own_nfs_client_is_refused(cluster: Cluster, worker: str) -> None:
    # AUTH_SYS trusts the uid a client sends: the export takes requests from privileged ports
    # only (PrivilegedPort, exports(5)'s secure), so a user's userspace client (libnfs, from a
    # port above 1024) cannot claim another uid. Before, `nobody` claimed uid 2000 this way and
    # read and wrote a 0700 job folder. Root on a node (a privileged port) still lists it.
    node = cluster.node(worker)
    uid = cluster.var("identity_users")[0]["uid"]
    claimed = f"{export_url(cluster)}/jobs/?uid={uid}&gid={uid}"
    assert node.run("nfs-ls %s", claimed).rc == 0  # root: a privileged port
    listing = node.run("runuser -u nobody -- nfs-ls %s", claimed)
    assert listing.rc != 0, listing.stdout
    node.check_output("echo planted > /tmp/planted && chmod 0644 /tmp/planted")
    name = f"planted-{worker}-{secrets.token_hex(4)}"
    target = f"{export_url(cluster)}/jobs/{name}?uid={uid}&gid={uid}"
    planting = node.run("runuser -u nobody -- nfs-cp /tmp/planted %s", target)
    path = f"{cluster.var('nfs_server_export_path')}/jobs/{name}"
    try:
        assert planting.rc != 0, planting.stdout
        assert not cluster.node(storage(cluster)).file(path).exists
    finally:
        cluster.node(storage(cluster)).run("rm -f %s", path)


def test_mount_point_serves_the_same_bytes_over_nfs(cluster: Cluster) -> None:
    mount = cluster.var("nfs_client_mount_point")
    for name in cluster.groups["controller"] + cluster.workers:
        node = cluster.node(name)
        token = secrets.token_hex(16)
        relative = f"jobs/probe-{name}-{token[:8]}"
        node.check_output("printf %s > %s/%s", token, mount, relative)
        try:
            over_nfs = node.check_output("nfs-cat %s/%s", export_url(cluster), relative)
            assert over_nfs == token, f"{name}: {mount} and {export_url(cluster)} differ"
        finally:
            node.run("rm -f %s/%s", mount, relative)


def test_shared_directories_are_safe(cluster: Cluster) -> None:
    server = cluster.node(storage(cluster))
    root = cluster.var("nfs_server_export_path")
    assert server.file(f"{root}/jobs").mode == 0o1777
    assert server.file(f"{root}/wheels").mode == 0o755
