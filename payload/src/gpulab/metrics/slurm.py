"""What Slurm is doing, as metrics: each node's state, jobs per partition and state, the longest
wait of a pending job.

Read from `sinfo` and `squeue` on any host with Slurm's client commands and a MUNGE key (the
controller or a worker); the commands run through a `Runner`, so the tests feed captured output.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime

from gpulab.metrics.exposition import Family
from gpulab.submit.transport import CommandResult, Unreachable

Runner = Callable[[Sequence[str]], CommandResult]

# One line per node and partition: name, long state (with flags such as "*" not responding),
# reason (may hold anything but a newline, hence last).
SINFO_NODES = ["sinfo", "--noheader", "--Node", "--format=%N|%T|%E"]
# Every partition's name, also those without nodes or jobs.
SINFO_PARTITIONS = ["sinfo", "--noheader", "--format=%R"]
# One line per job (array tasks one by one): partitions, state, submit time (local time).
SQUEUE_JOBS = ["squeue", "--noheader", "--all", "--array", "--format=%P|%T|%V"]

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
_STATE = re.compile(r"^([a-z_]+)")


@dataclass(frozen=True)
class NodeState:
    """One node as sinfo reports it."""

    node: str
    state: str
    responding: bool
    reason: str


def parse_nodes(text: str) -> list[NodeState]:
    """sinfo's node lines, one entry per node (a node in several partitions appears once)."""
    nodes: dict[str, NodeState] = {}
    for line in text.splitlines():
        fields = line.split("|", 2)
        if len(fields) < 2 or not fields[0]:
            continue
        long_state = fields[1].strip().lower()
        base = _STATE.match(long_state)
        reason = fields[2].strip() if len(fields) > 2 else ""
        nodes.setdefault(
            fields[0],
            NodeState(
                node=fields[0],
                state=base.group(1) if base else "unknown",
                responding="*" not in long_state,
                reason="" if reason == "none" else reason,
            ),
        )
    return list(nodes.values())


@dataclass(frozen=True)
class Job:
    """One job (or array task) in squeue: the partitions it may run in, state, submit time."""

    partitions: tuple[str, ...]
    state: str
    submitted: float | None


def _timestamp(text: str) -> float | None:
    """squeue's %V (local time, ISO 8601) as seconds since the epoch; None when unset."""
    try:
        return datetime.fromisoformat(text.strip()).timestamp()
    except ValueError:
        return None


def parse_jobs(text: str) -> list[Job]:
    """squeue's job lines; a pending job that names several partitions is in each of them."""
    jobs = []
    for line in text.splitlines():
        fields = line.split("|")
        if len(fields) != 3 or not fields[0]:
            continue
        partitions = tuple(p for p in fields[0].split(",") if p)
        jobs.append(Job(partitions, fields[1].strip().lower(), _timestamp(fields[2])))
    return jobs


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


def _job_families(partitions: list[str], jobs: list[Job], now: float) -> list[Family]:
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
    node_text = _read(run, SINFO_NODES)
    partition_text = _read(run, SINFO_PARTITIONS)
    job_text = _read(run, SQUEUE_JOBS)
    if node_text is None or partition_text is None or job_text is None:
        return [up.add(0)]
    partitions = sorted({line.strip() for line in partition_text.splitlines() if line.strip()})
    return [
        up.add(1),
        *_node_families(parse_nodes(node_text)),
        *_job_families(partitions, parse_jobs(job_text), now()),
    ]
