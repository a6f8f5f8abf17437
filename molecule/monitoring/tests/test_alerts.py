"""Alerts end to end (molecule/monitoring): gpulab's rules loaded in Prometheus, Alertmanager on
the cluster address only, every query of the shipped Grafana dashboard answered with series by
this Prometheus, and a worker's GPU health check made to fail reaching a webhook receiver as a
firing alert, then as resolved once the check passes again. The tests run in this order: the
dashboard's queries before the GPU is taken away."""

from __future__ import annotations

import json
import re
import shlex
import time
from pathlib import Path
from typing import Any

from testinfra.host import Host

from lab.cluster_under_test import Cluster, wait_for
from lab.prometheus_probe import (
    cluster_address,
    listeners,
    prometheus_api,
    prometheus_query,
)

REPO = Path(__file__).resolve().parents[3]
DASHBOARD = REPO / "roles/monitoring/files/gpulab-dashboard.json"
ALERTMANAGER_PORT = 9093
GOSSIP_PORT = 9094
# The webhook receiver of group_vars/monitoring_lab.yml: a tiny HTTP server on the controller's
# loopback that writes each POST's JSON as one line of LOG.
RECEIVER_PORT = 9099
RECEIVER_UNIT = "gpulab-test-webhook"
RECEIVER_LOG = "/var/tmp/gpulab-webhook.jsonl"
RECEIVER = f"""
import http.server
class Receiver(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers["Content-Length"]))
        with open({RECEIVER_LOG!r}, "ab") as log:
            log.write(body.replace(b"\\n", b" ") + b"\\n")
        self.send_response(200)
        self.end_headers()
http.server.HTTPServer(("127.0.0.1", {RECEIVER_PORT}), Receiver).serve_forever()
"""
# The worker's Vulkan driver (lavapipe's ICD), set aside to make the health check fail, as the
# faults scenario's drill does.
ICD_GLOB = "/usr/share/vulkan/icd.d/lvp_icd.*.json"
ICD_HIDDEN = "/usr/share/vulkan/icd.d.gpulab-alert-test"
TEXTFILE = "/var/lib/prometheus/node-exporter/gpulab.prom"
ALERT = "GpulabGpuHealthCheckFailing"
# Dashboard queries whose series the lab cannot have: lavapipe has no VK_EXT_memory_budget, so
# no gpulab_gpu_memory_used_bytes (docs/monitoring.md); asserted absent, so that a driver that
# gains it makes this list shrink.
ABSENT_ON_LAVAPIPE = {"gpulab_gpu_memory_used_bytes"}


def test_the_rules_are_loaded_and_healthy(cluster: Cluster) -> None:
    controller = cluster.node(cluster.controller)
    groups = prometheus_api(controller, "/api/v1/rules")["groups"]
    names = {g["name"] for g in groups}
    assert {"gpulab-gpu", "gpulab-slurm", "gpulab-nodes"} <= names, names
    unhealthy = [
        (r["name"], r.get("lastError")) for g in groups for r in g["rules"] if r["health"] == "err"
    ]
    assert not unhealthy, unhealthy
    # Prometheus sends its alerts to the Alertmanager beside it.
    active = prometheus_api(controller, "/api/v1/alertmanagers")["activeAlertmanagers"]
    assert [a["url"] for a in active] == [
        f"http://{cluster_address(controller)}:{ALERTMANAGER_PORT}/api/v2/alerts"
    ], active


def test_alertmanager_listens_on_the_cluster_address_only(cluster: Cluster) -> None:
    controller = cluster.node(cluster.controller)
    assert controller.service("prometheus-alertmanager").is_running
    assert controller.service("prometheus-alertmanager").is_enabled
    assert listeners(controller, ALERTMANAGER_PORT) == {cluster_address(controller)}
    assert listeners(controller, GOSSIP_PORT) == set(), "Alertmanager's cluster gossip listens"


def test_the_service_rule_sees_the_units(cluster: Cluster) -> None:
    """node_exporter's systemd collector reports munge on every node, slurmctld on the
    controller and slurmd on the worker, each active: what ClusterServiceNotRunning reads."""
    controller = cluster.node(cluster.controller)
    result = prometheus_query(controller, 'node_systemd_unit_state{state="active"}')
    seen = {(r["metric"]["instance"], r["metric"]["name"]): r["value"][1] for r in result}
    wanted = {(h, "munge.service") for h in cluster.hosts}
    wanted |= {(cluster.controller, "slurmctld.service")}
    wanted |= {(w, "slurmd.service") for w in cluster.workers}
    assert {k: seen.get(k) for k in wanted} == dict.fromkeys(wanted, "1"), seen


