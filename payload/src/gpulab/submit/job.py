"""A graph's journey through Slurm: stage and submit, wait with progress, fetch the result."""

from __future__ import annotations

import contextlib
import json
import posixpath
import shlex
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

from gpulab.submit import lookup, slurm, slurm_client
from gpulab.submit.defaults import DEFAULT_SHARED_DIR
from gpulab.submit.lookup import JobTag, NothingQueued
from gpulab.submit.slurm_client import JobState
from gpulab.submit.staging import StagedGraph, safe_name, upload
from gpulab.submit.transport import Transport, Unreachable

# Lines of the job's stderr shown when it fails.
STDERR_TAIL_LINES = 20
# The backends that compute on a GPU when the job is given one (auto falls back to cpu).
GPU_BACKENDS = ("auto", "vulkan")
# Polls in a row with no record of the job anywhere before waiting gives up on it: Slurm
# knows a submitted job at once, and an ended one for MinJobAge (300 s) or in accounting.
FORGOTTEN_POLLS = 15
# Polls in a row of unreadable squeue output before waiting gives up.
GARBLED_POLLS = 5
# The shortest gap between two polls of a job Slurm knows (slurm_client.poll_gap: a quarter
# of the time waited, up to poll_s), so a short job's end is seen within half a second and a
# long one costs a poll every poll_s (each poll is an SSH command on the controller: 50 clients
# waiting at once start at 100 a second, not 200 as the collection's slurm_job, which runs
# on the controller, would). A job Slurm does not know, or output that cannot be read, is
# polled every poll_s, so the two limits above keep their length in seconds.
FIRST_POLL_S = 0.5


class JobFailed(RuntimeError):
    """The job ended without a result (exit 4); the message says how and shows its stderr."""


class WaitTimedOut(RuntimeError):
    """The job did not end in time (exit 4); it has been cancelled."""


class JobForgotten(JobFailed):
    """squeue, scontrol and sacct all have no record of the job (exit 4 without a result)."""


@dataclass(frozen=True)
class JobOptions:
    """How to run the graph: backend, where Slurm may place it, where to stage it."""

    backend: str = "auto"
    partition: str | None = None
    nodelist: str | None = None
    shared_dir: str = DEFAULT_SHARED_DIR
    gpulab: str = "gpulab"
    memory_budget: int | None = None  # bytes; the job's `gpulab run --memory-budget`
    # GPUs to request (--gres=gpu:N); None: gpus_to_request decides.
    gpus: int | None = None
    # Shards of one GPU, shared with other jobs, to request instead (--gres=shard:N).
    shards: int | None = None

    def __post_init__(self) -> None:
        if self.gpus is not None and self.shards is not None:
            raise ValueError("JobOptions: gpus and shards exclude each other")
        if self.shards is not None and self.shards < 1:
            raise ValueError(f"JobOptions: shards must be 1 or more, not {self.shards}")


@dataclass(frozen=True)
class SubmittedJob:
    """A submitted job and the paths of its files on the shared storage."""

    job_id: str
    job_dir: str
    graph: str
    result: str
    stdout: str
    stderr: str
    gres: str = ""  # what the job asked Slurm for, e.g. "gpu:1" or "shard:1"; "" for none

    @property
    def tag(self) -> str:
        """The job folder's name, the job's comment in Slurm: finds the job (lookup)."""
        return posixpath.basename(self.job_dir)

    def to_json(self) -> dict[str, str]:
        """The job id, tag and paths, as printed without --wait."""
        return asdict(self) | {"tag": self.tag}


def job_script(options: JobOptions, graph: str, result: str) -> str:
    """The batch script: one `gpulab run` of GRAPH with OPTIONS, every word quoted, unless
    RESULT exists (`gpulab run` writes it whole or not at all): then the job ran before."""
    words = [options.gpulab, "run", graph, "--backend", options.backend, "--output", result]
    if options.memory_budget is not None:
        words += ["--memory-budget", str(options.memory_budget)]
    command = shlex.join(words)
    ran_before = (
        f"gpulab: {result} exists: this job ran to its end before and Slurm started it again;"
        " not running it twice"
    )
    return (
        "#!/bin/sh\n"
        "# Written by gpulab submit.\n"
        "# A result already written means this job ran to its end before and Slurm started it\n"
        "# again (a requeue, or slurmctld back without its last seconds of state): not twice.\n"
        f"if [ -e {shlex.quote(result)} ]; then\n"
        f"  echo {shlex.quote(ran_before)} >&2\n"
        "  exit 0\n"
        "fi\n"
        f"exec {command}\n"
    )


