# Copyright: gpulab contributors
# MIT License (see LICENSE)
"""Slurm's client commands as argument lists, and what their output says about jobs and GRES.

The one Slurm client of gpulab: this file, the collection's module_utils/slurm_client.py, is
also the payload's gpulab.submit.slurm_client (payload/src/gpulab/submit/slurm_client.py is a
link here, resolved when the wheel is built), so it uses the standard library only and runs no
command itself. Pinned on output captured from Slurm 22.05 (Debian 12) and 24.11 (Debian 13).
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

# States after which a job never changes again (squeue, sacct and scontrol spell them alike).
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

# What `sacct --format` asks for, in the order parse_sacct reads it.
SACCT_FIELDS = ("JobID", "State", "ExitCode", "ElapsedRaw", "NodeList")
# What squeue_tagged_argv and sacct_tagged_argv print, in the order parse_tagged_jobs reads it:
# the comment last, since a comment may hold "|".
SQUEUE_TAGGED_FORMAT = "%i|%T|%Z|%k"
SACCT_TAGGED_FIELDS = ("JobID", "State", "WorkDir", "Comment")
# How far back sacct_tagged_argv looks (sacct's default is midnight: a job submitted just
# before would be missed just after).
SACCT_TAGGED_SINCE = "now-1days"
# `sinfo --format` of the GRES of each partition's nodes (a default partition ends in "*").
SINFO_PARTITION_GRES = "%P %G"
# Slurm's word for "nothing" in scontrol and sinfo fields.
_UNSET = ("", "(null)", "None assigned", "N/A")
_FIELD = re.compile(r"(\w+)=(\S*)")
_BASE_STATE = re.compile(r"^([a-z_]+)")
_DETAIL = re.compile(r"\([^)]*\)")


@dataclass(frozen=True)
class JobState:
    """A job as Slurm reports it. exit_code and signal are None until known; nodes, paths and
    GRES are "" when Slurm has none."""

    state: str
    reason: str = ""
    nodes: str = ""
    exit_code: int | None = None
    signal: int | None = None
    job_id: str = ""
    elapsed: int | None = None  # seconds
    stdout_path: str = ""
    stderr_path: str = ""
    gres: str = ""  # what the job was given, e.g. "gpu:h200:1(IDX:0)" (scontrol -d)

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


# --- argument lists ----------------------------------------------------------------------


def sbatch_argv(
    *,
    sbatch: str = "sbatch",
    job_name: str | None = None,
    comment: str | None = None,
    partition: str | None = None,
    nodelist: str | None = None,
    nodes: int | None = None,
    ntasks: int | None = None,
    gres: str | None = None,
    chdir: str | None = None,
    output: str | None = None,
    error: str | None = None,
    extra: Sequence[str] = (),
    wrap: str | None = None,
    script: str | None = None,
) -> list[str]:
    """`sbatch --parsable` with the options given, then extra arguments, then --wrap or the
    script path (neither: sbatch reads the script on stdin)."""
    argv = [sbatch, "--parsable"]
    options = (
        ("--job-name", job_name),
        ("--comment", comment),
        ("--partition", partition),
        ("--nodelist", nodelist),
        ("--nodes", nodes),
        ("--ntasks", ntasks),
        ("--gres", gres),
        ("--chdir", chdir),
        ("--output", output),
        ("--error", error),
    )
    argv += [f"{flag}={value}" for flag, value in options if value is not None]
    argv += extra
    if wrap is not None:
        argv.append(f"--wrap={wrap}")
    elif script is not None:
        argv.append(script)
    return argv


def scontrol_job_argv(
    job_id: str, *, details: bool = False, scontrol: str = "scontrol"
) -> list[str]:
    """`scontrol show job -o ID`: one line of KEY=VALUE words; -d adds the GRES given."""
    return [scontrol, "show", "job", "-o", *(["-d"] if details else []), job_id]


def sacct_argv(job_id: str, *, sacct: str = "sacct") -> list[str]:
    """The job's allocation record in accounting (slurmdbd), one `|`-separated line."""
    return [
        sacct,
        "--noheader",
        "--parsable2",
        "--allocations",
        f"--format={','.join(SACCT_FIELDS)}",
        f"--jobs={job_id}",
    ]


