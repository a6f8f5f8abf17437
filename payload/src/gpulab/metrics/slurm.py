"""What Slurm is doing, as metrics: each node's state, jobs per partition and state, the longest
wait of a pending job.

Read from `sinfo` and `squeue` on any host with Slurm's client commands and a MUNGE key (the
controller or a worker); the commands and their parsers are gpulab's one Slurm client
(gpulab.submit.slurm_client); they run through a `Runner`, so the tests feed captured output.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

from gpulab.metrics.exposition import Family
from gpulab.submit.slurm_client import (
    NodeState,
    QueuedJob,
    parse_node_states,
    parse_partition_names,
    parse_queued_jobs,
    sinfo_nodes_argv,
    sinfo_partitions_argv,
    squeue_all_argv,
)
from gpulab.submit.transport import CommandResult, Unreachable

Runner = Callable[[Sequence[str]], CommandResult]

# The base states sinfo's %T prints; each node gets a 0/1 sample for every one of them (and
# for any other it reports), so a state change never makes a series vanish.
NODE_STATES = (
    "allocated",
    "completing",
    "down",
    "drained",
    "draining",
    "fail",
    "idle",
    "mixed",
    "unknown",
)
# Job states always reported per partition, 0 when no job is in them.
JOB_STATES = ("pending", "running")
# The drain reason the Slurm role's GPU health check sets (templates/gpulab-healthcheck.j2).
HEALTH_DRAIN_PREFIX = "gpulab-health:"


def _read(run: Runner, argv: Sequence[str]) -> str | None:
    """The command's output; None when Slurm did not answer."""
    try:
        done = run(argv)
    except Unreachable:
        return None
    return done.stdout if done.returncode == 0 else None


def _node_families(nodes: list[NodeState]) -> list[Family]:
    state = Family("gpulab_slurm_node_state", "1 for the Slurm state the node is in, else 0")
    responding = Family(
        "gpulab_slurm_node_responding", "1 when slurmctld hears from the node's slurmd"
    )
    drained = Family(
        "gpulab_slurm_node_gpu_health_drain",
        "1 when the node is held by the GPU health check (its reason starts gpulab-health:)",
    )
    for node in nodes:
        for name in sorted({*NODE_STATES, node.state}):
            state.add(1 if name == node.state else 0, node=node.node, state=name)
        responding.add(1 if node.responding else 0, node=node.node)
        drained.add(1 if node.reason.startswith(HEALTH_DRAIN_PREFIX) else 0, node=node.node)
    return [state, responding, drained]


def _job_families(partitions: list[str], jobs: list[QueuedJob], now: float) -> list[Family]:
    counts = {(p, s): 0 for p in partitions for s in JOB_STATES}
    waits = dict.fromkeys(partitions, 0.0)
    for job in jobs:
        for partition in job.partitions:
            counts[partition, job.state] = counts.get((partition, job.state), 0) + 1
            if job.state == "pending" and job.submitted is not None:
                waits[partition] = max(waits.get(partition, 0.0), now - job.submitted)
    jobs_family = Family(
        "gpulab_slurm_jobs", "Jobs (array tasks one by one) per partition and state"
    )
    for (partition, state), count in sorted(counts.items()):
        jobs_family.add(count, partition=partition, state=state)
    wait_family = Family(
        "gpulab_slurm_pending_job_longest_wait_seconds",
        "How long the longest-waiting pending job of the partition has waited (0: none pending)",
    )
    for partition, wait in sorted(waits.items()):
        wait_family.add(round(max(wait, 0.0), 3), partition=partition)
    return [jobs_family, wait_family]


def collect(run: Runner, now: Callable[[], float] = time.time) -> list[Family]:
    """Slurm's metrics; `gpulab_slurm_up` 0 (and nothing else) when slurmctld did not answer."""
    up = Family("gpulab_slurm_up", "1 when sinfo and squeue answered")
    node_text = _read(run, sinfo_nodes_argv())
    partition_text = _read(run, sinfo_partitions_argv())
    job_text = _read(run, squeue_all_argv())
    if node_text is None or partition_text is None or job_text is None:
        return [up.add(0)]
    partitions = parse_partition_names(partition_text)
    return [
        up.add(1),
        *_node_families(parse_node_states(node_text)),
        *_job_families(partitions, parse_queued_jobs(job_text), now()),
    ]