def gpus_to_request(transport: Transport, options: JobOptions) -> int:
    """options.gpus when given; else 1 for a backend that uses a GPU on a partition (the
    default one without --partition) whose nodes have GPU GRES, else 0. Without a GRES
    request a node with cgroups (ConstrainDevices) hides its GPUs from the job. A job that
    asks for shards gets no GPU of its own: 0."""
    if options.gpus is not None:
        return options.gpus
    if options.shards is not None or options.backend not in GPU_BACKENDS:
        return 0
    return 1 if slurm.partition_gpus(transport, options.partition) > 0 else 0


def gres_to_request(transport: Transport, options: JobOptions) -> str:
    """sbatch's --gres value: `shard:N` for shards, else `gpu:N` (gpus_to_request), or ""
    for none."""
    if options.shards is not None:
        return f"shard:{options.shards}"
    gpus = gpus_to_request(transport, options)
    return f"gpu:{gpus}" if gpus > 0 else ""


def _make_job_dir(transport: Transport, shared_dir: str, name: str) -> str:
    template = posixpath.join(shared_dir, f"{safe_name(name)}.XXXXXXXX")
    made = transport.run(["mktemp", "-d", template])
    if made.returncode != 0:
        reason = made.stderr.strip().rpartition(": ")[2] or "mktemp failed"
        raise Unreachable(
            f"cannot create a job directory in {shared_dir} on {transport.where} ({reason}); "
            "pass --shared-dir: a writable directory of the shared storage"
        )
    return made.stdout.strip()


def _remove_job_dir(transport: Transport, job_dir: str) -> None:
    """Best effort: a folder half written stays only if the host cannot remove it either."""
    with contextlib.suppress(Unreachable):
        transport.run(["rm", "-rf", "--", job_dir])


def _quiet(message: str) -> None:
    del message


