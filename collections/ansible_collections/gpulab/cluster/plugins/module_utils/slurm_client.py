# Copyright: gpulab contributors
# MIT License (see LICENSE)
"""Slurm's client commands as argument lists, and what their output says about jobs and GRES.

The one Slurm client of gpulab: this file, the collection's module_utils/slurm_client.py, is
also the payload's gpulab.submit.slurm_client (payload/src/gpulab/submit/slurm_client.py is a
link here, resolved when the wheel is built), so it uses the standard library only. It writes
every Slurm command line of gpulab (tests/collection/test_slurm_command_lines.py holds the rest to
that) and reads their output; SlurmClient runs them through a `run` callable that the caller
passes in (Ansible's run_command, a local subprocess, an SSH transport, a fake in tests), and
holds what the module and `gpulab submit` share: a job's state from scontrol, then accounting,
waiting for a job's end (SlurmClient.wait_for_end, `gpulab submit --wait`'s progress included),
and cancelling. Pinned on output captured from Slurm 22.05 (Debian 12) and 24.11 (Debian 13).

Run as a program (`python3 slurm_client.py COMMAND ...`, main below), it is the small command
line of the shell scripts that need Slurm: the slurm role installs it on every node for the GPU
health check and the validation job, and the lab pipes it into its controller.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any, Protocol

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
# The one definition of a node in service: its base state (sinfo %T, lower case, flags after
# "+" left out) is one of these and its slurmd answers (no "*").
HEALTHY_STATES = frozenset({"idle", "mixed", "allocated", "completing"})
# Base states of a node that takes no new jobs until resumed (or, for down, until its slurmd
# registers again); a node's drain flag also counts.
UNAVAILABLE_PREFIXES = ("down", "drain", "fail")
# `sinfo --Node --format` of slurm_info's nodes, reason last since it may hold "|".
SINFO_NODE_DETAILS = "%N|%T|%u|%G|%f|%P|%E"
# `sinfo --format` of slurm_info's partitions: one line per partition and kind of node.
SINFO_PARTITION_DETAILS = "%P|%a|%l|%D|%N"
# `squeue --format` of slurm_info's jobs, the name last since it may hold "|".
SQUEUE_JOB_DETAILS = "%i|%T|%P|%u|%D|%N|%r|%j"
# Slurm's word for "nothing" in scontrol and sinfo fields.
_UNSET = ("", "(null)", "None assigned", "N/A")
_FIELD = re.compile(r"(\w+)=(\S*)")
_BASE_STATE = re.compile(r"^([a-z_]+)")
_DETAIL = re.compile(r"\([^)]*\)")


@dataclass(frozen=True)
class CommandResult:
    """What one command did: its argv, exit status and decoded output. The one result type of
    gpulab's command runners (the collection's SlurmRunner, the payload's transports)."""

    argv: tuple[str, ...]
    returncode: int
    stdout: str
    stderr: str

    def message(self) -> str:
        """The last line that is not blank of stderr, else of stdout, for one-line errors."""
        for text in (self.stderr, self.stdout):
            lines = [line for line in text.strip().splitlines() if line.strip()]
            if lines:
                return lines[-1].strip()
        return "no output"


class Run(Protocol):
    """Runs an argument list (no shell) to completion."""

    def __call__(self, argv: Sequence[str]) -> CommandResult: ...


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


def sinfo_node_details_argv(nodes: Sequence[str] = (), *, sinfo: str = "sinfo") -> list[str]:
    """The nodes (every node when none are named), one "NAME|STATE|REASON_USER|GRES|FEATURES|
    PARTITION|REASON" line per node and partition (parse_node_details)."""
    argv = [sinfo, "--noheader", "--Node", f"--format={SINFO_NODE_DETAILS}"]
    return [*argv, f"--nodes={','.join(nodes)}"] if nodes else argv


def sinfo_partition_details_argv(*, sinfo: str = "sinfo") -> list[str]:
    """Every partition, one "NAME|AVAIL|TIMELIMIT|NODES|NODELIST" line per kind of its nodes (a
    default partition's name ends in "*"; parse_partitions)."""
    return [sinfo, "--noheader", f"--format={SINFO_PARTITION_DETAILS}"]


