"""Bad role variables are refused before anything changes: real ansible-playbook runs, no podman.

Each case runs one role, in check mode, on local hosts named like the lab's
(ansible_connection=local) with one bad setting, and asserts what the user gets: the play
fails in the role's validation (argument_specs or tasks/validate.yml, which each role runs
first), the message names the variable and the host (for a cluster-wide check such as the
partitions, the host that is wrong), no task reported a change and no task past the
validation ran. One run with good settings shows the same checks pass. Check mode keeps this
machine safe even if a refusal went missing.

What one machine cannot be, a case fakes through a stand-in, named as such: another
distribution (facts set in a play of its own before the role's), or another Slurm version
on a host (a `dpkg-query` that reports it, first on that host's PATH), or a clock that is off
(a `date` or `chronyc` that reports it, the same way).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests import ansible_fork

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
HOSTS = {"controller": ["controller1"], "storage": ["storage1"], "workers": ["worker1", "worker2"]}
# Where site.yml runs each role.
PLAY_HOSTS = {
    "apt_sources": "all",
    "identity": "all",
    "munge": "all",
    "nfs_server": "storage",
    "nfs_client": "controller:workers",
    "vulkan": "workers",
    "slurm": "all",
    "timesync": "all",
}
ARG_SPEC_TASK = "Validating arguments against arg spec"
SECRET_KEY = "c2VjcmV0LW11bmdlLWtleQ=="  # base64 of 16 bytes: too short, and must never be shown
SECRET_PASSWORD = "s3cret-dbd-"  # the start of every bad slurmdbd password: never shown
H100 = {"file": "/dev/nvidia0", "type": "h100"}  # a GPU for slurm_node_gpus
TWO_CONTROLLERS = {"controller": ["controller1", "storage1"], "storage": ["storage1"],
                   "workers": ["worker1", "worker2"]}  # fmt: skip


@dataclass(frozen=True)
class Case:
    """One bad setting: the role, the variables, and what the refusal must name."""

    id: str
    role: str
    variables: dict[str, Any]
    # In the message: the variable(s), what is wrong, and the host the setting is wrong on
    # (refusals of argument_specs carry the host in Ansible's "fatal: [HOST]" instead).
    names: tuple[str, ...]
    host: str  # the host whose result carries the refusal
    host_vars: dict[str, dict[str, Any]] = field(default_factory=dict)
    groups: dict[str, list[str]] = field(default_factory=lambda: HOSTS)
    play_hosts: str = ""
    # Stand-ins: facts a host reports instead of this machine's, and the Slurm package
    # version a host reports as installed.
    facts: dict[str, dict[str, str]] = field(default_factory=dict)
    slurm_versions: dict[str, str] = field(default_factory=dict)
    # Commands a host finds first on its PATH: {host: {name: shell script body}}.
    commands: dict[str, dict[str, str]] = field(default_factory=dict)


FLAT = {"name": "site-local", "uris": ["file:/srv/site-repo"], "suites": ["./"], "trusted": True}

CASES = [
    # apt_sources
    Case("apt-sources-exclusive-without-sources", "apt_sources", {"apt_sources_exclusive": True},
         ("controller1", "apt_sources_exclusive is true", "apt_sources_repositories is empty"),
         "controller1"),
    # What apt would refuse or misread, each named in the one line.
    Case("apt-sources-entries-apt-would-refuse", "apt_sources",
         {"apt_sources_repositories": [FLAT | {"components": ["main"]},
                                       FLAT | {"name": "site-b", "suites": ["bookworm"]}, FLAT]},
         ("worker1", 'apt_sources_repositories names "site-local" twice',
          "apt_sources_repositories[0] (site-local): suite ./ is a flat repository",
          "apt_sources_repositories[1] (site-b) needs components"),
         "worker1"),
    Case("apt-sources-entry-without-uris", "apt_sources",
         {"apt_sources_repositories": [{"name": "site", "suites": ["./"]}]},
         ("apt_sources_repositories", "uris"), "controller1"),
    # identity
    Case("identity-uid-not-a-number", "identity",
         {"identity_users": [{"name": "gpulab", "uid": "two thousand"}]},
         ("identity_users", "uid"), "controller1"),
    Case("identity-uid-root", "identity",
         {"identity_users": [{"name": "ops", "uid": 0}]},
         ("controller1", "identity_users ops uid is 0"), "controller1"),
    Case("identity-shared-id", "identity",
         {"identity_users": [{"name": "gpulab", "uid": 901}]},
         ("controller1", "identity_users", "share an ID"), "controller1"),
    # munge
    Case("munge-no-key-source", "munge",
         {"munge_key_source_group": "keyholders"},
         ("worker1", "munge_key", "munge_key_source_group", "keyholders"), "worker1"),
    Case("munge-key-source-outside-the-play", "munge", {},
         ("worker1", "munge_key_source_group", "controller1"), "worker1",
         play_hosts="workers"),
    Case("munge-key-too-short", "munge", {"munge_key": SECRET_KEY},
         ("controller1", "munge_key", "at least 32 bytes"), "controller1"),
    Case("munge-wait-not-a-number", "munge", {"munge_wait_timeout": "soon"},
         ("munge_wait_timeout", "int"), "controller1"),
    # slurm
    Case("slurm-worker-in-no-partition", "slurm",
         {"slurm_partitions": [{"name": "gpu", "nodes": ["worker1"]}]},
         ("worker2", "slurm_partitions", "no partition"), "controller1"),
    Case("slurm-partition-of-a-non-worker", "slurm",
         {"slurm_partitions": [{"name": "main", "nodes": ["worker1", "worker2", "storage1"]}]},
         ("slurm_partitions", "storage1"), "controller1"),
    # --limit leaving out a worker that was never converged: no record of its NodeName line.
    Case("slurm-worker-outside-the-play-without-record", "slurm", {},
         ("worker2", "outside this play", "--limit", "gpulab_slurm.fact"), "controller1",
         play_hosts="controller:worker1"),
    Case("slurm-accounting-without-password", "slurm",
         {"slurm_accounting_enabled": True},
         ("controller1", "slurm_dbd_db_password", "slurm_accounting_enabled"), "controller1"),
    Case("slurm-cgroups-not-a-choice", "slurm", {"slurm_cgroups": "sometimes"},
         ("slurm_cgroups", "auto, enabled, disabled"), "controller1"),
    Case("slurm-conf-extra-overrides-auth", "slurm",
         {"slurm_conf_extra": {"AuthType": "auth/none"}},
         ("slurm_conf_extra", "AuthType"), "controller1"),
    # slurmdbd.conf's StoragePass= and slurm.conf's KEY=VALUE words carry no '#', newline or space.
    Case("slurm-dbd-password-with-hash", "slurm",
         {"slurm_accounting_enabled": True, "slurm_dbd_db_password": SECRET_PASSWORD + "#rest"},
         ("controller1", "slurm_dbd_db_password", "'#'", "slurmdbd.conf"), "controller1"),
    Case("slurm-dbd-password-with-newline", "slurm",
         {"slurm_accounting_enabled": True,
          "slurm_dbd_db_password": SECRET_PASSWORD + "\nStorageHost=elsewhere"},
         ("controller1", "slurm_dbd_db_password", "newline"), "controller1"),
    Case("slurm-conf-extra-value-with-newline", "slurm",
         {"slurm_conf_extra": {"MaxJobCount": "1000\nAuthType=auth/none"}},
         ("slurm_conf_extra", '"MaxJobCount"', "newline", "controller1"), "controller1"),
    Case("slurm-conf-extra-value-with-a-second-key", "slurm",
         {"slurm_conf_extra": {"MaxJobCount": "1000 SlurmUser=root"}},
         ("slurm_conf_extra", '"MaxJobCount"', "one word"), "controller1"),
    Case("slurm-conf-extra-value-with-hash", "slurm",
         {"slurm_conf_extra": {"HealthCheckProgram": "/usr/sbin/nhc#x"}},
         ("slurm_conf_extra", '"HealthCheckProgram"', "'#'"), "controller1"),
    Case("slurm-scheduler-parameter-with-a-comma", "slurm",
         {"slurm_scheduler_parameters": ["batch_sched_delay=0,defer", "bf_interval=30"]},
         ("slurm_scheduler_parameters", '"batch_sched_delay=0,defer"', "','"), "controller1"),
    Case("slurm-conf-extra-sets-scheduler-parameters", "slurm",
         {"slurm_conf_extra": {"SchedulerParameters": "defer"}},
         ("slurm_conf_extra", "SchedulerParameters"), "controller1"),
    Case("slurm-conf-extra-key-with-equals", "slurm",
         {"slurm_conf_extra": {"MaxJobCount=1\nAuthType": "auth/none"}},
         ("slurm_conf_extra", "MaxJobCount=1\\nAuthType", "letters and digits"), "controller1"),
    Case("slurm-two-controllers-with-local-state", "slurm", {},
         ("controller1, storage1", "slurm_state_save_location", "controller mounts", "backup"),
         "controller1", groups=TWO_CONTROLLERS),
    Case("slurm-state-location-relative", "slurm", {"slurm_state_save_location": "state"},
         ("slurm_state_save_location", '"state"', "absolute"), "controller1",
         groups=TWO_CONTROLLERS),
    Case("slurm-restart-sec-zero", "slurm", {"slurm_restart_sec": 0},
         ("slurm_restart_sec (0)", "above 0"), "controller1"),
    Case("slurm-health-check-interval-zero", "slurm", {"slurm_health_check_interval": 0},
         ("worker1", "slurm_health_check_interval (0)", "above 0"), "worker1"),
    Case("slurm-health-check-never-resumes", "slurm",
         {"slurm_health_check_node_state": "IDLE,NONDRAINED_IDLE"},
         ("slurm_health_check_node_state", "IDLE,NONDRAINED_IDLE", "never resumed"), "worker1"),
    Case("slurm-health-check-program-relative", "slurm",
         {"slurm_health_check_program": "gpulab-healthcheck"},
         ("slurm_health_check_program", '"gpulab-healthcheck"', "absolute"), "worker2"),
    # slurmd kills the program after 60 s: a device's check leaves room for sinfo and scontrol.
    Case("slurm-health-check-timeout-zero", "slurm", {},
         ("worker2", "slurm_health_check_timeout (0)", "from 1 to 39"), "worker2",
         host_vars={"worker2": {"slurm_health_check_timeout": 0}}),
    Case("slurm-health-check-timeout-beyond-slurmd-kill", "slurm",
         {"slurm_health_check_timeout": 45},
         ("worker1", "slurm_health_check_timeout (45)", "from 1 to 39", "kills it after 60 s"),
         "worker1"),
    Case("slurm-health-check-timeout-not-a-number", "slurm",
         {"slurm_health_check_timeout": "soon"},
         ("slurm_health_check_timeout", "int"), "worker1"),
    # slurm.conf is one file: a worker with its own interval would make it differ.
    Case("slurm-health-check-interval-differs", "slurm", {},
         ('slurm_health_check_interval is "15" on worker2 but "300" on controller1',
          "group_vars/all"), "controller1",
         host_vars={"worker2": {"slurm_health_check_interval": 15}}),
    Case("slurm-worker-cpus-not-a-number", "slurm", {},
         ("slurm_node_cpus", "int"), "worker2",
         host_vars={"worker2": {"slurm_node_cpus": "many"}}),
    # GPU sharing: a whole number of shards per GPU, on a worker with a GPU, with Slurm 22.05+.
    Case("slurm-gpu-shards-negative", "slurm", {},
         ("slurm_gpu_shards on worker2 is -1", "whole number"), "worker2",
         host_vars={"worker2": {"slurm_gpu_shards": -1, "slurm_node_gpus": [H100]}}),
    Case("slurm-gpu-shards-not-a-number", "slurm", {"slurm_gpu_shards": "two"},
         ("slurm_gpu_shards", "int"), "worker1"),
    Case("slurm-gpu-shards-yes", "slurm", {},
         ("slurm_gpu_shards on worker2 is true", "whole number"), "worker2",
         host_vars={"worker2": {"slurm_gpu_shards": True, "slurm_node_gpus": [H100]}}),
    Case("slurm-gpu-shards-without-gpu", "slurm", {},
         ("slurm_gpu_shards on worker1 is 4", "no GPU to share"), "worker1",
         host_vars={"worker1": {"slurm_gpu_shards": 4}}),
    Case("slurm-gpu-shards-on-slurm-21.08", "slurm", {},
         ("slurm_gpu_shards on worker2 is 2", "Slurm is 21.08 (21.08.5-2ubuntu1)",
          "came with 22.05"),
         "worker2", slurm_versions={"worker2": "21.08.5-2ubuntu1"},
         host_vars={"worker2": {"slurm_gpu_shards": 2, "slurm_node_gpus": [H100]}}),
    # nfs_server
    Case("nfs-export-to-everyone", "nfs_server", {"nfs_server_clients": ["*"]},
         ("nfs_server_clients", "nfs_server_allow_world", "storage1"), "storage1"),
    Case("nfs-export-to-0.0.0.0-slash-0", "nfs_server",
         {"nfs_server_clients": ["10.0.0.0/24", "0.0.0.0/0"]},
         ("storage1", "nfs_server_clients", "0.0.0.0/0", "nfs_server_allow_world"), "storage1"),
    Case("nfs-no-root-squash", "nfs_server",
         {"nfs_server_clients": ["10.0.0.0/24"],
          "nfs_server_export_options": ["rw", "sync", "no_root_squash"]},
         ("storage1", "nfs_server_export_options", "no_root_squash",
          "nfs_server_allow_no_root_squash"),
         "storage1"),
    Case("nfs-insecure", "nfs_server",
         {"nfs_server_clients": ["10.0.0.0/24"],
          "nfs_server_export_options": ["rw", "sync", "root_squash", "insecure"]},
         ("storage1", "nfs_server_export_options contains insecure", "unprivileged ports"),
         "storage1"),
    Case("nfs-options-smuggled-in-a-client", "nfs_server",
         {"nfs_server_clients": ["10.0.0.0/24(rw,no_root_squash)"]},
         ("storage1", "nfs_server_clients", "10.0.0.0/24(rw,no_root_squash)"), "storage1"),
    Case("nfs-world-writable-without-sticky-bit", "nfs_server",
         {"nfs_server_clients": ["10.0.0.0/24"],
          "nfs_server_export_dirs": [{"name": "scratch", "mode": "0777"}]},
         ("storage1", "nfs_server_export_dirs", "scratch", "sticky"), "storage1"),
    # nfs_client
    Case("nfs-client-without-server", "nfs_client", {},
         ("worker1", "nfs_client_server", "storage"), "worker1",
         groups={"controller": ["controller1"], "workers": ["worker1", "worker2"]}),
    Case("nfs-client-options-in-one-entry", "nfs_client",
         {"nfs_client_mount_options": ["rw,hard"]},
         ("worker1", "nfs_client_mount_options"), "worker1"),
    Case("nfs-client-suid-against-nosuid", "nfs_client",
         {"nfs_client_mount_options": ["rw", "hard", "suid"]},
         ("worker1", "nfs_client_mount_options", "nfs_client_mount_safety_options", "suid"),
         "worker1"),
    # munge
    Case("munge-restart-sec-zero", "munge", {"munge_restart_sec": 0},
         ("controller1", "munge_restart_sec 0"), "controller1"),
    # timesync
    Case("timesync-offset-beyond-munge", "timesync", {"timesync_max_offset": 600},
         ("controller1", "timesync_max_offset is 600", "300"), "controller1"),
    Case("timesync-server-with-newline", "timesync",
         {"timesync_servers": ["ntp.example.org\nallow all"]},
         ("worker1", "timesync_servers", '"ntp.example.org\\nallow all"', "one host name"),
         "worker1"),
    # vulkan
    Case("vulkan-job-user-missing", "vulkan", {"vulkan_job_users": ["no-such-user"]},
         ("worker1", "vulkan_job_users", "no-such-user"), "worker1"),
    Case("vulkan-driver-not-a-choice", "vulkan", {"vulkan_driver": "radeon"},
         ("vulkan_driver", "auto, mesa, nvidia, jetson"), "worker1"),
    # distributions and Slurm versions
    Case("unsupported-distribution", "identity", {},
         ("gpulab: worker2 runs CentOS 9; supported: Debian 12, 13, Raspberry Pi OS 12, "
          "Ubuntu 22.04, 24.04",), "worker2",
         facts={"worker2": {"distribution": "CentOS", "distribution_version": "9",
                            "distribution_major_version": "9", "os_family": "RedHat"}}),
    Case("ubuntu-not-lts", "vulkan", {},
         ("gpulab: worker1 runs Ubuntu 23.10; supported:",), "worker1",
         facts={"worker1": {"distribution": "Ubuntu", "distribution_version": "23.10",
                            "distribution_major_version": "23", "os_family": "Debian"}}),
    # This machine's Slurm is Debian 12's 22.05; worker2 stands in for a Debian 13 host.
    Case("slurm-worker-newer-than-controller", "slurm", {},
         ("worker2", "Slurm 24.11 (24.11.5-1)", "newer than 22.05", "controller1"), "controller1",
         slurm_versions={"worker2": "24.11.5-1"}),
    Case("slurm-worker-too-old", "slurm", {},
         ("worker1", "Slurm 20.02", "too old for 22.05", "accepts 22.05, 21.08, 20.11"),
         "controller1", slurm_versions={"worker1": "20.02.6-1"}),
]  # fmt: skip

# Settings like the lab's, with which every role's validation passes.
GOOD = {
    "identity_users": [{"name": "gpulab", "uid": 2000}],
    "slurm_accounting_enabled": True,
    "slurm_dbd_db_password": "not-a-real-password",
    "slurm_cgroups": "disabled",
    "slurm_node_cpus": 2,  # the defaults read facts that gather_subset=min lacks
    "slurm_node_real_memory": 2048,
    "nfs_server_clients": ["10.88.0.0/16"],
    "vulkan_job_users": ["root"],
}


def _inventory(groups: dict[str, list[str]], host_vars: dict[str, dict[str, Any]]) -> str:
    local: dict[str, Any] = {
        "ansible_connection": "local",
        "ansible_python_interpreter": sys.executable,
    }
    # What the minimal facts lack for slurm's defaults, as a real inventory may set them.
    local |= {"slurm_node_cpus": 2, "slurm_node_real_memory": 2048}
    hosts = sorted({host for members in HOSTS.values() for host in members})
    body = {
        "all": {
            "hosts": {host: {**local, **host_vars.get(host, {})} for host in hosts},
            "children": {
                group: {"hosts": {host: {} for host in members}}
                for group, members in groups.items()
            },
        }
    }
    return json.dumps(body)


def _env(cache: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANSIBLE_", "MOLECULE_"))}
    return env | {
        "ANSIBLE_CONFIG": str(ROOT / "ansible.cfg"),
        "ANSIBLE_STDOUT_CALLBACK": "ansible.posix.json",
        "ANSIBLE_CACHE_PLUGIN": "jsonfile",
        "ANSIBLE_CACHE_PLUGIN_CONNECTION": str(cache),
        "ANSIBLE_GATHERING": "explicit",
        "ANSIBLE_RETRY_FILES_ENABLED": "false",
        "ANSIBLE_NOCOLOR": "1",
    }


@dataclass(frozen=True)
class Run:
    rc: int
    report: dict[str, Any]
    text: str  # everything the run printed

    def results(self) -> Iterator[tuple[str, str, dict[str, Any]]]:
        """(task name, host, result) of every task that ran, in order, but the stand-ins'."""
        for play in self.report["plays"]:
            if play["play"]["name"].startswith(STAND_IN):
                continue
            for task in play["tasks"]:
                for host, result in task["hosts"].items():
                    yield task["task"]["name"], host, result


