"""GPU sharing: the Jetson stand-in offers its GPU as shards (slurm_gpu_shards), and as many jobs
as it has shards run on it at the same time, each computing and each saying it shares the GPU."""

from __future__ import annotations

import json
import re
import shlex
import time
import uuid
from pathlib import Path
from typing import Any

from conftest import Cluster
from testinfra.host import Host

# A small graph each job runs with --compare cpu (the stand-in computes on lavapipe).
GRAPH = {
    "version": 1,
    "name": "shard-job",
    "inputs": {
        "x": {"type": "vector", "random": {"n": 65536, "seed": 3}},
        "y": {"type": "vector", "random": {"n": 65536, "seed": 4}},
    },
    "nodes": [
        {"id": "s", "op": "saxpy", "inputs": {"a": 2.0, "x": "x", "y": "y"}},
        {"id": "n", "op": "l2_norm", "inputs": {"x": "s"}},
    ],
    "outputs": ["s", "n"],
}

# The job that shares the GPU (it waits for the others, then runs graph.json; its header says more).
JOB = Path(__file__).resolve().parents[3] / "scripts/gpu-host/shard-job.sh"


def _job_states(controller: Host, job_ids: list[str]) -> dict[str, str]:
    out = controller.check_output(
        "squeue --noheader --states=all --format='%%i %%T' --jobs=%s", ",".join(job_ids)
    )
    return dict(line.split() for line in out.splitlines() if line.strip())


def _shards(cluster: Cluster, standin: str) -> int:
    """slurm_gpu_shards as the stand-in sees it (inventory/lab/group_vars/jetson_standin.yml)."""
    return int(cluster.hostvars[standin].get("slurm_gpu_shards", 0))


def test_shards_are_offered(cluster: Cluster, controller: Host, standin: str) -> None:
    shards = _shards(cluster, standin)
    assert shards >= 2, (
        "the stand-in offers no shards (inventory/lab/group_vars/jetson_standin.yml)"
    )
    shown = controller.check_output("scontrol show node %s", cluster.node_name(standin))
    # Slurm types the shards after their GPU: shard:2 in nodes.conf shows as shard:orin:2.
    assert re.search(rf"\bGres=gpu:orin:1,shard:(orin:)?{shards}\b", shown), shown
    gres_conf = cluster.node(standin).file("/etc/slurm/gres.conf").content_string
    assert f"NodeName={cluster.node_name(standin)} Name=shard Count={shards} File=" in gres_conf


def test_shard_jobs_share_the_gpu_at_once(
    cluster: Cluster, controller: Host, standin: str, timings: dict[str, float]
) -> None:
    jobs = _shards(cluster, standin)
    assert jobs >= 2, "the stand-in offers fewer than two shards"
    user = cluster.var("identity_users")[0]["name"]
    node = cluster.node_name(standin)
    run = f"{cluster.var('nfs_client_mount_point')}/jobs/test-sharing-{uuid.uuid4().hex[:8]}"
    as_user = f"runuser -u {shlex.quote(user)} -- "  # a prefix of the command, not an argument
    controller.check_output(as_user + "mkdir -p %s", run)
    try:
        for name, text in (("graph.json", json.dumps(GRAPH)), ("job.sh", JOB.read_text())):
            controller.check_output(
                as_user + "sh -c %s", f"printf %s {shlex.quote(text)} >{run}/{name}"
            )
        started = time.monotonic()
        job_ids = [
            controller.check_output(
                as_user + "sbatch --parsable --gres=shard:1 --nodelist=%s --chdir=%s"
                " --output=%s/slurm-%%j.out %s/job.sh %s %s",
                node, run, run, run, run, str(jobs),
            ).split(";")[0]
            for _ in range(jobs)
        ]  # fmt: skip
        seen_running_together = False
        deadline = time.monotonic() + 180
        states: dict[str, str] = {}
        while time.monotonic() < deadline:
            states = _job_states(controller, job_ids)
            seen_running_together |= [states.get(j) for j in job_ids].count("RUNNING") == jobs
            if all(
                states.get(j) in {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT"} for j in job_ids
            ):
                break
            time.sleep(0.5)
        timings["shard jobs at once"] = round(time.monotonic() - started, 3)
        assert all(states.get(j) == "COMPLETED" for j in job_ids), (
            states,
            [controller.run("cat %s/slurm-%s.out", run, j).stdout for j in job_ids],
        )
        assert seen_running_together, f"never all RUNNING together: {states}"
        for job_id in job_ids:
            env = controller.check_output("cat %s/env-%s", run, job_id)
            assert "SLURM_SHARDS_ON_NODE=1" in env.splitlines(), env
            result: dict[str, Any] = json.loads(
                controller.check_output("cat %s/result-%s.json", run, job_id)
            )
            assert result["compare"]["ok"], result["compare"]
            assert result["slurm"]["job_id"] == job_id
            assert "shard" in result["device"]["chosen_by"], result["device"]
    finally:
        controller.run("rm -rf %s", run)