def squeue_json_argv(job_id: str, *, squeue: str = "squeue") -> list[str]:
    """The job in the queue as JSON (22.05 lists every job whatever --jobs says)."""
    return [squeue, "--json", f"--jobs={job_id}"]


def squeue_named_argv(name: str, *, squeue: str = "squeue") -> list[str]:
    """Your queued jobs of this name, one "ID STATE" line each."""
    return [squeue, "--noheader", "--me", f"--name={name}", "--format=%i %T"]


def squeue_tagged_argv(name: str, *, squeue: str = "squeue") -> list[str]:
    """Your jobs of this name that the controller knows, ended ones too (for MinJobAge), one
    "ID|STATE|WORK_DIR|COMMENT" line each: what tells one submission from another."""
    return [
        squeue,
        "--noheader",
        "--me",
        "--states=all",
        f"--name={name}",
        f"--format={SQUEUE_TAGGED_FORMAT}",
    ]


def sacct_tagged_argv(name: str, *, sacct: str = "sacct") -> list[str]:
    """Your jobs of this name in accounting (slurmdbd) since yesterday, in
    squeue_tagged_argv's layout."""
    return [
        sacct,
        "--noheader",
        "--parsable2",
        "--allocations",
        f"--name={name}",
        f"--starttime={SACCT_TAGGED_SINCE}",
        f"--format={','.join(SACCT_TAGGED_FIELDS)}",
    ]


def sinfo_gres_argv(partition: str | None = None, *, sinfo: str = "sinfo") -> list[str]:
    """The GRES of the partition's nodes (every partition's when None)."""
    argv = [sinfo, "--noheader", f"--format={SINFO_PARTITION_GRES}"]
    return argv if partition is None else [*argv, f"--partition={partition}"]


def sinfo_nodes_argv(*, sinfo: str = "sinfo") -> list[str]:
    """Every node's state, one "NAME|STATE|REASON" line per node and partition: the long state
    with its flags ("*": not responding), the reason last since it may hold "|"."""
    return [sinfo, "--noheader", "--Node", "--format=%N|%T|%E"]


def sinfo_partitions_argv(*, sinfo: str = "sinfo") -> list[str]:
    """Every partition's name, one a line, also those without nodes or jobs."""
    return [sinfo, "--noheader", "--format=%R"]


def squeue_all_argv(*, squeue: str = "squeue") -> list[str]:
    """Everybody's jobs, array tasks one by one: "PARTITIONS|STATE|SUBMIT_TIME" (local time)."""
    return [squeue, "--noheader", "--all", "--array", "--format=%P|%T|%V"]


# --- waiting --------------------------------------------------------------------------------


def poll_gap(waited_s: float, first_s: float, longest_s: float) -> float:
    """Seconds to wait before asking about a job again: a quarter of the time waited so far, at
    least first_s and at most longest_s. A short job's end is seen within a fraction of its run
    time; a long job costs one question every longest_s."""
    return min(longest_s, max(first_s, waited_s / 4))


# --- output ---------------------------------------------------------------------------------


def parse_job_id(sbatch_parsable: str) -> str:
    """The job id from `sbatch --parsable` output: "ID" or "ID;CLUSTER" on its last line."""
    lines = sbatch_parsable.strip().splitlines()
    job_id = lines[-1].split(";", 1)[0].strip() if lines else ""
    if not job_id.isdigit():
        raise ValueError(f"sbatch printed no job id: {sbatch_parsable.strip()!r}")
    return job_id