STAND_IN = "stand-in"


def _stand_in_facts(work: Path, cache: Path, case: Case) -> tuple[Path, list[dict[str, Any]]]:
    """A copy of the fact cache and the plays that make the case's hosts report other facts
    (cacheable set_fact: ansible_facts reads the cache)."""
    if not case.facts:
        return cache, []
    own = work / "cache"
    shutil.copytree(cache, own)
    plays = [
        {"name": f"{STAND_IN}: {host} reports other facts", "hosts": host, "gather_facts": False,
         "tasks": [{"name": f"{STAND_IN}: facts", "ansible.builtin.set_fact": {
             **{f"ansible_{key}": value for key, value in facts.items()}, "cacheable": True}}]}
        for host, facts in case.facts.items()
    ]  # fmt: skip
    return own, plays


def _stand_in_commands(work: Path, case: Case) -> dict[str, dict[str, Any]]:
    """Per host of case.commands (and case.slurm_versions: a dpkg-query reporting that version
    as installed), a Python that puts those commands first on PATH: the host vars that select it."""
    commands = {host: dict(scripts) for host, scripts in case.commands.items()}
    for host, version in case.slurm_versions.items():
        commands.setdefault(host, {})["dpkg-query"] = f"printf 'installed %s' '{version}'"
    host_vars: dict[str, dict[str, Any]] = {}
    for host, scripts in commands.items():
        bin_dir = work / f"{STAND_IN}-{host}"
        bin_dir.mkdir()
        for name, body in scripts.items():
            (bin_dir / name).write_text(f"#!/bin/sh\n{body}\n")
        python = bin_dir / "python3"
        python.write_text(f'#!/bin/sh\nPATH="{bin_dir}:$PATH" exec "{sys.executable}" "$@"\n')
        for script in bin_dir.iterdir():
            script.chmod(0o755)
        host_vars[host] = {"ansible_python_interpreter": str(python)}
    return host_vars


