"""Slurm's metrics from sinfo and squeue output in the formats gpulab.metrics.slurm asks for."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from gpulab.metrics import render
from gpulab.metrics import slurm as slurm_metrics
from gpulab.submit import slurm_client
from gpulab.submit.transport import CommandResult, Unreachable

from tests.metrics.promtext import labels, parse

NODES = (
    "worker1|idle|none\n"
    "worker2|drained|gpulab-health: saxpy: 3 of 1024 elements wrong (device 0)\n"
    "worker3|down*|Not responding\n"
    "worker1|idle|none\n"  # worker1 again, listed for its second partition
    "worker4|mixed-|none\n"
)
PARTITIONS = "debug\njetson\nempty\n"
NOW = datetime(2026, 12, 3, 20, 0, 0).timestamp()
JOBS = (
    "jetson|RUNNING|2026-12-03T19:50:00\n"
    "jetson|PENDING|2026-12-03T19:59:00\n"
    "jetson|PENDING|2026-12-03T19:40:00\n"
    "debug,jetson|PENDING|2026-12-03T19:58:00\n"
    "debug|COMPLETING|2026-12-03T19:30:00\n"
)


def runner(outputs: dict[str, str | None]) -> slurm_metrics.Runner:
    """Answers each command with its output; None: the command exits 1 (slurmctld down)."""

    def run(argv: Sequence[str]) -> CommandResult:
        key = " ".join(argv)
        if key not in outputs:
            raise Unreachable(f"{argv[0]}: not found")
        out = outputs[key]
        return CommandResult(tuple(argv), 1 if out is None else 0, out or "", "")

    return run


def answers(nodes: str | None = NODES, jobs: str | None = JOBS) -> dict[str, str | None]:
    return {
        " ".join(slurm_client.sinfo_nodes_argv()): nodes,
        " ".join(slurm_client.sinfo_partitions_argv()): PARTITIONS,
        " ".join(slurm_client.squeue_all_argv()): jobs,
    }


def collected(outputs: dict[str, str | None]) -> dict[str, dict[frozenset[tuple[str, str]], float]]:
    samples, _ = parse(render(slurm_metrics.collect(runner(outputs), now=lambda: NOW)))
    return samples


def test_each_node_has_one_state_set_to_1_and_the_others_0() -> None:
    samples = collected(answers())
    states = samples["gpulab_slurm_node_state"]
    current = sorted(key for key, value in states.items() if value == 1)
    assert current == sorted(
        [
            labels(node="worker1", state="idle"),
            labels(node="worker2", state="drained"),
            labels(node="worker3", state="down"),
            labels(node="worker4", state="mixed"),
        ]
    )
    # Every node carries every base state, so a change never makes a series vanish.
    assert len(states) == 4 * len(slurm_metrics.NODE_STATES)


def test_responding_and_the_health_check_drain_per_node() -> None:
    samples = collected(answers())
    assert samples["gpulab_slurm_node_responding"] == {
        labels(node="worker1"): 1,
        labels(node="worker2"): 1,
        labels(node="worker3"): 0,
        labels(node="worker4"): 1,
    }
    drained = samples["gpulab_slurm_node_gpu_health_drain"]
    assert {dict(k)["node"] for k, v in drained.items() if v == 1} == {"worker2"}


def test_jobs_per_partition_and_state_with_empty_partitions_at_0() -> None:
    jobs = collected(answers())["gpulab_slurm_jobs"]
    assert jobs == {
        labels(partition="debug", state="pending"): 1,
        labels(partition="debug", state="running"): 0,
        labels(partition="debug", state="completing"): 1,
        labels(partition="empty", state="pending"): 0,
        labels(partition="empty", state="running"): 0,
        labels(partition="jetson", state="pending"): 3,
        labels(partition="jetson", state="running"): 1,
    }


def test_the_longest_wait_of_a_pending_job_per_partition() -> None:
    waits = collected(answers())["gpulab_slurm_pending_job_longest_wait_seconds"]
    assert waits == {
        labels(partition="debug"): 120,
        labels(partition="empty"): 0,
        labels(partition="jetson"): 1200,  # the 19:40 job; the running one does not count
    }


def test_an_unreachable_slurmctld_gives_slurm_up_0_and_nothing_else() -> None:
    assert collected(answers(jobs=None)) == {"gpulab_slurm_up": {labels(): 0}}
    assert collected({}) == {"gpulab_slurm_up": {labels(): 0}}
    assert collected(answers())["gpulab_slurm_up"] == {labels(): 1}


def test_output_captured_from_slurm_22_05() -> None:
    """The three commands' output as Slurm 22.05 printed it on Debian 12 (the monitoring role's
    test containers; submit times moved before the test's clock): a node being drained by the
    health check while one job ran and two waited."""
    samples = collected(
        {
            " ".join(slurm_client.sinfo_nodes_argv()): (
                "mon-worker|draining|gpulab-health: saxpy: 3 of 1024 elements wrong (device 0)\n"
            ),
            " ".join(slurm_client.sinfo_partitions_argv()): "main\n",
            " ".join(slurm_client.squeue_all_argv()): (
                "main|PENDING|2026-12-03T19:58:07\n"
                "main|PENDING|2026-12-03T19:59:07\n"
                "main|RUNNING|2026-12-03T19:57:07\n"
            ),
        }
    )
    state = samples["gpulab_slurm_node_state"]
    assert [dict(k)["state"] for k, v in state.items() if v == 1] == ["draining"]
    assert samples["gpulab_slurm_node_gpu_health_drain"] == {labels(node="mon-worker"): 1}
    assert samples["gpulab_slurm_jobs"] == {
        labels(partition="main", state="pending"): 2,
        labels(partition="main", state="running"): 1,
    }
    assert samples["gpulab_slurm_pending_job_longest_wait_seconds"] == {
        labels(partition="main"): 113
    }