def squeue_jobs_argv(nodes: Sequence[str] = (), *, squeue: str = "squeue") -> list[str]:
    """Everybody's jobs (on these nodes, when named), one
    "ID|STATE|PARTITION|USER|NODES|NODELIST|REASON|NAME" line each (parse_jobs)."""
    argv = [squeue, "--noheader", "--all", f"--format={SQUEUE_JOB_DETAILS}"]
    return [*argv, f"--nodelist={','.join(nodes)}"] if nodes else argv


def scontrol_update_nodes_argv(
    nodes: Sequence[str], state: str, reason: str | None = None, *, scontrol: str = "scontrol"
) -> list[str]:
    """x."""
    argv = [scontrol, "update", f"nodename={','.join(nodes)}", f"state={state}"]
    return [*argv, f"reason={reason}"] if reason is not None else argv


def scontrol_reconfigure_argv(*, scontrol: str = "scontrol") -> list[str]:
    """slurmctld and every slurmd read slurm.conf again."""
    return [scontrol, "reconfigure"]


def scancel_argv(job_ids: Sequence[str], *, scancel: str = "scancel") -> list[str]:
    """Cancel the jobs (a job that already ended is not an error)."""
    return [scancel, *job_ids]


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
    """One node as sinfo reports it: the base state in lower case ("idle", "drained", ...),
    whether slurmd answers, the reason ("" for none); from sinfo_node_details_argv also the
    long state with its flags ("idle+drain", "down*"), who set the reason, GRES, features and
    partitions."""

    node: str
    state: str
    responding: bool
    reason: str
    long_state: str = ""
    reason_user: str = ""
    gres: str = ""
    features: tuple[str, ...] = ()
    partitions: tuple[str, ...] = ()

    @property
    def healthy(self) -> bool:
        """In service: HEALTHY_STATES, slurmd answering, no drain flag."""
        return (
            self.state in HEALTHY_STATES
            and self.responding
            and "drain" not in self.long_state.split("+")[1:]
        )

    @property
    def unavailable(self) -> bool:
        """Down, drained or draining, failed: takes no new jobs until resumed."""
        return (
            self.state.startswith(UNAVAILABLE_PREFIXES) or "drain" in self.long_state.split("+")[1:]
        )

    @property
    def drained(self) -> bool:
        """Drained or draining (by a person, a health check or slurmctld)."""
        return self.state.startswith("drain") or "drain" in self.long_state.split("+")[1:]

    def as_dict(self) -> dict[str, Any]:
        """What slurm_info returns for the node."""
        return {
            "name": self.node,
            "state": self.state,
            "long_state": self.long_state or self.state,
            "responding": self.responding,
            "healthy": self.healthy,
            "unavailable": self.unavailable,
            "drained": self.drained,
            "reason": self.reason,
            "reason_user": self.reason_user,
            "gres": self.gres,
            "features": list(self.features),
            "partitions": list(self.partitions),
        }


def _base_state(long_state: str) -> tuple[str, bool]:
    # "idle", "down*", "idle+drain", "mixed-" -> ("idle", True), ("down", False), ...
    base = _BASE_STATE.match(long_state)
    return (base.group(1) if base else "unknown"), "*" not in long_state


def parse_node_states(text: str) -> list[NodeState]:
    """sinfo_nodes_argv's output, one entry per node (a node in several partitions appears once)."""
    nodes: dict[str, NodeState] = {}
    for line in text.splitlines():
        fields = line.split("|", 2)
        if len(fields) < 2 or not fields[0]:
            continue
        long_state = fields[1].strip().lower()
        state, responding = _base_state(long_state)
        reason = fields[2].strip() if len(fields) > 2 else ""
        nodes.setdefault(
            fields[0],
            NodeState(
                node=fields[0],
                state=state,
                responding=responding,
                reason="" if reason == "none" else reason,
            ),
        )
    return list(nodes.values())


def _list(text: str) -> tuple[str, ...]:
    return tuple(item for item in _value(text.strip()).split(",") if item)