def _run_playbook(work: Path, cache: Path, plays: list[dict[str, Any]], case: Case | None) -> Run:
    groups = case.groups if case else HOSTS
    host_vars = case.host_vars if case else {}
    if case:
        cache, stand_ins = _stand_in_facts(work, cache, case)
        plays = stand_ins + plays
        for host, extra in _stand_in_commands(work, case).items():
            host_vars = host_vars | {host: host_vars.get(host, {}) | extra}
    (work / "hosts.json").write_text(_inventory(groups, host_vars))
    (work / "play.yml").write_text(yaml.safe_dump(plays, sort_keys=False))
    (work / "vars.json").write_text(json.dumps(case.variables if case else GOOD))
    done = ansible_fork.run(
        [str(BIN / "ansible-playbook"), "-i", str(work / "hosts.json"), str(work / "play.yml"),
         "--check", "-e", f"@{work / 'vars.json'}"],
        cwd=ROOT, env=_env(cache),
    )  # fmt: skip
    start = done.stdout.find("{")
    assert start >= 0, f"no JSON report: {done.stdout}{done.stderr}"
    return Run(done.returncode, json.loads(done.stdout[start:]), done.stdout + done.stderr)


# The tasks files each role runs before it changes anything (validate.yml unless named here).
# outside.yml reads the record of the hosts a play leaves out (--limit) and refuses those without.
VALIDATION_FILES = {"slurm": ("validate.yml", "outside.yml", "version.yml")}


