"""Jobs submitted with sbatch and with the gpulab.cluster.slurm_job module run on each
worker, and accounting records them when it is enabled."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
from conftest import Cluster
from testinfra.host import Host

OUTPUT = "/tmp/gpulab-test-%j.out"


def _scontrol_job(controller: Host, job_id: str) -> dict[str, str]:
    out = controller.check_output("scontrol --oneliner show job %s", job_id)
    return dict(field.split("=", 1) for field in out.split() if "=" in field)


def _check_output_file(cluster: Cluster, worker: str, job_id: str) -> None:
    # Job output lands on the node that ran the job.
    out = cluster.node(worker).file(OUTPUT.replace("%j", job_id))
    assert out.is_file, f"no output {out.path} on {worker}"
    assert out.content_string.strip() == cluster.node_name(worker)


def _check_accounting(cluster: Cluster, controller: Host, job_id: str, eventually: Any) -> None:
    if not cluster.var("slurm_accounting_enabled", False):
        pytest.skip("slurm_accounting_enabled is false")

    def record() -> str:
        return str(
            controller.check_output(
                "sacct --noheader --allocations --parsable2 --format=JobID,State,ExitCode -j %s",
                job_id,
            )
        )

    assert eventually(lambda: "COMPLETED" in record(), timeout=60), f"sacct: {record()!r}"
    assert record().splitlines()[0] == f"{job_id}|COMPLETED|0:0"


def test_sbatch_job_completes_on_worker(
    cluster: Cluster, controller: Host, worker: str, eventually: Any
) -> None:
    # --wait: sbatch returns when the job ends, with the job's exit code.
    node = cluster.node_name(worker)
    job_id = controller.check_output(
        "sbatch --parsable --wait --nodelist=%s --output=%s --wrap=hostname", node, OUTPUT
    ).splitlines()[0]
    job = _scontrol_job(controller, job_id)
    assert (job["JobState"], job["ExitCode"], job["NodeList"]) == ("COMPLETED", "0:0", node)
    _check_output_file(cluster, worker, job_id)
    _check_accounting(cluster, controller, job_id, eventually)


def _slurm_job(cluster: Cluster, args: dict[str, Any], tree: Path) -> dict[str, Any]:
    """Runs the module ad hoc on the controller; returns its result (--tree writes it)."""
    env = {k: v for k, v in os.environ.items() if k != "GPULAB_TIMINGS_FILE"}
    run = subprocess.run(
        ["ansible", cluster.controller, "-i", cluster.inventory, "--tree", str(tree),
         "-m", "gpulab.cluster.slurm_job", "-a", json.dumps(args)],
        capture_output=True, text=True, env=env, check=False,
    )  # fmt: skip
    report = tree / cluster.controller
    assert report.is_file(), f"ansible gave no result: {run.stdout}{run.stderr}"
    result: dict[str, Any] = json.loads(report.read_text())
    assert run.returncode == 0, f"slurm_job failed: {result.get('msg', result)}"
    return result


def test_slurm_job_module_completes_on_worker(
    cluster: Cluster, controller: Host, worker: str, eventually: Any, tmp_path: Path
) -> None:
    node = cluster.node_name(worker)
    args = {"command": "hostname", "nodelist": node, "output": OUTPUT, "wait": True}
    result = _slurm_job(cluster, args, tmp_path)
    assert result["changed"]
    assert (result["state"], result["exit_code"], result["nodes"]) == ("COMPLETED", 0, node)
    assert result["output_path"] == OUTPUT.replace("%j", result["job_id"])
    _check_output_file(cluster, worker, result["job_id"])
    _check_accounting(cluster, controller, result["job_id"], eventually)


def test_one_line_job_round_trip(
    cluster: Cluster, controller: Host, timings: dict[str, float]
) -> None:
    """Times `srun hostname` on the controller itself (no podman exec in the figure)."""
    worker = cluster.node_name(cluster.workers[0])
    out = controller.check_output(
        "start=$(date +%%s%%N); host=$(srun --nodes=1 --nodelist=%s hostname); "
        'end=$(date +%%s%%N); echo "$host $(( (end - start) / 1000000 ))"',
        worker,
    )
    host, millis = out.split()
    assert host == worker
    timings["job_round_trip"] = seconds = int(millis) / 1000
    print(f"\none-line Slurm job round trip (srun hostname on {worker}): {seconds:.2f} s")
