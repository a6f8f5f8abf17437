"""Prometheus' files as the monitoring role renders them, and what a change of each costs.

The node targets live in their own file (file_sd_configs), which Prometheus watches and
re-reads by itself: a host added to or removed from the inventory changes that file only,
never prometheus.yml, so Prometheus is neither restarted nor reloaded. One ansible-playbook run
per inventory on local hosts (no podman), with the role's defaults, vars and templates: the four
lab hosts, then a fifth worker joining, then leaving again. When promtool is on PATH (the
`prometheus` package), it checks the rendered configuration with its target file.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.roles.playbook import ROOT, run_playbook

ROLE = ROOT / "roles/monitoring"
HOSTS = {"controller": ["controller1"], "storage": ["storage1"], "workers": ["worker1", "worker2"]}
JOINED = HOSTS | {"workers": ["worker1", "worker2", "worker3"]}
TARGETS_TASK = "Write the node targets"
CONFIG_TASK = "Write prometheus.yml"


def _playbook(out: Path) -> list[dict[str, Any]]:
    """The role's endpoint fact (tasks/validate.yml) and its two Prometheus templates, written
    into `out` on the server. (The role's defaults are in the inventory, under its host vars.)"""
    templates = ROLE / "templates"
    return [
        {
            "name": "Render Prometheus' files",
            "hosts": "all",
            "gather_facts": False,
            "vars_files": [str(ROLE / "vars/main.yml")],
            "vars": {"_monitoring_prometheus_file_sd_dir": str(out),
                     "_monitoring_prometheus_rules_dir": str(out)},
            "tasks": [
                {"name": "Note this node's exporter endpoint", "ansible.builtin.set_fact": {
                    "_monitoring_endpoint":
                        "{{ _monitoring_host }}:{{ monitoring_node_exporter_port }}"}},
                {"name": TARGETS_TASK, "when": "_monitoring_is_server",
                 "ansible.builtin.template": {"src": str(templates / "prometheus-nodes.yml.j2"),
                                              "dest": "{{ _monitoring_prometheus_targets }}",
                                              "mode": "0644"}},
                {"name": CONFIG_TASK, "when": "_monitoring_is_server",
                 "ansible.builtin.template": {"src": str(templates / "prometheus.yml.j2"),
                                              "dest": f"{out}/prometheus.yml", "mode": "0644"}},
            ],
        }
    ]  # fmt: skip


def _run(work: Path, groups: dict[str, list[str]]) -> dict[str, bool]:
    """One run with an inventory of `groups`: whether each template task changed its file."""
    hosts = sorted({host for members in groups.values() for host in members})
    local = {"ansible_connection": "local", "ansible_python_interpreter": sys.executable}
    inventory = {
        "all": {
            "hosts": {
                host: local | {"monitoring_listen_address": f"10.0.0.{number}"}
                for number, host in enumerate(hosts, start=10)
            },
            "vars": yaml.safe_load((ROLE / "defaults/main.yml").read_text()),
            "children": {group: {"hosts": {host: {} for host in members}}
                         for group, members in groups.items()},
        }
    }  # fmt: skip
    (work / "hosts.json").write_text(json.dumps(inventory))
    report = run_playbook(work)
    return {
        task["task"]["name"]: bool(task["hosts"]["controller1"].get("changed"))
        for task in report["plays"][0]["tasks"]
        if task["task"]["name"] in (TARGETS_TASK, CONFIG_TASK)
    }


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The lab's hosts (twice), a fifth worker joining, then leaving: each run's changes and
    the files it left."""
    work = tmp_path_factory.mktemp("prometheus")
    out = work / "out"
    out.mkdir()
    (work / "play.yml").write_text(yaml.safe_dump(_playbook(out), sort_keys=False))
    result: dict[str, Any] = {"out": out}
    for name, groups in (("first", HOSTS), ("again", HOSTS), ("joined", JOINED), ("left", HOSTS)):
        changed = _run(work, groups)
        files = {path.name: path.read_text() for path in out.iterdir()}
        result[name] = {"changed": changed, "files": files}
    return result


def test_the_node_targets_are_every_host_sorted(runs: dict[str, Any]) -> None:
    groups = yaml.safe_load(runs["joined"]["files"]["gpulab-nodes.yml"])
    assert groups == [
        {"targets": [f"10.0.0.{number}:9100"], "labels": {"instance": host}}
        for number, host in enumerate(
            ["controller1", "storage1", "worker1", "worker2", "worker3"], start=10
        )
    ]


def test_prometheus_yml_names_the_targets_file(runs: dict[str, Any]) -> None:
    config = yaml.safe_load(runs["first"]["files"]["prometheus.yml"])
    jobs = {job["job_name"]: job for job in config["scrape_configs"]}
    assert jobs["node"]["file_sd_configs"] == [
        {"files": [str(runs["out"] / "gpulab-nodes.yml")], "refresh_interval": "5m"}
    ]
    assert "static_configs" not in jobs["node"]
    assert jobs["prometheus"]["static_configs"] == [
        {"targets": ["10.0.0.10:9090"], "labels": {"instance": "controller1"}}
    ]


def test_a_second_run_changes_nothing(runs: dict[str, Any]) -> None:
    assert runs["first"]["changed"] == {TARGETS_TASK: True, CONFIG_TASK: True}
    assert runs["again"]["changed"] == {TARGETS_TASK: False, CONFIG_TASK: False}


def test_a_worker_joining_or_leaving_changes_the_targets_file_only(
    runs: dict[str, Any],
) -> None:
    for step in ("joined", "left"):
        assert runs[step]["changed"] == {TARGETS_TASK: True, CONFIG_TASK: False}, step
        assert runs[step]["files"]["prometheus.yml"] == runs["first"]["files"]["prometheus.yml"]
    assert runs["left"]["files"] == runs["first"]["files"]


def _notified(task: dict[str, Any]) -> set[str]:
    notify = task.get("notify", [])
    return {notify} if isinstance(notify, str) else set(notify)


def test_only_the_arguments_restart_and_only_prometheus_yml_reloads() -> None:
    """tasks/prometheus.yml: the node targets notify nothing (Prometheus watches their file),
    prometheus.yml and the alert rules the reload, the daemon's arguments the restart; each
    topic has handlers."""
    tasks = yaml.safe_load((ROLE / "tasks/prometheus.yml").read_text())
    by_template = {
        task["ansible.builtin.template"]["src"]: _notified(task)
        for task in tasks
        if "ansible.builtin.template" in task
    }
    assert by_template == {
        "prometheus.default.j2": {"monitoring restart prometheus"},
        "prometheus-nodes.yml.j2": set(),
        "prometheus.yml.j2": {"monitoring reload prometheus"},
        "gpulab.rules.yml.j2": {"monitoring reload prometheus"},
    }
    handlers = yaml.safe_load((ROLE / "handlers/main.yml").read_text())
    listening: dict[str, list[str]] = {}
    for handler in handlers:
        topics = handler["listen"]
        for topic in [topics] if isinstance(topics, str) else topics:
            listening.setdefault(topic, []).append(handler["name"])
    assert listening["monitoring restart prometheus"] == [
        "Restart Prometheus",
        "Wait for Prometheus on its address",
    ]
    assert "Reload Prometheus" in listening["monitoring reload prometheus"]
    assert "Restart Prometheus" not in listening["monitoring reload prometheus"]


@pytest.mark.skipif(shutil.which("promtool") is None, reason="no promtool (package prometheus)")
def test_promtool_accepts_the_configuration_and_its_targets(runs: dict[str, Any]) -> None:
    done = subprocess.run(
        ["promtool", "check", "config", str(runs["out"] / "prometheus.yml")],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert "WARNING" not in done.stdout + done.stderr