def _validation_task_names(role: str) -> set[str]:
    names = set()
    for file in VALIDATION_FILES.get(role, ("validate.yml",)):
        tasks = yaml.safe_load((ROOT / "roles" / role / "tasks" / file).read_text())
        names |= {f"{role} : {task['name']}" for task in tasks}
    return names


def _is_validation(role: str, name: str) -> bool:
    return name.startswith(f"{role} : {ARG_SPEC_TASK}") or name in _validation_task_names(role)


def _bad_play(case: Case) -> dict[str, Any]:
    return {
        "name": f"{case.role} with a bad setting",
        "hosts": case.play_hosts or PLAY_HOSTS[case.role],
        "gather_facts": False,
        "roles": [{"role": case.role}],
    }


def _good_plays() -> list[dict[str, Any]]:
    """Each role's argument_specs (against its defaults and GOOD) and its validation files."""
    plays = []
    for role, hosts in PLAY_HOSTS.items():
        spec = yaml.safe_load((ROOT / "roles" / role / "meta/argument_specs.yml").read_text())
        plays.append({
            "name": f"{role} with good settings",
            "hosts": hosts,
            "gather_facts": False,
            "vars_files": [str(ROOT / "roles" / role / "defaults/main.yml")],
            "tasks": [
                {"name": f"{role}: check the arguments",
                 "ansible.builtin.validate_argument_spec": {
                     "argument_spec": spec["argument_specs"]["main"]["options"]}},
                *({"name": f"{role}: run {file}",
                   "ansible.builtin.include_role": {"name": role, "tasks_from": file}}
                  for file in VALIDATION_FILES.get(role, ("validate.yml",))),
            ],
        })  # fmt: skip
    return plays


