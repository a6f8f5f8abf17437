"""Slurm's commands run through a Transport: submit, follow, read the end of and cancel a job.

The argv, the reading of the output, what an unreachable controller answers, a job's last state
and cancelling are slurm_client's (shared with the collection's modules); this adds the
exceptions `gpulab submit` turns into its exit codes, and which command to ask when. Progress
comes from `squeue --json`; the end from `scontrol show job -o`, or `sacct` (needs slurmdbd)
once the controller has forgotten the job.
"""

from __future__ import annotations

from collections.abc import Sequence

from gpulab.submit import slurm_client
from gpulab.submit.slurm_client import JobState, SlurmClient, says_unreachable
from gpulab.submit.transport import CommandResult, ConnectionLost, Transport, Unreachable


class SubmitRejected(ValueError):
    """sbatch refused the job (an unknown partition or node, for example): exit 2."""


class AnswerLost(Unreachable):
    """sbatch's answer did not come back (it timed out, the controller or the connection
    failed while it ran, its output was no job id): the job may have been queued, or not."""


class GarbledOutput(Unreachable):
    """A Slurm command answered with output that cannot be read (exit 3 when it persists);
    a single such answer says nothing about the job, so waiting polls again."""


def check_reachable(result: CommandResult, where: str) -> None:
    """Unreachable, with the command's last line, when it says the controller did not answer."""
    if says_unreachable(result):
        message = result.stderr.strip() or result.stdout.strip()
        raise Unreachable(f"{result.argv[0]} on {where}: {last_line(message)}")


def last_line(text: str) -> str:
    """The last line that is not blank, for one-line messages."""
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return lines[-1] if lines else "(no message)"


def submit_job(transport: Transport, argv: Sequence[str]) -> str:
    """Run sbatch --parsable; the job id (a federated "ID;CLUSTER" answer gives ID).
    SubmitRejected when sbatch refused the job, AnswerLost when its answer was lost."""
    try:
        result = transport.run(argv)
    except ConnectionLost as lost:
        raise AnswerLost(str(lost)) from None
    if result.returncode != 0:
        reason = slurm_client.sbatch_refusal(result)
        if says_unreachable(result):
            # "Socket timed out": slurmctld may yet take the request it was sent.
            raise AnswerLost(f"sbatch on {transport.where}: {reason}")
        raise SubmitRejected(f"sbatch refused the job: {reason}")
    try:
        return slurm_client.parse_job_id(result.stdout)
    except ValueError:
        # Exit status 0: sbatch says it submitted; only the id is missing.
        raise AnswerLost(
            f"sbatch on {transport.where} answered {result.stdout.strip()!r}"
        ) from None


def partition_gpus(transport: Transport, partition: str | None) -> int:
    """The most GPUs (GPU GRES) a node of the partition has; the default partition's when
    partition is None. 0 for a partition without GPUs, or one sinfo does not know."""
    result = transport.run(slurm_client.sinfo_gres_argv(partition))
    if result.returncode != 0:
        check_reachable(result, transport.where)
        raise Unreachable(f"sinfo on {transport.where}: {last_line(result.stderr)}")
    return slurm_client.partition_gpu_count(result.stdout, partition)


def queue_state(transport: Transport, job_id: str) -> JobState | None:
    """The job's state from squeue; None once it has left the queue. GarbledOutput when
    squeue's answer is no JSON (empty, truncated)."""
    result = transport.run(slurm_client.squeue_json_argv(job_id))
    if result.returncode != 0:
        check_reachable(result, transport.where)
        if "Invalid job id" in result.stderr:
            return None
        raise Unreachable(f"squeue on {transport.where}: {last_line(result.stderr)}")
    try:
        return slurm_client.parse_squeue_json(result.stdout, job_id)
    except ValueError as exc:
        raise GarbledOutput(f"{exc} (on {transport.where})") from None


def last_state(transport: Transport, job_id: str) -> JobState | None:
    """What the controller's memory of recent jobs (MinJobAge), else accounting (slurmdbd)
    says of the job, a final state first; None when neither has any record of it
    (SlurmClient.last_state, which the collection's slurm_job shares)."""
    return SlurmClient(transport.run).last_state(job_id)


def cancel(transport: Transport, job_id: str) -> None:
    """scancel the job (a job that already ended is not an error)."""
    SlurmClient(transport.run).cancel([job_id])
