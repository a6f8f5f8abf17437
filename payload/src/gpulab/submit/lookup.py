"""Finding a job by its tag when sbatch's answer was lost, before saying it failed.

sbatch may time out (slurmctld paused or busy past MessageTimeout) or lose its connection after
sending the job, and slurmctld may queue the job all the same: a user told "failed" who submits
again runs it twice. So each submission carries a tag, the name of its job folder (unique:
mktemp made it), as the job's comment, and that folder is the job's working directory. A job of
the submission's name whose comment is the tag, or whose working directory is the folder (a
site's job_submit plugin may rewrite comments), is that submission. squeue asks the controller,
ended jobs included (it keeps them for MinJobAge); sacct asks accounting (slurmdbd, where there
is one), which answers while slurmctld does not but learns of a job only from slurmctld: only
squeue can say that there is no such job.
"""

from __future__ import annotations

import posixpath
import shlex
import time
from collections.abc import Callable
from dataclasses import dataclass

from gpulab.submit import slurm, slurm_client
from gpulab.submit.slurm_client import TaggedJob
from gpulab.submit.transport import Transport, Unreachable

# How long a controller that does not answer is asked again (each squeue itself waits for
# MessageTimeout, 10 s by default) before gpulab says it cannot tell.
LOOKUP_PATIENCE_S = 60.0
LOOKUP_GAP_S = 3.0
# Looks in a row whose squeue answers without the job before "nothing was queued": slurmctld
# resuming handles sbatch's waiting request and the first look concurrently.
ABSENT_LOOKS = 2


class NothingQueued(Unreachable):
    """sbatch's answer was lost and Slurm has no job with the submission's tag (exit 3)."""


class MaybeQueued(Unreachable):
    """sbatch's answer was lost and the controller did not answer in time: the job may have
    been queued (exit 3); the message says how to check."""


@dataclass(frozen=True)
class JobTag:
    """What marks one submission in Slurm: its job name (every submission of the graph has
    it) and its job folder, whose name is the tag."""

    job_name: str
    job_dir: str

    @property
    def tag(self) -> str:
        """The job folder's name: the job's comment."""
        return posixpath.basename(self.job_dir)

    def marks(self, job: TaggedJob) -> bool:
        """Whether the job is this submission."""
        return job.comment == self.tag or job.work_dir == self.job_dir

    @property
    def check_command(self) -> str:
        """The command, as gpulab runs it, that lists the submission's jobs."""
        return shlex.join(slurm_client.squeue_tagged_argv(self.job_name))


def _queued(transport: Transport, tag: JobTag) -> list[TaggedJob]:
    """The controller's jobs with the tag; Unreachable when it does not answer or its answer
    cannot be read."""
    result = transport.run(slurm_client.squeue_tagged_argv(tag.job_name))
    if result.returncode != 0:
        slurm.check_reachable(result, transport.where)
        raise Unreachable(f"squeue on {transport.where}: {slurm.last_line(result.stderr)}")
    try:
        jobs = slurm_client.parse_tagged_jobs(result.stdout)
    except ValueError as exc:
        raise Unreachable(f"squeue on {transport.where}: {exc}") from None
    return [job for job in jobs if tag.marks(job)]


def _accounted(transport: Transport, tag: JobTag) -> list[TaggedJob]:
    """Accounting's jobs with the tag; none where there is no accounting or no answer."""
    try:
        result = transport.run(slurm_client.sacct_tagged_argv(tag.job_name))
        jobs = slurm_client.parse_tagged_jobs(result.stdout) if result.returncode == 0 else []
    except (Unreachable, ValueError):
        return []
    return [job for job in jobs if tag.marks(job)]


def find_job(
    transport: Transport,
    tag: JobTag,
    lost: slurm.AnswerLost,
    progress: Callable[[str], None],
    *,
    patience_s: float = LOOKUP_PATIENCE_S,
    gap_s: float = LOOKUP_GAP_S,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> str | None:
    """The id of the job with the tag, looked for after sbatch's answer was lost (`lost`
    says how); None when the controller answered ABSENT_LOOKS times in a row without it.
    MaybeQueued when it did not answer for patience_s."""
    progress(
        f"sbatch's answer was lost ({lost}); looking for the job by its tag {tag.tag} "
        f"for up to {patience_s:g} s"
    )
    deadline = clock() + patience_s
    absent = 0
    silence = ""
    while True:
        try:
            found = _queued(transport, tag)
        except Unreachable as exc:
            found, absent, silence = [], 0, str(exc)
        else:
            absent = 0 if found else absent + 1
        found = found or _accounted(transport, tag)
        if found:
            job = min(found, key=lambda j: int(j.job_id.split("_", 1)[0]))
            progress(
                f"found job {job.job_id} ({job.state}) by its tag {tag.tag}: it was queued, "
                "though sbatch's answer was lost"
            )
            return job.job_id
        if absent >= ABSENT_LOOKS:
            return None
        if not absent and clock() >= deadline:
            raise MaybeQueued(
                f"sbatch's answer was lost ({lost}) and the controller still did not answer "
                f"after {patience_s:g} s ({silence}): the job MAY have been queued, tagged "
                f"{tag.tag} (its comment; its folder {tag.job_dir}). Check before submitting "
                f"again: {tag.check_command}"
            )
        sleep(gap_s)