def submit(
    transport: Transport,
    staged: StagedGraph,
    options: JobOptions,
    progress: Callable[[str], None] = _quiet,
    *,
    lookup_patience_s: float = lookup.LOOKUP_PATIENCE_S,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> SubmittedJob:
    """Stage the graph in a new job directory and submit it with sbatch, tagged with the
    folder's name (lookup). When sbatch's answer is lost the job is looked for by its tag:
    found, it is returned as if sbatch had answered; NothingQueued (the folder removed) when
    Slurm has none; MaybeQueued when the controller does not answer for lookup_patience_s."""
    gres = gres_to_request(transport, options)
    job_dir = _make_job_dir(transport, options.shared_dir, staged.name)
    result = posixpath.join(job_dir, "result.json")
    script = posixpath.join(job_dir, "job.sh")
    try:
        graph = upload(transport, staged, job_dir)
        transport.write_file(script, job_script(options, graph, result).encode("utf-8"))
    except OSError as exc:
        _remove_job_dir(transport, job_dir)
        # OpenSSH's sftp-server reports a full disk as a bare "Failure".
        reason = exc.strerror or str(exc) or type(exc).__name__
        raise Unreachable(
            f"cannot write the job's files in {job_dir} on {transport.where} ({reason}): "
            "nothing was submitted and the folder is removed; is the shared storage full or "
            "read-only?"
        ) from None
    stdout = posixpath.join(job_dir, "slurm-%j.out")
    stderr = posixpath.join(job_dir, "slurm-%j.err")
    tag = JobTag(f"gpulab-{safe_name(staged.name)}", job_dir)
    argv = slurm_client.sbatch_argv(
        job_name=tag.job_name,
        comment=tag.tag,
        partition=options.partition,
        nodelist=options.nodelist,
        gres=gres or None,
        chdir=job_dir,
        output=stdout,
        error=stderr,
        script=script,
    )
    try:
        job_id = slurm.submit_job(transport, argv)
    except slurm.AnswerLost as lost:
        found = lookup.find_job(
            transport, tag, lost, progress, patience_s=lookup_patience_s, clock=clock, sleep=sleep
        )
        if found is None:
            # A request that slurmctld still takes late then finds no graph: nothing runs twice.
            _remove_job_dir(transport, job_dir)
            raise NothingQueued(
                f"sbatch's answer was lost ({lost}) and Slurm has no job tagged {tag.tag}: "
                "nothing was queued and its folder is removed; submit again"
            ) from None
        job_id = found
    return SubmittedJob(
        job_id,
        job_dir,
        graph,
        result,
        stdout.replace("%j", job_id),
        stderr.replace("%j", job_id),
        gres,
    )


def wait(
    transport: Transport,
    job: SubmittedJob,
    progress: Callable[[str], None],
    *,
    timeout_s: float | None = None,
    poll_s: float = 2.0,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> JobState:
    """Poll until the job ends, reporting each change of state; its final state. The wait is
    the Slurm client's (SlurmClient.wait_for_end, the collection's slurm_job's too), its progress
    from squeue's JSON. A job still running after timeout_s is cancelled and WaitTimedOut raised.
    JobForgotten when squeue, scontrol and sacct all lack the job for FORGOTTEN_POLLS polls in a
    row; Unreachable when squeue's output cannot be read for GARBLED_POLLS polls in a row. Polls
    start FIRST_POLL_S apart and slow down to poll_s."""

    def queued(job_id: str) -> JobState | None:
        try:
            return slurm.queue_state(transport, job_id)
        except slurm.GarbledOutput as exc:
            raise slurm_client.UnreadableAnswer(str(exc)) from None

    try:
        return slurm_client.SlurmClient(transport.run).wait_for_end(
            job.job_id,
            timeout=timeout_s,
            longest_gap=poll_s,
            first_gap=FIRST_POLL_S,
            clock=clock,
            sleep=sleep,
            queued=queued,
            progress=progress,
            unknown_polls=FORGOTTEN_POLLS,
            unreadable_polls=GARBLED_POLLS,
            cancel_at_timeout=True,
        )
    except slurm_client.UnreadableAnswer as exc:
        raise Unreachable(f"{exc} (files in {job.job_dir})") from None
    except slurm_client.JobUnknown as exc:
        raise JobForgotten(
            f"job {job.job_id} is unknown to Slurm: squeue, scontrol and sacct "
            f"had no record of it (sacct at most its submission) in {exc.polls} polls"
        ) from None
    except slurm_client.WaitTimedOut as exc:
        where = exc.state.describe() if exc.state is not None else "unfinished"
        raise WaitTimedOut(
            f"job {job.job_id} still {where} after {timeout_s:g} s: cancelled it"
        ) from None


def wait_for_result(
    transport: Transport,
    job: SubmittedJob,
    progress: Callable[[str], None],
    *,
    timeout_s: float | None = None,
    poll_s: float = 2.0,
) -> dict[str, Any]:
    """wait, then fetch_result. A job that Slurm forgot (MinJobAge passed, state lost, no
    accounting) may still have written its result: that result is returned; else JobFailed
    naming the job directory."""
    try:
        final = wait(transport, job, progress, timeout_s=timeout_s, poll_s=poll_s)
    except JobForgotten as forgotten:
        try:
            document = _read_result(transport, job)
        except FileNotFoundError:
            raise JobFailed(
                f"{forgotten} and it wrote no result; its files are in {job.job_dir}"
            ) from None
        progress(f"{forgotten}; using the result it wrote, {job.result}")
        return _recorded(document, job, nodes="")
    return fetch_result(transport, job, final)


def _stderr_tail(transport: Transport, job: SubmittedJob) -> str:
    try:
        text = transport.read_file(job.stderr).decode("utf-8", "replace")
    except FileNotFoundError:
        return (
            f"no {job.stderr}: the job wrote nothing there (is {job.job_dir} "
            "on storage that the workers see?)"
        )
    lines = text.rstrip().splitlines()[-STDERR_TAIL_LINES:]
    if not lines:
        return f"{job.stderr} is empty"
    return f"last lines of {job.stderr}:\n" + "\n".join(f"  {line}" for line in lines)


def _read_result(transport: Transport, job: SubmittedJob) -> dict[str, Any]:
    """The job's result JSON; FileNotFoundError when missing, JobFailed when not JSON."""
    data = transport.read_file(job.result)
    try:
        document = json.loads(data)
    except ValueError as exc:
        raise JobFailed(f"job {job.job_id}: {job.result} is not JSON ({exc})") from None
    if not isinstance(document, dict):
        raise JobFailed(f"job {job.job_id}: {job.result} is not a result object")
    return document


def _recorded(document: dict[str, Any], job: SubmittedJob, nodes: str) -> dict[str, Any]:
    # `gpulab run` records the job itself; older payloads on the workers may not.
    slurm_info = document.setdefault("slurm", {})
    slurm_info.setdefault("job_id", job.job_id)
    if nodes:
        slurm_info.setdefault("nodelist", nodes)
    return document


def fetch_result(transport: Transport, job: SubmittedJob, final: JobState) -> dict[str, Any]:
    """The result JSON that `gpulab run` wrote in the job, with `slurm.job_id`; JobFailed
    with the state, exit code and the tail of the job's stderr otherwise."""
    if not final.succeeded:
        raise JobFailed(f"job {job.job_id} {final.describe()}; {_stderr_tail(transport, job)}")
    try:
        document = _read_result(transport, job)
    except FileNotFoundError:
        raise JobFailed(
            f"job {job.job_id} completed but wrote no {job.result}; {_stderr_tail(transport, job)}"
        ) from None
    return _recorded(document, job, final.nodes)