@pytest.fixture(scope="session")
def runs(fact_cache: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Run]:
    """Every case's run and the good run ("good"), two at a time: each is mostly Python start-up."""
    jobs: dict[str, tuple[list[dict[str, Any]], Case | None]] = {
        case.id: ([_bad_play(case)], case) for case in CASES
    }
    jobs["good"] = (_good_plays(), None)
    with ThreadPoolExecutor(max_workers=2) as pool:
        futures = {
            name: pool.submit(_run_playbook, tmp_path_factory.mktemp(name), fact_cache, *job)
            for name, job in jobs.items()
        }
        return {name: future.result() for name, future in futures.items()}


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_bad_setting_is_refused_before_any_change(case: Case, runs: dict[str, Run]) -> None:
    run = runs[case.id]
    assert run.rc != 0, f"{case.id}: the play passed"
    ran = list(run.results())
    failures = [(name, host, r) for name, host, r in ran if r.get("failed")]
    assert failures, f"{case.id}: no task failed: {run.text[-2000:]}"
    outside = [name for name, _, _ in ran if not _is_validation(case.role, name)]
    assert not outside, f"{case.id}: tasks past the validation ran: {outside}"
    changed = [(name, host) for name, host, r in ran if r.get("changed")]
    assert not changed, f"{case.id}: tasks reported changes: {changed}"
    assert all(stats["changed"] == 0 for stats in run.report["stats"].values())

    messages = {host: _message(r) for _, host, r in failures}
    assert case.host in messages, f"{case.id}: no refusal for {case.host}: {messages}"
    message = messages[case.host]
    for name in case.names:
        assert name.lower() in message.lower(), f"{case.id}: {name!r} not in {message!r}"
    assert "Traceback" not in run.text
    assert SECRET_KEY not in run.text, f"{case.id}: the munge key appeared in the output"
    assert SECRET_PASSWORD not in run.text, f"{case.id}: the slurmdbd password was shown"