def parse_node_details(text: str) -> list[NodeState]:
    """sinfo_node_details_argv's output, one entry per node with all its partitions. ValueError
    for a line that is no such row (an error text with exit status 0)."""
    nodes: dict[str, NodeState] = {}
    for line in text.splitlines():
        if not line.strip():
            continue
        fields = line.split("|", 6)
        if len(fields) != 7 or not fields[0].strip():
            raise ValueError(f"not a node of sinfo: {_excerpt(line)}")
        name = fields[0].strip()
        partition = fields[5].strip().rstrip("*")
        if name in nodes:
            known = nodes[name]
            if partition and partition not in known.partitions:
                nodes[name] = replace(known, partitions=(*known.partitions, partition))
            continue
        long_state = fields[1].strip().lower()
        state, responding = _base_state(long_state)
        reason = fields[6].strip()
        nodes[name] = NodeState(
            node=name,
            state=state,
            responding=responding,
            reason="" if reason == "none" else _value(reason),
            long_state=long_state,
            reason_user="" if reason == "none" else _value(fields[2].strip()),
            gres=_value(fields[3].strip()),
            features=_list(fields[4]),
            partitions=(partition,) if partition else (),
        )
    return list(nodes.values())


@dataclass(frozen=True)
class PartitionInfo:
    """One partition from sinfo_partition_details_argv: whether it is the default and up, its
    time limit as Slurm writes it ("infinite", "1-00:00:00"), how many nodes, and which."""

    name: str
    default: bool
    available: bool
    time_limit: str
    node_count: int
    nodes: tuple[str, ...]

    def as_dict(self) -> dict[str, Any]:
        """What slurm_info returns for the partition."""
        return {
            "name": self.name,
            "default": self.default,
            "available": self.available,
            "time_limit": self.time_limit,
            "node_count": self.node_count,
            "nodes": list(self.nodes),
        }


def parse_partitions(text: str) -> list[PartitionInfo]:
    """sinfo_partition_details_argv's output, the lines of one partition merged (node lists
    stay in Slurm's hostlist form, e.g. "worker[1-2]"). ValueError for a line that is no such
    row."""
    found: dict[str, PartitionInfo] = {}
    for line in text.splitlines():
        if not line.strip():
            continue
        fields = [field.strip() for field in line.split("|")]
        if len(fields) != 5 or not fields[0] or not fields[3].isdigit():
            raise ValueError(f"not a partition of sinfo: {_excerpt(line)}")
        name = fields[0].rstrip("*")
        nodes = (fields[4],) if _value(fields[4]) else ()
        known = found.get(name)
        found[name] = PartitionInfo(
            name=name,
            default=fields[0].endswith("*"),
            available=fields[1] == "up",
            time_limit=fields[2],
            node_count=int(fields[3]) + (known.node_count if known else 0),
            nodes=(known.nodes if known else ()) + nodes,
        )
    return list(found.values())


@dataclass(frozen=True)
class JobInfo:
    """One job from squeue_jobs_argv."""

    job_id: str
    state: str
    partition: str
    user: str
    node_count: int
    nodes: str
    reason: str
    name: str

    def as_dict(self) -> dict[str, Any]:
        """What slurm_info returns for the job."""
        return {
            "job_id": self.job_id,
            "state": self.state,
            "partition": self.partition,
            "user": self.user,
            "node_count": self.node_count,
            "nodes": self.nodes,
            "reason": self.reason,
            "name": self.name,
        }


def parse_jobs(text: str) -> list[JobInfo]:
    """squeue_jobs_argv's output. ValueError for a line that is no such row."""
    jobs = []
    for line in text.splitlines():
        if not line.strip():
            continue
        fields = line.split("|", 7)
        if len(fields) != 8 or not fields[0].split("_", 1)[0].strip().isdigit():
            raise ValueError(f"not a job of squeue: {_excerpt(line)}")
        job_id, state, partition, user, count, nodes, reason, name = (f.strip() for f in fields)
        jobs.append(
            JobInfo(
                job_id=job_id,
                state=state,
                partition=partition,
                user=user,
                node_count=int(count) if count.isdigit() else 0,
                nodes=_value(nodes),
                reason="" if reason == "None" else _value(reason),
                name=name,
            )
        )
    return jobs


def parse_partition_names(text: str) -> list[str]:
    """sinfo_partitions_argv's output: the partition names, sorted, each once."""
    return sorted({line.strip() for line in text.splitlines() if line.strip()})


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


