"""Monitoring (roles/monitoring), when the scenario turns it on (monitoring_enabled: true):
node_exporter on every node and Prometheus on the controller, each bound to the node's
cluster address only, gpulab's metrics timer on the workers, and Prometheus scraping every
node. Skipped when monitoring is off.
"""

from __future__ import annotations

import re
import shlex
from typing import Any

import pytest
from conftest import Cluster, cluster_under_test
from testinfra.host import Host

from lab.prometheus_probe import PROMETHEUS_PORT, cluster_address, listeners, prometheus_api

pytestmark = pytest.mark.skipif(
    not cluster_under_test().var("monitoring_enabled", False),
    reason="monitoring_enabled is not true in this inventory",
)
NODE_EXPORTER_PORT = 9100
WILDCARDS = {"0.0.0.0", "*", "[::]", "::"}


def test_node_exporter_runs_on_the_cluster_address_only(cluster: Cluster, hostname: str) -> None:
    node = cluster.node(hostname)
    service = node.service("prometheus-node-exporter")
    assert service.is_running and service.is_enabled
    bound = listeners(node, NODE_EXPORTER_PORT)
    assert bound == {cluster_address(node)}, f"{hostname}: node_exporter listens on {bound}"
    assert not bound & WILDCARDS


def test_prometheus_runs_on_the_cluster_address_only(cluster: Cluster, controller: Host) -> None:
    assert controller.service("prometheus").is_running
    bound = listeners(controller, PROMETHEUS_PORT)
    assert bound == {cluster_address(controller)}, f"Prometheus listens on {bound}"
    # Not reachable on another interface of the controller (loopback here).
    connect = f"import socket; socket.create_connection(('127.0.0.1', {PROMETHEUS_PORT}), 3)"
    refused = controller.run(f"python3 -c {shlex.quote(connect)}")
    assert refused.rc != 0


def test_the_workers_write_gpu_metrics(cluster: Cluster, worker: str) -> None:
    node = cluster.node(worker)
    assert node.service("gpulab-metrics.timer").is_running
    metrics = node.file("/var/lib/prometheus/node-exporter/gpulab.prom")
    assert metrics.exists and metrics.mode == 0o644
    assert re.search(r'^gpulab_gpu_health_ok\{device="0"\} 1$', metrics.content_string, re.M)


def test_the_metrics_run_sandboxed_and_still_measure_the_gpu(cluster: Cluster, worker: str) -> None:
    # gpulab-metrics.service ran as root with every capability: now without any, the system
    # read-only but its textfile, no home, kernel or clock; a run started now still measures.
    node = cluster.node(worker)
    shown = node.check_output(
        "systemctl show gpulab-metrics.service --property=CapabilityBoundingSet "
        "--property=NoNewPrivileges --property=ProtectSystem --property=ProtectHome"
    )
    settings = dict(line.split("=", 1) for line in shown.splitlines())
    assert settings == {"CapabilityBoundingSet": "", "NoNewPrivileges": "yes",
                        "ProtectSystem": "strict", "ProtectHome": "yes"}, settings  # fmt: skip
    node.check_output("rm -f /var/lib/prometheus/node-exporter/gpulab.prom")
    node.check_output("systemctl start gpulab-metrics.service")
    result = node.check_output("systemctl show gpulab-metrics.service --property=Result")
    assert result == "Result=success", result
    metrics = node.file("/var/lib/prometheus/node-exporter/gpulab.prom")
    assert re.search(r'^gpulab_gpu_health_ok\{device="0"\} 1$', metrics.content_string, re.M)


def test_prometheus_scrapes_every_node(cluster: Cluster, controller: Host, eventually: Any) -> None:
    """Prometheus' active targets of job node are the inventory's hosts, each scraped healthy.
    The targets come from the role's file_sd file, which Prometheus applies within seconds of
    a change (inotify, then its 5 s discovery update; at the latest its 5m refresh_interval):
    the spare worker that joined and left in grow.yml is gone by now. The targets API is the
    exact list; the query `up` would also keep, for Prometheus' 5-minute lookback, a target
    dropped by a restart (no staleness marker then, unlike a file_sd removal)."""

    def node_targets() -> dict[str, str]:
        answer = prometheus_api(controller, "/api/v1/targets", state="active")
        return {
            t["labels"]["instance"]: t["health"]
            for t in answer["activeTargets"]
            if t["labels"]["job"] == "node"
        }

    every_node_up = dict.fromkeys(cluster.hosts, "up")
    assert eventually(lambda: node_targets() == every_node_up, timeout=90, interval=5), (
        f"Prometheus' node targets: {node_targets()}"
    )