def _message(result: dict[str, Any]) -> str:
    """What the user reads for a failed task: its message, or those of its failed loop items."""
    items = [str(item.get("msg", "")) for item in result.get("results", []) if item.get("failed")]
    return " ".join(items) or str(result.get("msg", ""))


def test_good_settings_pass_every_check(runs: dict[str, Run]) -> None:
    """argument_specs (against the role's defaults and GOOD) and validate.yml pass, unchanged."""
    run = runs["good"]
    failed = [(name, host, r.get("msg")) for name, host, r in run.results() if r.get("failed")]
    assert run.rc == 0 and not failed, failed or run.text[-3000:]
    assert not [name for name, _, r in run.results() if r.get("changed")]
    ran = {name for name, _, _ in run.results()}
    for role in PLAY_HOSTS:
        assert _validation_task_names(role) <= ran, role


def test_vulkan_without_packages_only_checks_what_is_there(
    fact_cache: Path, tmp_path: Path
) -> None:
    """vulkan_install_packages false: no apt task runs; this machine's loader is found, and a
    vulkaninfo that is not there is named in one line."""
    case = Case("vulkan-preinstalled", "vulkan",
                {"vulkan_install_packages": False, "vulkan_job_users": ["root"],
                 "vulkan_vulkaninfo": "/nonexistent/vulkaninfo"},
                (), "worker1")  # fmt: skip
    run = _run_playbook(tmp_path, fact_cache, [_bad_play(case)], case)
    ran = list(run.results())
    installs = [name for name, _, r in ran if "Install" in name and not r.get("skipped")]
    assert not installs, installs
    failures = {host: _message(r) for name, host, r in ran if r.get("failed")}
    assert run.rc != 0 and set(failures) == {"worker1", "worker2"}, run.text[-2000:]
    assert failures["worker1"] == (
        "vulkan: worker1 has vulkan_install_packages false but no /nonexistent/vulkaninfo; "
        "install the GPU driver's Vulkan loader and vulkaninfo (vulkan-tools), or set "
        "vulkan_install_packages: true."
    )


