"""The GPU health check: configured in Slurm, passes on every healthy worker, drains none."""

from __future__ import annotations

import json
import shlex

from conftest import Cluster
from gpulab.submit.slurm_client import parse_node_states, sinfo_nodes_argv
from testinfra.host import Host

PROGRAM_DEFAULT = "/usr/local/sbin/gpulab-healthcheck"


def _program(cluster: Cluster) -> str:
    return str(cluster.var("slurm_health_check_program", PROGRAM_DEFAULT))


def test_slurm_runs_the_health_check(cluster: Cluster, controller: Host) -> None:
    config = controller.check_output("scontrol show config")
    settings = dict(
        (key.strip(), value.strip())
        for key, _, value in (line.partition("=") for line in config.splitlines())
    )
    assert settings["HealthCheckProgram"] == _program(cluster)
    assert (
        settings["HealthCheckInterval"] == f"{cluster.var('slurm_health_check_interval', 300)} sec"
    )


def test_the_program_passes_on_a_healthy_worker(cluster: Cluster, worker: str) -> None:
    node = cluster.node(worker)
    program = node.file(_program(cluster))
    assert program.is_file and program.user == "root" and program.mode == 0o755
    # As slurmd runs it: as root, with an empty environment but SLURMD_NODENAME.
    name = cluster.node_name(worker)
    done = node.run(f"env -i SLURMD_NODENAME={name} {program.path}")
    assert (done.rc, done.stdout) == (0, ""), done.stdout + done.stderr
    health = node.run("gpulab health --json")
    assert health.rc == 0, health.stderr
    assert json.loads(health.stdout)["ok"] is True


def test_no_worker_is_drained_by_the_check(cluster: Cluster, controller: Host) -> None:
    for node in parse_node_states(controller.check_output(shlex.join(sinfo_nodes_argv()))):
        assert not node.reason.startswith("gpulab-health:"), f"{node.node}: {node.reason}"
        assert "drain" not in node.state, f"{node.node} is {node.state}: {node.reason}"
