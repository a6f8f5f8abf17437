# Copyright: gpulab contributors
# MIT License (see galaxy.yml)
"""Reading job state from Slurm's command output: scontrol, sacct and squeue."""

from __future__ import annotations

import re
from typing import NamedTuple

# States after which a job never changes again.
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
        "REVOKED",
        "TIMEOUT",
    }
)

_FIELD = re.compile(r"(\w+)=(\S*)")


class JobInfo(NamedTuple):
    """What the module reports about one job."""

    job_id: str
    state: str
    exit_code: int | None
    signal: int | None
    elapsed: int | None
    stdout_path: str | None
    stderr_path: str | None
    nodes: str | None

    @property
    def finished(self) -> bool:
        return self.state in TERMINAL_STATES


def parse_job_id(sbatch_parsable: str) -> str:
    """The job id from `sbatch --parsable` output: "ID" or "ID;CLUSTER"."""
    line = sbatch_parsable.strip().splitlines()[-1] if sbatch_parsable.strip() else ""
    job_id = line.split(";", 1)[0].strip()
    if not job_id.isdigit():
        raise ValueError(f"sbatch printed no job id: {sbatch_parsable.strip()!r}")
    return job_id


def parse_exit_code(text: str) -> tuple[int | None, int | None]:
    """Slurm's "CODE:SIGNAL" as two integers."""
    code, _, signal = text.partition(":")
    if not code.isdigit():
        return None, None
    return int(code), int(signal) if signal.isdigit() else 0


def parse_duration(text: str) -> int | None:
    """Seconds in Slurm's [D-][HH:]MM:SS; None for anything else."""
    days, _, clock = text.rpartition("-")
    parts = clock.split(":")
    if (
        not all(p.isdigit() for p in parts)
        or not 1 <= len(parts) <= 3
        or (days and not days.isdigit())
    ):
        return None
    seconds = 0
    for part in parts:
        seconds = seconds * 60 + int(part)
    return seconds + int(days or 0) * 86400


def parse_scontrol_job(job_id: str, text: str) -> JobInfo:
    """A job from one line of `scontrol show job -o ID`."""
    fields = dict(_FIELD.findall(text))
    code, signal = parse_exit_code(fields.get("ExitCode", ""))
    return JobInfo(
        job_id=fields.get("JobId", job_id),
        state=fields.get("JobState", "UNKNOWN"),
        exit_code=code,
        signal=signal,
        elapsed=parse_duration(fields.get("RunTime", "")),
        stdout_path=fields.get("StdOut") or None,
        stderr_path=fields.get("StdErr") or None,
        nodes=fields.get("NodeList")
        if fields.get("NodeList") not in (None, "", "(null)")
        else None,
    )


def parse_sacct_job(job_id: str, text: str) -> JobInfo | None:
    """A job from `sacct -n -P -X -o JobID,State,ExitCode,ElapsedRaw,NodeList -j ID`."""
    for line in text.splitlines():
        fields = line.split("|")
        if len(fields) < 5 or fields[0] != job_id:
            continue
        code, signal = parse_exit_code(fields[2])
        return JobInfo(
            job_id=job_id,
            state=fields[1].split(" ", 1)[0],  # "CANCELLED by 0"
            exit_code=code,
            signal=signal,
            elapsed=int(fields[3]) if fields[3].isdigit() else None,
            stdout_path=None,
            stderr_path=None,
            nodes=fields[4] or None,
        )
    return None


def parse_squeue(text: str) -> list[tuple[str, str]]:
    """(job id, state) pairs from `squeue --noheader --format=%i %T`."""
    jobs = []
    for line in text.splitlines():
        fields = line.split()
        if len(fields) == 2:
            jobs.append((fields[0], fields[1]))
    return jobs
