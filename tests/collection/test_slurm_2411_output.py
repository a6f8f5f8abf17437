"""The job parsers on output captured from Slurm 24.11 (Debian 13, molecule/debian13).

fixtures/slurm-24.11/: `sbatch --parsable`, `squeue --noheader --format='%i %T'`,
`scontrol show job -o` of a running, a completed and a failed job, and
`sacct -n -P -X -o JobID,State,ExitCode,ElapsedRaw,NodeList` of the completed one.
"""

from __future__ import annotations

from pathlib import Path

from ansible_collections.gpulab.cluster.plugins.module_utils.slurm_jobs import (
    parse_job_id,
    parse_sacct_job,
    parse_scontrol_job,
    parse_squeue,
)

FIXTURES = Path(__file__).parent / "fixtures" / "slurm-24.11"


def _read(name: str) -> str:
    return (FIXTURES / name).read_text()


def test_sbatch_job_id() -> None:
    assert parse_job_id(_read("sbatch-parsable.txt")) == "1"


def test_squeue_running_job() -> None:
    assert parse_squeue(_read("squeue-running.txt")) == [("1", "RUNNING")]


def test_scontrol_running_job() -> None:
    info = parse_scontrol_job("1", _read("scontrol-job-running.txt"))
    assert (info.job_id, info.state, info.finished, info.nodes) == (
        "1",
        "RUNNING",
        False,
        "worker1",
    )
    assert info.stdout_path == "/tmp/fx-1.out"


def test_scontrol_completed_job() -> None:
    info = parse_scontrol_job("1", _read("scontrol-job-completed.txt"))
    assert (info.state, info.exit_code, info.signal, info.elapsed, info.nodes) == (
        "COMPLETED",
        0,
        0,
        21,
        "worker1",
    )
    assert info.finished


def test_scontrol_failed_job() -> None:
    info = parse_scontrol_job("2", _read("scontrol-job-failed.txt"))
    assert (info.state, info.exit_code, info.signal, info.nodes) == ("FAILED", 3, 0, "worker2")
    assert info.stdout_path == "/tmp/fx-2.out"


def test_sacct_completed_job() -> None:
    info = parse_sacct_job("1", _read("sacct-completed.txt"))
    assert info is not None
    assert (info.state, info.exit_code, info.elapsed, info.nodes) == ("COMPLETED", 0, 21, "worker1")
