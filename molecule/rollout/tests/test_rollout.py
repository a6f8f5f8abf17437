"""Configuration rollouts under running and queued jobs: each converges site.yml with new
inventory values while sleep jobs run and wait, then checks what Slurm and the jobs went
through. The steps build on each other and run in this order."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from slurm_fixtures import Record
from slurm_ops import Slurm, StateSampler, decisions, timed

# Four CPUs on two workers: eight one-CPU jobs leave four waiting; all are held until the
# converge has ended, so that it runs under running and waiting jobs however long it takes.
JOBS = 8
# Every change the tests make, on top of the lab's inventory (inventory/lab/group_vars).
NODE_AND_PARTITION = {
    "slurm_node_features": ["rollout"],  # every worker's Features gain `rollout`
    "slurm_partitions": [{"name": "main", "default": True, "max_time": "2:00:00"}],
}
RESTART_KEY = {**NODE_AND_PARTITION, "slurm_conf_extra": {"PriorityType": "priority/multifactor"}}


def rollout(
    slurm: Slurm, extra_vars: dict[str, Any], workdir: Path, name: str
) -> tuple[list[str], dict[str, str], dict[str, str], StateSampler, float]:
    """Jobs held, site.yml converged with extra_vars, the jobs released and followed to their end.

    Returns the role's decisions, the daemons before and after, the node states sampled from
    the submission to the last job's end, and the seconds the converge took."""
    assert slurm.wait_nodes_in_service(timeout=120), f"not in service: {slurm.node_states()}"
    before = slurm.daemons()
    with StateSampler(slurm) as sampler:
        slurm.hold()
        jobs = slurm.submit_held_jobs(JOBS, name)
        time.sleep(3)  # the first jobs start
        start = time.monotonic()
        converge = slurm.converge(extra_vars, workdir)
        seconds = timed(start)
        queue = slurm.queue()
        slurm.release()
        assert converge.returncode == 0, converge.stdout[-4000:] + converge.stderr[-2000:]
        assert len(queue) == JOBS and set(queue.values()) == {"PENDING", "RUNNING"}, queue
        after = slurm.daemons()
        finals = slurm.wait_jobs_final(jobs, timeout=300)
        in_service = slurm.wait_nodes_in_service(timeout=120)
    assert in_service, f"nodes not back in service: {slurm.node_states()}"
    not_completed = {job: state for job, state in finals.items() if state != "COMPLETED"}
    assert not not_completed, f"jobs not completed: {not_completed}"
    assert not sampler.bad(), f"nodes seen in states a rollout must not cause: {sampler.bad()}"
    return decisions(converge.stdout), before, after, sampler, seconds


def test_node_and_partition_change_is_a_reconfigure(
    slurm: Slurm, tmp_path: Path, record_step: Record
) -> None:
    """Features and MaxTime: `scontrol reconfigure` only; no daemon restarts."""
    decided, before, after, sampler, seconds = rollout(
        slurm, NODE_AND_PARTITION, tmp_path, "reconf"
    )
    (decision,) = decided
    assert decision.startswith("slurm: scontrol reconfigure: "), decided
    for worker in slurm.cluster.workers:
        assert f"node {slurm.cluster.node_name(worker)}: features changed (" in decision, decided
    assert decision.count("rollout") == len(slurm.cluster.workers), decision
    assert decision.endswith("; partition main: maxtime changed (INFINITE -> 2:00:00)")
    assert after == before, "a reconfigure restarted a daemon"
    assert "rollout" in slurm.on_controller("sinfo --noheader --Node --format=%f")
    assert "MaxTime=02:00:00" in slurm.on_controller("scontrol show partition main")
    record_step("reconfigure (Features, MaxTime)", seconds, 0, f"states seen {sampler.seen}")


def test_a_plugin_change_restarts_slurmctld_then_slurmd(
    slurm: Slurm, tmp_path: Path, record_step: Record
) -> None:
    """PriorityType: slurmctld and every slurmd restart (slurmdbd does not); jobs go on."""
    decided, before, after, _, seconds = rollout(slurm, RESTART_KEY, tmp_path, "restart")
    assert decided == [
        "slurm: restart slurmctld, then slurmd:"
        " prioritytype changed (unset -> priority/multifactor)"
    ], decided
    restarted = sorted(d for d in before if before[d] != after[d])
    assert restarted == sorted(d for d in before if not d.endswith("slurmdbd")), restarted
    assert "priority/multifactor" in slurm.on_controller("scontrol show config | grep PriorityType")
    record_step("restart (PriorityType)", seconds, 0, f"restarted {restarted}")


def test_the_same_settings_again_change_nothing(
    slurm: Slurm, tmp_path: Path, record_step: Record
) -> None:
    decided, before, after, _, seconds = rollout(slurm, RESTART_KEY, tmp_path, "again")
    assert decided == []
    assert after == before
    record_step("unchanged", seconds, 0)