def _role_tasks_play(role: str, tasks_from: str, hosts: str = "all") -> dict[str, Any]:
    return {
        "name": f"{role} {tasks_from}",
        "hosts": hosts,
        "gather_facts": False,
        "tasks": [{"name": f"{role}: {tasks_from}", "ansible.builtin.include_role": {
            "name": role, "tasks_from": tasks_from, "public": True}}],
    }  # fmt: skip


def test_two_controllers_with_shared_state_pass(fact_cache: Path, tmp_path: Path) -> None:
    """The refusal of several controllers lifts once their state is on shared storage."""
    case = Case("two-controllers-shared-state", "slurm",
                GOOD | {"slurm_state_save_location": "/srv/gpulab/slurmctld"}, (), "controller1",
                groups=TWO_CONTROLLERS)  # fmt: skip
    run = _run_playbook(tmp_path, fact_cache, [_role_tasks_play("slurm", "validate.yml")], case)
    failed = [(name, host, _message(r)) for name, host, r in run.results() if r.get("failed")]
    assert run.rc == 0 and not failed, failed or run.text[-2000:]


def test_numbers_given_as_strings_pass(fact_cache: Path, tmp_path: Path) -> None:
    """`-e slurm_def_mem_per_cpu=4096` hands the role a string: found on the device machine's
    H100 (scripts/gpu-host/slurm.sh), where the validation stopped with "'>' not supported
    between instances of '_AnsibleTaggedStr' and 'int'" instead of taking the number."""
    as_strings = {
        "slurm_def_mem_per_cpu": "4096", "slurm_service_wait_timeout": "60",
        "slurm_nodes_ready_timeout": "120", "slurm_restart_sec": "5", "slurm_gpu_shards": "0",
        "slurm_health_check_interval": "15", "slurm_health_check_timeout": "15",
        "munge_restart_sec": "5", "munge_wait_timeout": "30", "munge_key_generated_bytes": "1024",
        "timesync_max_offset": "1",
    }  # fmt: skip
    case = Case("numbers-as-strings", "slurm", GOOD | as_strings, (), "controller1")
    plays = [_role_tasks_play(role, "validate.yml") for role in ("slurm", "munge", "timesync")]
    run = _run_playbook(tmp_path, fact_cache, plays, case)
    failed = [(name, host, _message(r)) for name, host, r in run.results() if r.get("failed")]
    assert run.rc == 0 and not failed, failed or run.text[-2000:]