# --- running them -----------------------------------------------------------------------

# Messages of a controller that cannot be reached, as opposed to a refused request.
UNREACHABLE_HINTS = (
    "Unable to contact slurm controller",
    "Socket timed out",
    "Connection refused",
)


def says_unreachable(result: CommandResult) -> bool:
    """Whether the command's message says that slurmctld did not answer."""
    message = result.stderr.strip() or result.stdout.strip()
    return any(hint in message for hint in UNREACHABLE_HINTS)


def sbatch_refusal(result: CommandResult) -> str:
    """Why sbatch refused a job: its last line of stderr without "sbatch: error: "."""
    lines = [line for line in result.stderr.strip().splitlines() if line.strip()]
    line = lines[-1] if lines else "(no message)"
    prefix = "sbatch: error: "  # str.removeprefix is Python 3.9's; this file runs on 3.8 too
    return line[len(prefix) :] if line.startswith(prefix) else line


class SlurmError(RuntimeError):
    """A Slurm command failed, or a program is missing; the message is one line."""

    def __init__(self, msg: str, result: CommandResult | None = None) -> None:
        super().__init__(msg)
        self.result = result


class WaitTimedOut(SlurmError):
    """The job had not ended when the wait ran out; it keeps running unless the wait cancelled
    it. `state`: its last state seen (None when the queue never showed it)."""

    def __init__(self, msg: str, state: JobState | None) -> None:
        super().__init__(msg)
        self.state = state


class UnreadableAnswer(SlurmError):
    """A Slurm command answered with output that cannot be read (empty, truncated): a single
    such answer says nothing about the job, so a wait asks again."""


class JobUnknown(SlurmError):
    """Neither the queue, slurmctld nor accounting had a record of the job, `polls` polls in
    a row (a controller past MinJobAge without accounting, or one that lost its state)."""

    def __init__(self, msg: str, polls: int) -> None:
        super().__init__(msg)
        self.polls = polls


