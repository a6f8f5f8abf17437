"""Slurm's commands run through a Transport: submit, follow, read the end of and cancel a job.

The argv and the reading of the output are slurm_client's (shared with the collection); this
adds what running them needs: the answers of an unreachable controller, and which command to
ask when. Progress comes from `squeue --json`; the end from `scontrol show job -o`, or `sacct`
(needs slurmdbd) once the controller has forgotten the job.
"""

from __future__ import annotations

from collections.abc import Sequence

from gpulab.submit import slurm_client
from gpulab.submit.slurm_client import JobState
from gpulab.submit.transport import CommandResult, Transport, Unreachable

# Messages of a controller that cannot be reached, as opposed to a refused request.
_UNREACHABLE_HINTS = (
    "Unable to contact slurm controller",
    "Socket timed out",
    "Connection refused",
)


class SubmitRejected(ValueError):
    """sbatch refused the job (an unknown partition or node, for example): exit 2."""


class GarbledOutput(Unreachable):
    """A Slurm command answered with output that cannot be read (exit 3 when it persists);
    a single such answer says nothing about the job, so waiting polls again."""


def _check_reachable(result: CommandResult, where: str) -> None:
    message = result.stderr.strip() or result.stdout.strip()
    if any(hint in message for hint in _UNREACHABLE_HINTS):
        raise Unreachable(f"{result.argv[0]} on {where}: {_last_line(message)}")


def _last_line(text: str) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return lines[-1] if lines else "(no message)"


def submit_job(transport: Transport, argv: Sequence[str]) -> str:
    """Run sbatch --parsable; the job id (a federated "ID;CLUSTER" answer gives ID)."""
    result = transport.run(argv)
    if result.returncode != 0:
        _check_reachable(result, transport.where)
        reason = _last_line(result.stderr).removeprefix("sbatch: error: ")
        raise SubmitRejected(f"sbatch refused the job: {reason}")
    try:
        return slurm_client.parse_job_id(result.stdout)
    except ValueError:
        raise Unreachable(
            f"sbatch on {transport.where} answered {result.stdout.strip()!r}"
        ) from None


def partition_gpus(transport: Transport, partition: str | None) -> int:
    """The most GPUs (GPU GRES) a node of the partition has; the default partition's when
    partition is None. 0 for a partition without GPUs, or one sinfo does not know."""
    result = transport.run(slurm_client.sinfo_gres_argv(partition))
    if result.returncode != 0:
        _check_reachable(result, transport.where)
        raise Unreachable(f"sinfo on {transport.where}: {_last_line(result.stderr)}")
    return slurm_client.partition_gpu_count(result.stdout, partition)


def queue_state(transport: Transport, job_id: str) -> JobState | None:
    """The job's state from squeue; None once it has left the queue. GarbledOutput when
    squeue's answer is no JSON (empty, truncated)."""
    result = transport.run(slurm_client.squeue_json_argv(job_id))
    if result.returncode != 0:
        _check_reachable(result, transport.where)
        if "Invalid job id" in result.stderr:
            return None
        raise Unreachable(f"squeue on {transport.where}: {_last_line(result.stderr)}")
    try:
        return slurm_client.parse_squeue_json(result.stdout, job_id)
    except ValueError as exc:
        raise GarbledOutput(f"{exc} (on {transport.where})") from None


def last_state(transport: Transport, job_id: str) -> JobState | None:
    """What the controller's memory of recent jobs (MinJobAge), else accounting (slurmdbd)
    says of the job, a final state first; None when neither has any record of it."""
    scontrol = transport.run(slurm_client.scontrol_job_argv(job_id))
    known = None
    if scontrol.returncode == 0:
        known = slurm_client.parse_scontrol(scontrol.stdout)
        if known is not None and known.finished:
            return known
    sacct = transport.run(slurm_client.sacct_argv(job_id))
    if sacct.returncode == 0:
        recorded = slurm_client.parse_sacct(sacct.stdout, job_id)
        if recorded is not None and (recorded.finished or known is None):
            return recorded
    return known


def cancel(transport: Transport, job_id: str) -> None:
    """scancel the job (a job that already ended is not an error)."""
    transport.run(["scancel", job_id])