def dashboard_queries() -> list[tuple[str, str]]:
    """Every panel's queries, (panel title, PromQL), with the dashboard's variables filled in as
    Grafana would: the share variable's default and a rate interval."""
    dashboard = json.loads(DASHBOARD.read_text(encoding="utf-8"))
    variables = {v["name"]: v.get("query", "") for v in dashboard["templating"]["list"]}
    queries = []
    for panel in dashboard["panels"]:
        for target in panel.get("targets", []):
            expr = target["expr"].replace("$__rate_interval", "1m")
            for name, value in variables.items():
                expr = expr.replace(f"${name}", value)
            queries.append((panel["title"], expr))
    return queries


def test_every_dashboard_query_returns_series(cluster: Cluster) -> None:
    controller = cluster.node(cluster.controller)
    queries = dashboard_queries()
    assert len(queries) >= 10, queries

    def answers() -> dict[str, int]:
        return {expr: len(prometheus_query(controller, expr)) for _, expr in queries}

    def settled() -> dict[str, int] | None:
        found = answers()
        expected_empty = {e for e in found if any(m in e for m in ABSENT_ON_LAVAPIPE)}
        ok = all((n == 0) == (e in expected_empty) for e, n in found.items())
        return found if ok else None

    found = wait_for(settled, timeout=120, interval=5) or answers()
    print(f"\n  dashboard queries and their series: {json.dumps(found, indent=1)}")
    empty = [
        (t, e) for t, e in queries if found[e] == 0 and not any(m in e for m in ABSENT_ON_LAVAPIPE)
    ]
    assert not empty, f"panels whose query returned no series: {empty}"
    present = [e for e in found if any(m in e for m in ABSENT_ON_LAVAPIPE) and found[e]]
    assert not present, f"series the lab's lavapipe should not have: {present}"


def notifications(controller: Host) -> list[dict[str, Any]]:
    text = controller.run(f"cat {RECEIVER_LOG}").stdout
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def alert_states(controller: Host, instance: str) -> list[str]:
    """The statuses the webhook received for the GPU health alert of instance, in order."""
    return [
        alert["status"]
        for message in notifications(controller)
        for alert in message["alerts"]
        if alert["labels"].get("alertname") == ALERT and alert["labels"].get("instance") == instance
    ]


def run_metrics(worker: Host) -> str:
    worker.check_output("systemctl start gpulab-metrics.service")
    return worker.file(TEXTFILE).content_string


def test_a_failing_gpu_health_check_reaches_the_webhook_and_resolves(cluster: Cluster) -> None:
    controller = cluster.node(cluster.controller)
    host = cluster.workers[0]
    worker = cluster.node(host)
    controller.run(f"systemctl stop {RECEIVER_UNIT}; rm -f {RECEIVER_LOG}")
    controller.check_output(
        f"systemd-run --unit={RECEIVER_UNIT} --collect python3 -c {shlex.quote(RECEIVER)}"
    )
    assert wait_for(lambda: listeners(controller, RECEIVER_PORT), timeout=20), "no webhook receiver"
    start = time.monotonic()
    try:
        worker.check_output(f"mkdir -p {ICD_HIDDEN} && mv {ICD_GLOB} {ICD_HIDDEN}/")
        written = run_metrics(worker)
        assert re.search(r'^gpulab_gpu_health_ok\{device="0"\} 0$', written, re.M), written
        fired = wait_for(
            lambda: "firing" in alert_states(controller, host), timeout=120, interval=2
        )
        fired_s = time.monotonic() - start
        assert fired, f"no firing {ALERT} for {host} at the webhook: {notifications(controller)}"
    finally:
        worker.run(f"mv {ICD_HIDDEN}/*.json /usr/share/vulkan/icd.d/ && rmdir {ICD_HIDDEN}")
    restored = time.monotonic()
    written = run_metrics(worker)
    assert re.search(r'^gpulab_gpu_health_ok\{device="0"\} 1$', written, re.M), written
    resolved = wait_for(
        lambda: alert_states(controller, host)[-1:] == ["resolved"], timeout=120, interval=2
    )
    resolved_s = time.monotonic() - restored
    controller.run(f"systemctl stop {RECEIVER_UNIT}")
    print(
        f"\n  {ALERT} for {host}: at the webhook {fired_s:.1f} s after the ICD went, "
        f"resolved {resolved_s:.1f} s after it returned; statuses {alert_states(controller, host)}"
    )
    assert resolved, f"{ALERT} for {host} not resolved at the webhook: {notifications(controller)}"
