"""Slurm's client commands as argument lists, and what their output says about a job.

Works with Slurm 22.05 (Debian 12) and 24.11 (Debian 13): `sbatch --parsable`, `squeue --json`
for progress (22.05 lists every job whatever --jobs says: the job is picked by id), and for the
end `scontrol show job -o`, or `sacct` (needs slurmdbd) once the controller has forgotten it.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from gpulab.submit.transport import CommandResult, Transport, Unreachable

# States after which a job never runs again (squeue/sacct/scontrol spell them alike).
TERMINAL_STATES = frozenset(
    {
        "BOOT_FAIL",
        "CANCELLED",
        "COMPLETED",
        "DEADLINE",
        "FAILED",
        "NODE_FAIL",
        "OUT_OF_MEMORY",
        "PREEMPTED",
        "TIMEOUT",
    }
)

# Messages of a controller that cannot be reached, as opposed to a refused request.
_UNREACHABLE_HINTS = (
    "Unable to contact slurm controller",
    "Socket timed out",
    "Connection refused",
)


class SubmitRejected(ValueError):
    """sbatch refused the job (an unknown partition or node, for example): exit 2."""


@dataclass(frozen=True)
class JobState:
    """A job's state as Slurm reports it; exit_code and signal once it has ended."""

    state: str
    reason: str = ""
    nodes: str = ""
    exit_code: int | None = None
    signal: int | None = None

    @property
    def finished(self) -> bool:
        """Whether the job has ended."""
        return self.state in TERMINAL_STATES

    @property
    def succeeded(self) -> bool:
        """Completed with exit code 0."""
        return self.state == "COMPLETED" and not self.exit_code and not self.signal

    def describe(self) -> str:
        """ "RUNNING on worker1", "PENDING (Resources)", "FAILED on worker2 (exit code 4)"."""
        text = self.state
        if self.nodes:
            text += f" on {self.nodes}"
        if self.reason and self.reason != "None" and not self.finished:
            text += f" ({self.reason})"
        if self.signal:
            text += f" (signal {self.signal})"
        elif self.finished and self.exit_code is not None:
            text += f" (exit code {self.exit_code})"
        return text


def sbatch_argv(
    script: str,
    *,
    job_dir: str,
    job_name: str,
    stdout: str,
    stderr: str,
    partition: str | None = None,
    nodelist: str | None = None,
) -> list[str]:
    """The sbatch command for a staged job; the job starts in job_dir (on the shared storage)."""
    argv = [
        "sbatch",
        "--parsable",
        f"--job-name={job_name}",
        f"--chdir={job_dir}",
        f"--output={stdout}",
        f"--error={stderr}",
    ]
    if partition:
        argv.append(f"--partition={partition}")
    if nodelist:
        argv.append(f"--nodelist={nodelist}")
    argv.append(script)
    return argv


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
    job_id = result.stdout.strip().split(";")[0]
    if not job_id.isdigit():
        raise Unreachable(f"sbatch on {transport.where} answered {result.stdout.strip()!r}")
    return job_id


def _word(value: Any) -> str:
    # 22.05 gives a state as a string; 24.11 as a list of flags, the base state first.
    if isinstance(value, list):
        return str(value[0]) if value else ""
    return "" if value is None else str(value)


def parse_squeue(text: str, job_id: str) -> JobState | None:
    """The job in `squeue --json --jobs ID` output; None when it is not listed."""
    for job in json.loads(text).get("jobs", []):
        if str(job.get("job_id")) == job_id:
            return JobState(
                state=_word(job.get("job_state")),
                reason=str(job.get("state_reason") or ""),
                nodes=str(job.get("nodes") or ""),
            )
    return None


def parse_sacct(text: str, job_id: str) -> JobState | None:
    """The job in `sacct --parsable2 --noheader --allocations --format=JobID,State,ExitCode,
    NodeList` output; None when accounting has no record yet. (Slurm 22.05's `sacct --json`
    reports exit code 0 for failed jobs; this text form is right on every version.)"""
    for line in text.splitlines():
        fields = line.split("|")
        if len(fields) == 4 and fields[0] == job_id:
            # "CANCELLED by 2000": the state is the first word.
            state = fields[1].split(" ")[0]
            return _with_exit_code(JobState(state=state, nodes=fields[3]), fields[2])
    return None


def _with_exit_code(state: JobState, code_and_signal: str) -> JobState:
    # Slurm writes "EXIT:SIGNAL", e.g. "3:0" or "0:9".
    code, _, signal = code_and_signal.partition(":")
    return JobState(
        state=state.state,
        reason=state.reason,
        nodes="" if state.nodes in ("(null)", "None assigned") else state.nodes,
        exit_code=int(code) if code.isdigit() else None,
        signal=int(signal) if signal.isdigit() and int(signal) else None,
    )


def parse_scontrol(text: str) -> JobState | None:
    """`scontrol show job -o ID` output (KEY=VALUE words on one line); None when empty."""
    fields = dict(word.split("=", 1) for word in text.split() if "=" in word)
    if "JobState" not in fields:
        return None
    state = JobState(
        state=fields["JobState"], reason=fields.get("Reason", ""), nodes=fields.get("NodeList", "")
    )
    return _with_exit_code(state, fields.get("ExitCode", ""))


def queue_state(transport: Transport, job_id: str) -> JobState | None:
    """The job's state from squeue; None once it has left the queue."""
    result = transport.run(["squeue", "--json", f"--jobs={job_id}"])
    if result.returncode != 0:
        _check_reachable(result, transport.where)
        if "Invalid job id" in result.stderr:
            return None
        raise Unreachable(f"squeue on {transport.where}: {_last_line(result.stderr)}")
    return parse_squeue(result.stdout, job_id)


SACCT_FORMAT = "--format=JobID,State,ExitCode,NodeList"


def final_state(transport: Transport, job_id: str) -> JobState | None:
    """The state of an ended job: the controller's memory of recent jobs (MinJobAge), else
    accounting when slurmdbd runs; None when neither has a final state yet (accounting
    records a job's end a moment after the controller)."""
    scontrol = transport.run(["scontrol", "show", "job", "-o", job_id])
    if scontrol.returncode == 0:
        state = parse_scontrol(scontrol.stdout)
        if state is not None and state.finished:
            return state
    sacct = transport.run(
        ["sacct", "--parsable2", "--noheader", "--allocations", SACCT_FORMAT, f"--jobs={job_id}"]
    )
    if sacct.returncode == 0:
        state = parse_sacct(sacct.stdout, job_id)
        if state is not None and state.finished:
            return state
    return None


def cancel(transport: Transport, job_id: str) -> None:
    """scancel the job (a job that already ended is not an error)."""
    transport.run(["scancel", job_id])
