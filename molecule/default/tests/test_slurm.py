"""Slurm daemons run where the groups say, and every worker is idle."""

from __future__ import annotations

from typing import Any

from conftest import Cluster
from testinfra.host import Host


def _daemons(cluster: Cluster, hostname: str) -> list[str]:
    daemons = []
    if hostname in cluster.groups["controller"]:
        daemons.append("slurmctld")
        if cluster.var("slurm_accounting_enabled", False) and hostname == cluster.controller:
            daemons += ["slurmdbd", "mariadb"]
    if hostname in cluster.workers:
        daemons.append("slurmd")
    return daemons


def test_slurm_daemons_running_and_enabled(cluster: Cluster, hostname: str) -> None:
    node = cluster.node(hostname)
    for daemon in _daemons(cluster, hostname):
        service = node.service(daemon)
        assert service.is_running, f"{daemon} is not running on {hostname}"
        assert service.is_enabled, f"{daemon} is not enabled on {hostname}"


def test_every_worker_is_idle(cluster: Cluster, controller: Host, eventually: Any) -> None:
    def states() -> dict[str, str]:
        out = controller.run("sinfo --noheader --Node --format='%N %t'")
        return dict(line.split() for line in out.stdout.splitlines()) if out.rc == 0 else {}

    def all_idle() -> bool:
        return all(states().get(cluster.node_name(w)) == "idle" for w in cluster.workers)

    assert eventually(all_idle, timeout=60), f"sinfo: {states()}"


def test_batch_jobs_are_scheduled_when_submitted(cluster: Cluster, controller: Host) -> None:
    """slurm_scheduler_parameters reached slurmctld (its default: no 3 s batch_sched_delay)."""
    want = ",".join(cluster.var("slurm_scheduler_parameters", ["batch_sched_delay=0"]))
    shown = controller.check_output("scontrol show config | grep '^SchedulerParameters '")
    assert shown.split("=", 1)[1].strip() == want, shown