def parse_exit_code(text: str) -> tuple[int | None, int | None]:
    """Slurm's "CODE:SIGNAL" as two integers; (None, None) when it is not one."""
    code, _colon, signal = text.partition(":")
    if not code.isdigit():
        return None, None
    return int(code), int(signal) if signal.isdigit() else 0


def parse_duration(text: str) -> int | None:
    """Seconds in Slurm's [D-][HH:]MM:SS; None for anything else."""
    days, _dash, clock = text.rpartition("-")
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


def _value(text: str | None) -> str:
    return "" if text is None or text in _UNSET else text


def parse_scontrol(text: str) -> JobState | None:
    """The job in `scontrol show job -o [-d] ID` output; None when it holds no job."""
    pairs = _FIELD.findall(text)
    fields = dict(pairs)
    if "JobState" not in fields:
        return None
    code, signal = parse_exit_code(fields.get("ExitCode", ""))
    # -d adds "Nodes=N CPU_IDs=... GRES=gpu:h200:1(IDX:0)" per node; JOB_GRES sums them.
    given = [value for key, value in pairs if key == "GRES" and _value(value)]
    return JobState(
        state=fields["JobState"],
        reason=_value(fields.get("Reason")),
        nodes=_value(fields.get("NodeList")),
        exit_code=code,
        signal=signal,
        job_id=fields.get("JobId", ""),
        elapsed=parse_duration(fields.get("RunTime", "")),
        stdout_path=_value(fields.get("StdOut")),
        stderr_path=_value(fields.get("StdErr")),
        gres=",".join(given) or _value(fields.get("JOB_GRES")),
    )


def parse_sacct(text: str, job_id: str) -> JobState | None:
    """The job in sacct_argv's output; None when accounting has no record of it yet. (Slurm
    22.05's `sacct --json` reports exit code 0 for failed jobs; this text form is right.)"""
    for line in text.splitlines():
        fields = line.split("|")
        if len(fields) != len(SACCT_FIELDS) or fields[0] != job_id:
            continue
        code, signal = parse_exit_code(fields[2])
        return JobState(
            state=fields[1].split(" ", 1)[0],  # "CANCELLED by 2000"
            nodes=_value(fields[4]),
            exit_code=code,
            signal=signal,
            job_id=job_id,
            elapsed=int(fields[3]) if fields[3].isdigit() else None,
        )
    return None


def _word(value: Any) -> str:
    # 22.05 gives a state as a string; 24.11 as a list of flags, the base state first.
    if isinstance(value, list):
        return str(value[0]) if value else ""
    return "" if value is None else str(value)


def parse_squeue_json(text: str, job_id: str) -> JobState | None:
    """The job in squeue_json_argv's output; None when it is not listed. ValueError when the
    output is no squeue JSON (empty, truncated, an error text): the state is unknown then."""
    try:
        document = json.loads(text)
    except ValueError:
        raise ValueError(f"squeue printed no JSON: {_excerpt(text)}") from None
    jobs = document.get("jobs") if isinstance(document, dict) else None
    if not isinstance(jobs, list):
        raise ValueError(f"squeue printed JSON without a list of jobs: {_excerpt(text)}")
    for job in jobs:
        if isinstance(job, dict) and str(job.get("job_id")) == job_id:
            return JobState(
                state=_word(job.get("job_state")),
                reason=_value(str(job.get("state_reason") or "")),
                nodes=_value(str(job.get("nodes") or "")),
                job_id=job_id,
            )
    return None


def _excerpt(text: str, limit: int = 80) -> str:
    # Enough of a bad answer to recognise it, on one line.
    flat = " ".join(text.split())
    return repr(flat if len(flat) <= limit else flat[:limit] + "...") if flat else "(nothing)"


def parse_squeue_lines(text: str) -> list[tuple[str, str]]:
    """(job id, state) pairs from squeue_named_argv's output."""
    return [
        (fields[0], fields[1])
        for fields in (line.split() for line in text.splitlines())
        if len(fields) == 2
    ]