class SlurmClient:
    """Slurm's commands run through `run`. `which` finds a program's path (None: not
    installed); without it, programs are called by name and looked up by whatever runs them."""

    def __init__(self, run: Run, which: Callable[[str], str | None] | None = None) -> None:
        self._run = run
        self._which = which

    def has(self, name: str) -> bool:
        """Whether the program is installed (always True without `which`)."""
        return self._which is None or self._which(name) is not None

    def program(self, name: str) -> str:
        """The program's path (its name without `which`); SlurmError when it is missing."""
        if self._which is None:
            return name
        path = self._which(name)
        if path is None:
            raise SlurmError(
                f"{name} not found on PATH: install the Slurm client (slurm-client) on this host"
            )
        return path

    def resolve(self, argv: Sequence[str]) -> list[str]:
        """argv (as the *_argv functions write it) with its program's path; SlurmError when
        the program is missing."""
        return [self.program(argv[0]), *argv[1:]]

    def run(self, argv: Sequence[str]) -> CommandResult:
        """Run argv as it is, whatever its exit status."""
        return self._run(argv)

    def check(self, argv: Sequence[str]) -> CommandResult:
        """Run argv; SlurmError naming the program, its status and its message unless it
        exited 0."""
        result = self._run(argv)
        if result.returncode != 0:
            detail = (result.stderr or result.stdout).strip() or "no output"
            name = argv[0].rsplit("/", 1)[-1]
            raise SlurmError(f"{name} failed (rc {result.returncode}): {detail}", result)
        return result

    # --- nodes, partitions, jobs ---------------------------------------------------------

    def nodes(self, names: Sequence[str] = ()) -> list[NodeState]:
        """The nodes (every node when none are named) with state, reason, GRES, features."""
        argv = self.resolve(sinfo_node_details_argv(names))
        return self._parsed(argv, parse_node_details)

    def partitions(self) -> list[PartitionInfo]:
        """Every partition."""
        argv = self.resolve(sinfo_partition_details_argv())
        return self._parsed(argv, parse_partitions)

    def jobs(self, nodes: Sequence[str] = ()) -> list[JobInfo]:
        """Everybody's jobs in the queue (on these nodes, when named)."""
        argv = self.resolve(squeue_jobs_argv(nodes))
        return self._parsed(argv, parse_jobs)

    def _parsed(self, argv: list[str], parse: Callable[[str], list[Any]]) -> list[Any]:
        result = self.check(argv)
        try:
            return parse(result.stdout)
        except ValueError as error:
            raise SlurmError(f"{argv[0].rsplit('/', 1)[-1]}: {error}", result) from None

    def update_nodes(
        self, names: Sequence[str], state: str, reason: str | None = None
    ) -> CommandResult:
        """Set the nodes' state: DRAIN with a reason, RESUME."""
        return self.check(self.resolve(scontrol_update_nodes_argv(names, state, reason)))

    def reconfigure(self) -> CommandResult:
        """slurmctld and every slurmd read slurm.conf again."""
        return self.check(self.resolve(scontrol_reconfigure_argv()))

    # --- jobs: tracking and cancelling ---------------------------------------------------

    def controller_state(
        self, job_id: str, details: bool = False
    ) -> tuple[JobState | None, CommandResult]:
        """What slurmctld says of the job (None when it does not know it, or forgot it after
        MinJobAge), with scontrol's result."""
        shown = self._run(self.resolve(scontrol_job_argv(job_id, details=details)))
        return (parse_scontrol(shown.stdout) if shown.returncode == 0 else None), shown

    def accounted_state(self, job_id: str) -> JobState | None:
        """What accounting (slurmdbd) says of the job; None without sacct or a record."""
        argv = sacct_argv(job_id)
        if not self.has(argv[0]):
            return None
        listed = self._run(self.resolve(argv))
        return parse_sacct(listed.stdout, job_id) if listed.returncode == 0 else None

    def job_state(self, job_id: str) -> JobState:
        """The job as slurmctld knows it, else as accounting recorded it; SlurmError when
        neither knows it."""
        known, shown = self.controller_state(job_id)
        if known is not None:
            return known
        recorded = self.accounted_state(job_id)
        if recorded is not None:
            return recorded
        detail = (shown.stderr or shown.stdout).strip() or "no output"
        raise SlurmError(
            f"job {job_id} not found by scontrol (rc {shown.returncode}: {detail}) nor sacct",
            shown,
        )

    def last_state(self, job_id: str) -> JobState | None:
        """For a job that left the queue: what slurmctld's memory of recent jobs (MinJobAge),
        else accounting says of it, a final state first; None when neither has any record of
        it, or when accounting has it PENDING and slurmctld does not know it: a submission
        slurmctld lost with its last seconds of state (killed before it saved them), never to
        run."""
        known, _shown = self.controller_state(job_id)
        if known is not None and known.finished:
            return known
        recorded = self.accounted_state(job_id)
        if recorded is not None and (
            recorded.finished or (known is None and recorded.state != "PENDING")
        ):
            return recorded
        return known

    def wait_for_end(
        self,
        job_id: str,
        *,
        timeout: float | None,
        longest_gap: float,
        first_gap: float,
        clock: Callable[[], float],
        sleep: Callable[[float], None],
        queued: Callable[[str], JobState | None] | None = None,
        progress: Callable[[str], None] | None = None,
        unknown_polls: int = 0,
        unreadable_polls: int = 1,
        cancel_at_timeout: bool = False,
    ) -> JobState:
        """Poll until the job ends; its final state. The one wait of gpulab: the collection's
        slurm_job and `gpulab submit --wait` (its progress from squeue).

        Without `queued`, each poll asks job_state (slurmctld, else accounting; SlurmError when
        neither knows the job). With it, each poll asks `queued` (the job in the queue, None once
        it has left it), and last_state where the queue shows the job finished or not at all;
        `unknown_polls` polls in a row with no record anywhere raise JobUnknown (0: never), and
        an UnreadableAnswer from `queued` is asked again, up to `unreadable_polls` in a row.
        `progress` gets "job ID DESCRIPTION" at each change of the queued state and at the end.
        Polls are poll_gap apart (first_gap, growing to longest_gap), longest_gap after a poll
        that found no record or no readable answer. Past `timeout` (None: none) the job is
        cancelled when `cancel_at_timeout`, and WaitTimedOut raised with its last state."""
        start = clock()
        deadline = None if timeout is None else start + timeout
        shown = ""
        latest: JobState | None = None
        unknown = unreadable = 0  # polls in a row
        while True:
            try:
                state = self.job_state(job_id) if queued is None else queued(job_id)
            except UnreadableAnswer as error:
                unreadable += 1
                if unreadable >= unreadable_polls:
                    raise UnreadableAnswer(
                        f"{error}, {unreadable} polls in a row: stopped waiting for job {job_id}",
                        error.result,
                    ) from None
            else:
                unreadable = 0
                latest = state or latest
                if state is not None and not state.finished:
                    unknown = 0
                    if progress is not None and state.describe() != shown:
                        shown = state.describe()
                        progress(f"job {job_id} {shown}")
                else:
                    known = state if queued is None else self.last_state(job_id)
                    if known is not None and known.finished:
                        if progress is not None:
                            progress(f"job {job_id} {known.describe()}")
                        return known
                    unknown = unknown + 1 if state is None and known is None else 0
                    if unknown_polls and unknown >= unknown_polls:
                        raise JobUnknown(
                            f"job {job_id} is unknown to Slurm: the queue, scontrol and sacct "
                            f"had no record of it in {unknown} polls",
                            unknown,
                        )
            if deadline is not None and clock() >= deadline:
                if cancel_at_timeout:
                    self.cancel([job_id])
                where = latest.state if latest is not None else "unfinished"
                raise WaitTimedOut(f"job {job_id} still {where} after {timeout} s", latest)
            doubtful = unknown or unreadable
            sleep(longest_gap if doubtful else poll_gap(clock() - start, first_gap, longest_gap))

    def cancel(self, job_ids: Sequence[str]) -> CommandResult:
        """scancel the jobs, whatever its exit status (a job that already ended is none of
        the caller's errors)."""
        return self._run(self.resolve(scancel_argv(job_ids)))


