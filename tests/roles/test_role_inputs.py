"""Every role value that reaches a configuration file or a command line is checked by shape:
hostile values (a newline and a Key=Value, a space and a key, a quote) are refused in one line
that names each variable, before anything changes (real ansible-playbook runs of each role's
tasks/validate.yml in check mode, on local hosts named like the lab's).

The table covers every option of type str, path, list, dict or raw in every role's argument
specs: each has hostile values below, or a reason here why it cannot carry a line of its own
(test_every_text_option_is_covered keeps it so as roles grow).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.roles.test_role_validation import (
    GOOD,
    ROOT,
    Case,
    _message,
    _role_tasks_play,
    _run_playbook,
)

# Hostile values: what a probe of the roles wrote into nodes.conf, gres.conf and exports.
NEWLINE_KEY = "1\nSlurmUser=root"
SPACE_KEY = "1 AuthType=auth/none"


@dataclass(frozen=True)
class Probe:
    """One run: a role, the hostile values (cluster-wide, or one host's), and the names the
    refusal must carry (the variable, with the item it is in)."""

    id: str
    role: str
    variables: dict[str, Any]
    named: tuple[str, ...]
    host: str = "controller1"
    host_vars: dict[str, dict[str, Any]] = field(default_factory=dict)
    play_hosts: str = "all"


PROBES = [
    Probe("slurm-cluster", "slurm", {
        "slurm_partitions": [{"name": "main", "default": True, "max_time": NEWLINE_KEY,
                              "options": {"MaxNodes": SPACE_KEY, "Include /etc/passwd": "1"},
                              "nodes": ["worker1\nNodeName=evil"]}],
        "slurm_select_type_parameters": "CR_Core Include=/tmp/x",
        "slurm_dbd_db_name": "acct;drop",
        "slurm_dbd_db_user": "slurm\nStoragePass=x",
    }, ("slurm_partitions[0].max_time", 'slurm_partitions[0].options["MaxNodes"]',
        'slurm_partitions[0].options key "Include /etc/passwd"', "slurm_partitions[0].nodes[0]",
        "slurm_select_type_parameters", "slurm_dbd_db_name", "slurm_dbd_db_user")),
    Probe("slurm-worker", "slurm", {}, (
        "slurm_node_features[0]", "slurm_node_device_features[0]", "slurm_node_gpus[0].file",
        "slurm_node_gpus[0].type", "slurm_node_gpus[0].cores", "slurm_health_check_command"),
        host="worker2", host_vars={"worker2": {
            "slurm_node_features": ["gpu\nNodeName=evil"], "slurm_node_device_features": ["a b"],
            "slurm_node_gpus": [{"file": "/dev/nvidia0 Name=gpu", "type": "h100\nNodeName=x",
                                 "cores": "0-3 Links=x"}],
            "slurm_health_check_command": "/opt/gpu lab/gpulab"}}),
    Probe("nfs-server", "nfs_server", {
        "nfs_server_clients": ["10.0.0.0/24"],
        "nfs_server_export_path": '/srv/x *(rw,no_root_squash) "',
        "nfs_server_export_owner": "root\nx", "nfs_server_export_group": "a b",
    }, ("nfs_server_export_path", "nfs_server_export_owner", "nfs_server_export_group"),
        host="storage1", play_hosts="storage"),
    Probe("nfs-client", "nfs_client", {
        "nfs_client_mount_point": "/srv/a b", "nfs_client_export_path": "/srv\t/x",
        "nfs_client_server": "storage1 -o x",
    }, ("nfs_client_mount_point", "nfs_client_export_path", "nfs_client_server"),
        host="worker1", play_hosts="controller:workers"),
    Probe("munge", "munge", {"munge_options": '--num-threads=2"\nEVIL="1'}, ("munge_options",)),
    Probe("identity", "identity", {
        "identity_users": [{"name": "gpulab", "uid": 2000, "comment": "x:0:0:root",
                            "home": "/home/a b", "shell": "/bin/bash\n"}],
        "identity_user_shell": "/bin/ba sh",
    }, ("identity_users[0].comment", "identity_users[0].home", "identity_users[0].shell",
        "identity_user_shell")),
    Probe("monitoring", "monitoring", {
        "monitoring_textfile_dir": "/var/lib/x y", "monitoring_gpulab_command": '/opt/gpulab"',
        "monitoring_slurm_metrics_host": "a b", "monitoring_share_path": "/srv/a b",
    }, ("monitoring_textfile_dir", "monitoring_gpulab_command", "monitoring_slurm_metrics_host",
        "monitoring_share_path")),
    Probe("payload", "payload", {
        "payload_venv": "/opt/gpulab/venv\n", "payload_storage_dir": "/srv/a b",
        "payload_shared_dir": '/srv/"x', "payload_command_link": "/usr/local/bin/gp lab",
    }, ("payload_venv", "payload_storage_dir", "payload_shared_dir", "payload_command_link"),
        host="worker1", play_hosts="workers"),
    Probe("apt-sources", "apt_sources", {
        "apt_sources_repositories": [{
            "name": "site/../../evil", "uris": ["http://m.example.org/debian\nSuites: sid"],
            "suites": ["bookworm main"], "components": ["main\nTrusted: yes"],
            "architectures": ["amd64 i386"], "signed_by": "/k.gpg\nTrusted: yes"}],
        "apt_sources_proxy": 'http://p.example.org";\nAcquire::http::Pipeline-Depth "0',
        "apt_sources_https_proxy": "http://p.example.org:3128 x",
    }, ("apt_sources_repositories[0].name", "apt_sources_repositories[0].uris[0]",
        "apt_sources_repositories[0].suites[0]", "apt_sources_repositories[0].components[0]",
        "apt_sources_repositories[0].architectures[0]", "apt_sources_repositories[0].signed_by",
        "apt_sources_proxy", "apt_sources_https_proxy")),
    Probe("vulkan", "vulkan", {
        "vulkan_vulkaninfo": "vulkaninfo; id", "vulkan_job_users": ["root", "a b"],
    }, ("vulkan_vulkaninfo", "vulkan_job_users[1]"), host="worker1", play_hosts="workers"),
]  # fmt: skip

# Options that cannot carry a line of their own into a file or a command, and why.
NOT_WRITTEN = {
    "slurm_controller_group": "names an inventory group",
    "slurm_worker_group": "names an inventory group",
    "monitoring_server_group": "names an inventory group",
    "monitoring_gpu_group": "names an inventory group",
    "munge_key_source_group": "names an inventory group",
    "timesync_reference_group": "names an inventory group",
    "nfs_server_client_groups": "names inventory groups",
    "slurm_cgroups": "choices",
    "slurm_private_data": "choices",
    "slurm_package_state": "choices",
    "slurm_resume_nodes": "choices",
    "munge_service_state": "choices",
    "nfs_client_mode": "choices",
    "nfs_server_implementation": "choices",
    "nfs_server_service_state": "choices",
    "vulkan_driver": "choices",
    "slurm_cluster_name": "checked: 1 to 40 of a-z 0-9 _ - (tasks/validate.yml)",
    "slurm_conf_extra": "checked: keys letters and digits, values one word (tasks/validate.yml)",
    "slurm_scheduler_parameters": "checked: one word each, no comma (tasks/validate.yml)",
    "slurm_health_check_node_state": "checked: words of ANY IDLE ALLOC MIXED CYCLE",
    "slurm_health_check_program": "checked: an absolute path, one word",
    "slurm_state_save_location": "checked: an absolute path, one word",
    "slurm_dbd_db_password": "checked: one word (a secret: never echoed)",
    "munge_key": "checked: base64 of 32 to 1024 bytes (a secret: never echoed)",
    "nfs_server_clients": "checked: one address, network or name each",
    "nfs_server_export_options": "checked: exports(5) option words; insecure refused",
    "nfs_server_export_mode": "checked: an octal mode",
    "nfs_server_export_dirs": "made with the file module inside the export; names checked",
    "nfs_client_mount_options": "checked: one fstab option word each",
    "nfs_client_mount_safety_options": "checked: one fstab option word each",
    "timesync_servers": "checked: one host name each",
    "identity_groups": "names checked as account names; handed to the group module",
    "monitoring_listen_address": "checked: one of this host's addresses",
    "monitoring_scrape_interval": "checked: a Prometheus duration",
    "monitoring_retention_time": "checked: a Prometheus duration",
    "monitoring_retention_size": "checked: a Prometheus size",
    "monitoring_alert_for": "checked: a Prometheus duration",
    "monitoring_evaluation_interval": "checked: a Prometheus duration or empty",
    "monitoring_alert_services": "checked: systemd unit names (letters, digits, @_.:-)",
    "monitoring_alertmanager_webhooks": "checked: http(s) URLs, one word; written JSON-quoted",
    "monitoring_alertmanager_email_to": "checked: e-mail addresses, one word; written JSON-quoted",
    "monitoring_alertmanager_smtp_smarthost": "checked: host:port",
    "monitoring_alertmanager_smtp_from": "checked: an e-mail address",
    "monitoring_alertmanager_smtp_auth_username": "written JSON-quoted into alertmanager.yml",
    "monitoring_alertmanager_smtp_auth_password": "a secret, written JSON-quoted, never echoed",
    "monitoring_alertmanager_group_wait": "checked: a Prometheus duration",
    "monitoring_alertmanager_group_interval": "checked: a Prometheus duration",
    "monitoring_alertmanager_repeat_interval": "checked: a Prometheus duration",
    "vulkan_mesa_packages": "package names handed to apt as a list (no shell)",
    "vulkan_nvidia_packages": "package names handed to apt as a list (no shell)",
    "vulkan_jetson_packages": "package names handed to apt as a list (no shell)",
    "payload_wheelhouse_dir": "the control machine's own path, an argument (argv), a copy source",
    "payload_source_dir": "the control machine's own path, an argument (argv)",
    "payload_sdist": "the control machine's own path, an argument (argv), quoted for the shell",
    "payload_pip_index_url": "an argument of the control machine's pip (argv), quoted",
    "payload_pip_extra_args": "arguments of the control machine's pip (argv), quoted",
    "payload_build_dir": "the control machine's own path, quoted for the shell",
    "payload_build_python": "the control machine's own path, quoted for the shell",
    "payload_pip_platforms": "the control machine's pip tags, quoted for the shell",
    "payload_cross_toolchains": "the control machine's own paths, in the build's environment",
    "payload_storage_host": "checked: a host of the inventory",
    # gpulab.cluster.converge_gate: set by the collection's roles from their own values, never by
    # an inventory; module arguments of converge_record (no file, no shell).
    "converge_gate_role": "the importing role's name, a literal in its tasks/main.yml",
    "converge_gate_inputs": "hashed (SHA-256) before it reaches the module",
    "converge_gate_files": "paths the importing role writes, a module argument",
    "converge_gate_packages": "package names, a module argument (dpkg-query argv)",
    "converge_gate_services": "unit names, a module argument (systemctl argv)",
    "converge_gate_users": "account names, a module argument (read from /etc/passwd)",
    "converge_gate_groups": "group names, a module argument (read from /etc/group)",
}


def _text_options() -> set[str]:
    names = set()
    for specs in sorted((ROOT / "roles").glob("*/meta/argument_specs.yml")):
        options = yaml.safe_load(specs.read_text())["argument_specs"]["main"]["options"]
        names |= {name for name, o in options.items()
                  if o.get("type", "str") in {"str", "path", "list", "dict", "raw"}}  # fmt: skip
    return names


def test_every_text_option_is_covered() -> None:
    probed = {name.split("[")[0].split(" ")[0] for p in PROBES for name in p.named}
    missing = _text_options() - probed - set(NOT_WRITTEN)
    assert not missing, f"add hostile values (PROBES) or a reason (NOT_WRITTEN) for: {missing}"
    assert not (probed & set(NOT_WRITTEN)), probed & set(NOT_WRITTEN)


@pytest.mark.parametrize("probe", PROBES, ids=[p.id for p in PROBES])
def test_hostile_values_are_refused_naming_each(
    probe: Probe, fact_cache: Path, tmp_path: Path
) -> None:
    case = Case(probe.id, probe.role, GOOD | probe.variables, (), probe.host,
                host_vars=probe.host_vars)  # fmt: skip
    play = _role_tasks_play(probe.role, "validate.yml", probe.play_hosts)
    run = _run_playbook(tmp_path, fact_cache, [play], case)
    failures = {host: _message(r) for _, host, r in run.results() if r.get("failed")}
    assert run.rc != 0 and probe.host in failures, run.text[-2000:]
    message = failures[probe.host]
    assert "\n" not in message.strip(), message
    for name in probe.named:
        assert f"{name} " in message, f"{name!r} not named in {message!r}"
    assert not [name for name, _, r in run.results() if r.get("changed")]
    assert "Traceback" not in run.text