@dataclass(frozen=True)
class TaggedJob:
    """One line of squeue_tagged_argv's or sacct_tagged_argv's output."""

    job_id: str
    state: str
    work_dir: str
    comment: str


def parse_tagged_jobs(text: str) -> list[TaggedJob]:
    """squeue_tagged_argv's or sacct_tagged_argv's output. ValueError for a line that is no
    such row (an error text with exit status 0): the answer then says nothing, not "none"."""
    jobs = []
    for line in text.splitlines():
        if not line.strip():
            continue
        fields = line.split("|", 3)
        if len(fields) != 4 or not fields[0].split("_", 1)[0].isdigit():
            raise ValueError(f"not a job of squeue or sacct: {_excerpt(line)}")
        job_id, state, work_dir, comment = fields
        # sacct writes "CANCELLED by 2000"; squeue and sacct leave an unset comment empty.
        jobs.append(TaggedJob(job_id, state.split(" ", 1)[0], work_dir, _value(comment)))
    return jobs


def gres_gpu_count(gres: str) -> int:
    """GPUs in a GRES string: "gpu:h200:2(S:0-1)" 2, "gpu:1(IDX:0),mps:100" 1, "gpu" 1,
    "gpu:orin" 1, "(null)" 0."""
    count = 0
    for item in _DETAIL.sub("", gres).split(","):
        name, *rest = item.strip().split(":")
        if name == "gpu":
            count += int(rest[-1]) if rest and rest[-1].isdigit() else 1
    return count


def partition_gpu_count(text: str, partition: str | None = None) -> int:
    """The most GPUs a node of the partition has, from sinfo_gres_argv's output; the default
    partition (marked "*") when partition is None. 0: no GPU GRES there."""
    counts = [0]
    for line in text.splitlines():
        name, _space, gres = line.strip().partition(" ")
        if (name.rstrip("*") == partition) if partition else name.endswith("*"):
            counts.append(gres_gpu_count(gres))
    return max(counts)


@dataclass(frozen=True)
class NodeState:
    """One node as sinfo_nodes_argv reports it: the base state in lower case ("idle",
    "drained", ...), whether slurmd answers, the reason ("" for none)."""

    node: str
    state: str
    responding: bool
    reason: str


def parse_node_states(text: str) -> list[NodeState]:
    """sinfo_nodes_argv's output, one entry per node (a node in several partitions appears once)."""
    nodes: dict[str, NodeState] = {}
    for line in text.splitlines():
        fields = line.split("|", 2)
        if len(fields) < 2 or not fields[0]:
            continue
        long_state = fields[1].strip().lower()
        base = _BASE_STATE.match(long_state)
        reason = fields[2].strip() if len(fields) > 2 else ""
        nodes.setdefault(
            fields[0],
            NodeState(
                node=fields[0],
                state=base.group(1) if base else "unknown",
                responding="*" not in long_state,
                reason="" if reason == "none" else reason,
            ),
        )
    return list(nodes.values())


@dataclass(frozen=True)
class QueuedJob:
    """One job (or array task) from squeue_all_argv: the partitions it may run in, its state in
    lower case, its submit time in seconds since the epoch (None when unset)."""

    partitions: tuple[str, ...]
    state: str
    submitted: float | None


def _timestamp(text: str) -> float | None:
    # squeue's %V: local time, ISO 8601.
    try:
        return datetime.fromisoformat(text.strip()).timestamp()
    except ValueError:
        return None


def parse_queued_jobs(text: str) -> list[QueuedJob]:
    """squeue_all_argv's output; a pending job that names several partitions is in each."""
    jobs = []
    for line in text.splitlines():
        fields = line.split("|")
        if len(fields) != 3 or not fields[0]:
            continue
        partitions = tuple(p for p in fields[0].split(",") if p)
        jobs.append(QueuedJob(partitions, fields[1].strip().lower(), _timestamp(fields[2])))
    return jobs
