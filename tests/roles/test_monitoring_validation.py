"""The monitoring role: off by default it does nothing, and bad settings are refused in one
line naming the variable and the host before anything changes. Real ansible-playbook runs in
check mode on local hosts named like the lab's, with this machine's facts (network included:
the listen address is checked against the host's own addresses)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests import ansible_fork
from tests.roles.test_role_validation import _env  # the same isolated Ansible settings

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
HOSTS = {"controller": ["controller1"], "workers": ["worker1"]}
VALIDATION = {
    f"monitoring : {task['name']}"
    for task in yaml.safe_load((ROOT / "roles/monitoring/tasks/validate.yml").read_text())
} | {"monitoring : Validating arguments against arg spec 'main' - Prometheus on the controller, "
     "node_exporter on every node, gpulab's Slurm and GPU metrics."}  # fmt: skip


@pytest.fixture(scope="module")
def work(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An inventory of local hosts and their facts (min and network) in a fact cache."""
    folder = tmp_path_factory.mktemp("monitoring")
    local = {"ansible_connection": "local", "ansible_python_interpreter": sys.executable}
    inventory = {
        "all": {
            "hosts": {h: local for hosts in HOSTS.values() for h in hosts},
            "children": {g: {"hosts": {h: {} for h in hosts}} for g, hosts in HOSTS.items()},
        }
    }
    (folder / "hosts.json").write_text(json.dumps(inventory))
    done = ansible_fork.run(
        [str(BIN / "ansible"), "all", "-i", str(folder / "hosts.json"), "-m",
         "ansible.builtin.setup", "-a", "gather_subset=min,network"],
        cwd=ROOT, env=_env(folder / "cache"),
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    return folder


def _run(
    work: Path, variables: dict[str, Any]
) -> tuple[int, list[tuple[str, str, dict[str, Any]]]]:
    play = [{"name": "monitoring", "hosts": "all", "gather_facts": False,
             "roles": [{"role": "monitoring"}]}]  # fmt: skip
    (work / "play.yml").write_text(yaml.safe_dump(play))
    (work / "vars.json").write_text(json.dumps(variables))
    done = ansible_fork.run(
        [str(BIN / "ansible-playbook"), "-i", str(work / "hosts.json"), str(work / "play.yml"),
         "--check", "-e", f"@{work / 'vars.json'}"],
        cwd=ROOT, env=_env(work / "cache"),
    )  # fmt: skip
    report = json.loads(done.stdout[done.stdout.find("{") :])
    ran = [
        (task["task"]["name"], host, result)
        for play in report["plays"]
        for task in play["tasks"]
        for host, result in task["hosts"].items()
    ]
    return done.returncode, ran


def test_off_by_default_changes_nothing(work: Path) -> None:
    rc, ran = _run(work, {})
    assert rc == 0
    acted = [name for name, _, r in ran if not r.get("skipped") and "arg spec" not in name]
    assert acted == []


@pytest.mark.parametrize(
    ("variables", "host", "names"),
    [
        ({"monitoring_listen_address": "0.0.0.0"}, "worker1",
         ("worker1", "monitoring_listen_address is '0.0.0.0'", "never an address")),
        ({"monitoring_listen_address": "192.0.2.77"}, "controller1",
         ("controller1", "monitoring_listen_address is '192.0.2.77'", "cluster network")),
        ({"monitoring_retention_time": "two weeks"}, "worker1",
         ("worker1", "monitoring_retention_time 'two weeks'", "15d")),
        ({"monitoring_prometheus_port": 9100}, "controller1",
         ("controller1", "monitoring_node_exporter_port (9100)", "two different ports")),
        ({"monitoring_slurm_metrics_host": "login9"}, "worker1",
         ("worker1", "monitoring_slurm_metrics_host", "'login9'")),
        ({"monitoring_metrics_interval": "often"}, "worker1",
         ("monitoring_metrics_interval", "int")),
        ({"monitoring_alertmanager_enabled": True}, "controller1",
         ("controller1", "set at least one receiver", "monitoring_alertmanager_webhooks",
          "monitoring_alertmanager_email_to")),
        ({"monitoring_alertmanager_enabled": True,
          "monitoring_alertmanager_email_to": ["ops@example.org"]}, "controller1",
         ("controller1", "monitoring_alertmanager_smtp_smarthost as host:port")),
        ({"monitoring_alert_share_used_ratio": 1.5}, "worker1",
         ("worker1", "monitoring_alert_share_used_ratio between 0 and 1 (is 1.5)")),
        ({"monitoring_alert_for": "soon"}, "worker1", ("worker1", "monitoring_alert_for 'soon'")),
    ],
    ids=["wildcard", "not-this-host", "retention", "same-port", "unknown-host", "not-a-number",
         "alertmanager-without-receiver", "email-without-relay", "share-ratio", "alert-for"],
)  # fmt: skip
def test_bad_setting_is_refused_before_any_change(
    work: Path, variables: dict[str, Any], host: str, names: tuple[str, ...]
) -> None:
    rc, ran = _run(work, {"monitoring_enabled": True, **variables})
    assert rc != 0
    assert [name for name, _, _ in ran if name not in VALIDATION] == []
    assert not [name for name, _, r in ran if r.get("changed")]
    failed = {h: str(r.get("msg", "")) for _, h, r in ran if r.get("failed")}
    assert host in failed, failed
    for name in names:
        assert name.lower() in failed[host].lower(), failed[host]