def test_slurm_records_each_restart_drop_in_by_its_path(fact_cache: Path, tmp_path: Path) -> None:
    """The files the slurm role's converge record follows name each daemon's restart drop-in:
    a regex_replace in a folded scalar had written them as '/etc/systemd/system/\\1.service.d/...',
    so a drop-in changed by hand never broke the record."""
    case = Case("slurm-record-files", "slurm", GOOD, (), "controller1")
    play = _role_tasks_play("slurm", "validate.yml", "controller1")
    play["tasks"].append({"name": "record files", "ansible.builtin.debug": {
        "msg": "{{ _slurm_converge_files }}"}})  # fmt: skip
    run = _run_playbook(tmp_path, fact_cache, [play], case)
    (shown,) = [r["msg"] for name, _, r in run.results() if name == "record files"]
    drop_ins = [path for path in shown if path.endswith("gpulab-restart.conf")]
    assert drop_ins == [
        f"/etc/systemd/system/{daemon}.service.d/gpulab-restart.conf"
        for daemon in ("slurmctld", "slurmd", "slurmdbd")
    ], shown


def test_nfs_client_mounts_nosuid_nodev(fact_cache: Path, tmp_path: Path) -> None:
    """The fstab options the mount task writes: the user's, then nosuid and nodev."""
    case = Case("nfs-fstab-options", "nfs_client", {}, (), "worker1")
    play = _role_tasks_play("nfs_client", "validate.yml", "worker1")
    play["tasks"].append({"name": "fstab options", "ansible.builtin.debug": {
        "msg": "{{ _nfs_client_fstab_options }}"}})  # fmt: skip
    run = _run_playbook(tmp_path, fact_cache, [play], case)
    shown = [r["msg"] for name, _, r in run.results() if name == "fstab options"]
    assert shown == ["rw,hard,noatime,nfsvers=4.2,_netdev,nosuid,nodev"], run.text[-2000:]
    mount = yaml.safe_load((ROOT / "roles/nfs_client/tasks/mount.yml").read_text())
    fstab = [t for t in mount if "ansible.posix.mount" in t]
    assert [t["ansible.posix.mount"]["opts"] for t in fstab] == ["{{ _nfs_client_fstab_options }}"]


def test_clocks_off_are_refused_in_one_line(fact_cache: Path, tmp_path: Path) -> None:
    """timesync's check: storage1's clock 10 min ahead of the reference (controller1), chrony on
    worker1 reporting 7 min off NTP; worker2, a container, shares its host's clock: its chronyc
    (as wrong as worker1's) is not asked. Stand-ins for the clocks, real checks."""
    chronyc = ("echo 'Reference ID    : C0A80001 (ntp.example.org)'; "
               "echo 'System time     : 423.125000000 seconds slow of NTP time'")  # fmt: skip
    case = Case("clocks-off", "timesync", {}, (), "storage1",
                commands={"storage1": {"date": 'echo "$(($(/bin/date +%s) + 600)).000000000"'},
                          "worker1": {"chronyc": chronyc}, "worker2": {"chronyc": chronyc}},
                facts={"worker2": {"virtualization_role": "guest",
                                   "virtualization_type": "podman"}})  # fmt: skip
    run = _run_playbook(tmp_path, fact_cache, [_role_tasks_play("timesync", "check")], case)
    failures = {host: _message(r) for _, host, r in run.results() if r.get("failed")}
    assert run.rc != 0 and set(failures) == {"storage1", "worker1"}, failures or run.text[-3000:]
    # The stand-in's clock is whole seconds, 599 to 600 s ahead, and on a busy machine the two
    # hosts' clocks are read up to seconds apart: the reading is near 600 s, and the skew is the
    # reading less that span, never more than the reading.
    said = re.match(r"timesync: storage1's clock is (\d+\.\d) s or more off controller1's "
                    r"\(read \+(\d+\.\d) s\)", failures["storage1"])  # fmt: skip
    assert said, failures
    skew, read = float(said[1]), float(said[2])
    assert 590 <= read <= 610 and 560 <= skew <= read, failures
    assert "timesync_max_offset" in failures["storage1"]
    assert failures["worker1"].startswith(
        "timesync: worker1's clock is 423.125000000 seconds slow of NTP time, allowed 60"
    ), failures
    asked = {host for name, host, r in run.results()
             if name.endswith("chrony's offset from NTP") and not r.get("skipped")}  # fmt: skip
    assert "worker2" not in asked and "worker1" in asked
    assert "\n" not in failures["storage1"] + failures["worker1"]


def test_clocks_that_agree_pass(fact_cache: Path, tmp_path: Path) -> None:
    """The same check on this machine's one clock: nothing off, nothing changed."""
    case = Case("clocks-agree", "timesync", {}, (), "controller1")
    run = _run_playbook(tmp_path, fact_cache, [_role_tasks_play("timesync", "check")], case)
    failed = [(host, _message(r)) for _, host, r in run.results() if r.get("failed")]
    assert run.rc == 0 and not failed, failed or run.text[-2000:]
    assert not [name for name, _, r in run.results() if r.get("changed")]