# --- as a program --------------------------------------------------------------------------

USAGE = """usage: slurm_client.py COMMAND ARGS
  reason NODE          the node's reason, "none" without one
  drain NODE REASON    drain the node with the reason
  resume NODE          resume the node
  unhealthy            "NODE STATE" for each node out of service (HEALTHY_STATES), one a line
  job-details JOB_ID   `scontrol show job -o -d` of the job, as Slurm prints it
exit 0 done, 1 Slurm failed (its message on stderr), 2 usage"""


def run_here(argv: Sequence[str]) -> CommandResult:
    """Run argv on this machine (no shell); a missing program is exit status 127."""
    try:
        done = subprocess.run(list(argv), capture_output=True, text=True, check=False)
    except FileNotFoundError:
        return CommandResult(tuple(argv), 127, "", f"{argv[0]}: not found on PATH")
    return CommandResult(tuple(argv), done.returncode, done.stdout, done.stderr)


def main(args: Sequence[str] | None = None, run: Run = run_here) -> int:
    """The command line (USAGE); what it prints goes to stdout, a failure's one line to stderr.
    (Written to sys.stdout and sys.stderr: Ansible's sanity test keeps print out of
    module_utils.)"""
    words = list(sys.argv[1:] if args is None else args)
    client = SlurmClient(run)
    command, rest = (words[0], words[1:]) if words else ("", [])
    arity = {"reason": 1, "drain": 2, "resume": 1, "unhealthy": 0, "job-details": 1}
    if arity.get(command) != len(rest):
        sys.stderr.write(USAGE + "\n")
        return 2
    try:
        if command == "reason":
            nodes = client.nodes(rest)
            sys.stdout.write((nodes[0].reason or "none" if nodes else "none") + "\n")
        elif command == "drain":
            client.update_nodes(rest[:1], "drain", rest[1])
        elif command == "resume":
            client.update_nodes(rest, "resume")
        elif command == "unhealthy":
            for node in client.nodes():
                if not node.healthy:
                    sys.stdout.write(f"{node.node} {node.long_state}\n")
        else:
            sys.stdout.write(client.check(scontrol_job_argv(rest[0], details=True)).stdout)
    except SlurmError as error:
        sys.stderr.write(f"slurm_client: {error}\n")
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
