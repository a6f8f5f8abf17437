"""An air-gapped cluster converged from a flat local repository that only the variables of
gpulab.cluster.apt_sources name: the network has no way out, apt on every node reads that
repository alone (the image's own sources set aside, not deleted), every package the roles
installed came from it, and Slurm runs a job across the nodes."""

from __future__ import annotations

import json
import re
import subprocess

from lab.cluster import place
from lab.cluster_under_test import Cluster

SET_ASIDE = ".gpulab.disabled"
# The packages the roles of converge.yml install (host-prepare.sh reads the same vars/).
EVERY_NODE = ("munge", "slurm-client")
BY_GROUP = {"controller": ("slurmctld",), "workers": ("slurmd", "libpmix-dev")}


def _repository(cluster: Cluster) -> str:
    return f"file:{cluster.var('airgap_lab_repo')}"


def test_the_network_has_no_way_out(cluster: Cluster) -> None:
    network = place("airgap").network
    inspected = json.loads(
        subprocess.run(["podman", "network", "inspect", network], check=True,
                       capture_output=True, text=True).stdout
    )  # fmt: skip
    assert inspected[0]["internal"] is True
    # The archive the image's own sources name, from a node: no route, or no name.
    node = cluster.node(cluster.controller)
    aside = node.run(f"cat /etc/apt/sources.list.d/debian.sources{SET_ASIDE}").stdout
    uri = re.search(r"^URIs: (\S+)", aside, re.MULTILINE)
    assert uri, aside
    host = uri[1].split("/")[2]
    probe = node.run(
        f"python3 -c 'import socket; socket.create_connection((\"{host}\", 80), timeout=5)'"
    )
    assert probe.rc != 0 and ("unreachable" in probe.stderr or "resolution" in probe.stderr), (
        probe.stderr
    )


def test_apt_reads_the_repository_alone(cluster: Cluster) -> None:
    for host in cluster.hosts:
        node = cluster.node(host)
        listed = node.check_output("apt-get indextargets --format '$(REPO_URI)' | sort -u")
        assert listed.split() == [f"{_repository(cluster)}/"], (host, listed)
        files = node.check_output("ls /etc/apt/sources.list.d").split()
        assert files == ["airgap-local.gpulab.sources", f"debian.sources{SET_ASIDE}"], files


def test_every_package_the_roles_installed_came_from_it(cluster: Cluster) -> None:
    for host in cluster.hosts:
        groups = [g for g, members in cluster.groups.items() if host in members]
        wanted = [*EVERY_NODE, *(p for g in groups for p in BY_GROUP.get(g, ()))]
        node = cluster.node(host)
        for package in wanted:
            policy = node.check_output(f"apt-cache policy {package}")
            installed = re.search(r"Installed: (\S+)", policy)
            assert installed and installed[1] != "(none)", (host, policy)
            # The installed version's entry: "*** VERSION PRIORITY", then a line per source.
            entry = re.search(rf"\*\*\* {re.escape(installed[1])} \d+\n((?: {{8}}.*\n?)*)", policy)
            assert entry and f" {_repository(cluster)} " in entry[1], (host, package, policy)


def test_slurm_runs_a_job_on_the_worker(cluster: Cluster) -> None:
    controller = cluster.node(cluster.controller)
    worker = cluster.workers[0]
    name = cluster.node_name(worker)
    ran = controller.run(f"timeout 120 srun --nodelist={name} --time=1 hostname")
    assert ran.rc == 0 and ran.stdout.strip() == name, ran.stdout + ran.stderr
