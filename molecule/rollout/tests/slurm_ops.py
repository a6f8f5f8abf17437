"""Slurm as the rollout and upgrade scenarios see it: sleep jobs submitted and followed to
their end, the node states sampled while a converge runs, the daemons' PIDs and start times,
and site.yml converged again with other inventory values."""

from __future__ import annotations

import json
import os
import re
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lab.cluster_under_test import Cluster, wait_for

PROJECT = Path(os.environ.get("MOLECULE_PROJECT_DIRECTORY", Path(__file__).parents[3]))
# Node states that lose jobs or need a person: what a rollout must never cause. (UNKNOWN is
# not one: sinfo shows it for the seconds between slurmctld's restart and slurmd's start.)
BAD_STATE = re.compile(r"inval|drain|down|fail")
# The marker that lets held jobs end, on each worker.
RELEASE = "/run/gpulab-rollout-release"
FINAL_JOB_STATES = re.compile(r"COMPLETED|FAILED|CANCELLED|TIMEOUT|NODE_FAIL|PREEMPTED|OUT_OF_ME")


@dataclass
class Slurm:
    """Runs commands in the cluster's containers (podman exec) and reads Slurm's view."""

    cluster: Cluster

    def run(self, host: str, script: str, *, check: bool = True, timeout: float = 120) -> str:
        argv = ["podman", "exec", self.cluster.container(host), "bash", "-c", script]
        done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)
        if check and done.returncode != 0:
            raise AssertionError(f"{host}: `{script}` exited {done.returncode}: {done.stderr}")
        return done.stdout

    def on_controller(self, script: str, **kwargs: Any) -> str:
        return self.run(self.cluster.controller, script, **kwargs)

    # --- Jobs ---------------------------------------------------------------------
    def submit_held_jobs(self, count: int, name: str) -> list[str]:
        """count one-CPU jobs that run until release() (then 5 s more): more than the workers'
        CPUs, so that some run and the rest wait for as long as a converge takes."""
        script = f"while [ ! -e {RELEASE} ]; do sleep 1; done; sleep 5"
        return [
            self.on_controller(
                f"sbatch --parsable --job-name={name} --cpus-per-task=1 --mem=256"
                f" --output=/dev/null --wrap='{script}'"
            ).strip()
            for _ in range(count)
        ]

    def submit_sleep_jobs(self, count: int, seconds: int, name: str, *extra: str) -> list[str]:
        """count one-CPU jobs that sleep this long (extra: more sbatch options)."""
        options = " ".join(extra)
        return [
            self.on_controller(
                f"sbatch --parsable --job-name={name} --cpus-per-task=1 --mem=256"
                f" --output=/dev/null {options} --wrap='sleep {seconds}'"
            ).strip()
            for _ in range(count)
        ]

    def release(self) -> None:
        """Lets the held jobs end (the marker on every worker)."""
        for worker in self.cluster.workers:
            self.run(worker, f"touch {RELEASE}")

    def hold(self) -> None:
        """The next held jobs wait again."""
        for worker in self.cluster.workers:
            self.run(worker, f"rm -f {RELEASE}")

    def queue(self) -> dict[str, str]:
        """{job id: state} of the jobs squeue still lists (pending, running, completing)."""
        out = self.on_controller("squeue --noheader --format='%i|%T'", check=False)
        return dict(line.split("|", 1) for line in out.splitlines() if "|" in line)

    def accounted(self, ids: list[str]) -> dict[str, str]:
        """{job id: state} as the accounting database (sacct) records them."""
        out = self.on_controller(
            f"sacct --allusers --allocations --noheader --parsable2 --format=JobID,State"
            f" --jobs={','.join(ids)}",
            check=False,
        )
        return dict(line.split("|", 1) for line in out.splitlines() if "|" in line)

    def wait_jobs_final(self, ids: list[str], timeout: float) -> dict[str, str]:
        """Each job's final state in sacct, once squeue no longer lists it (missing: lost)."""

        def probe() -> dict[str, str] | None:
            if set(ids) & set(self.queue()):
                return None
            states = self.accounted(ids)
            finals = all(FINAL_JOB_STATES.match(states.get(i, "")) for i in ids)
            return states if finals else None

        states = wait_for(probe, timeout, interval=3) or self.accounted(ids)
        return {i: states.get(i, "missing") for i in ids}

    # --- Nodes and daemons ------------------------------------------------------------
    def node_states(self) -> dict[str, str]:
        """{NodeName: state} from sinfo; a trailing * means not responding."""
        out = self.on_controller("sinfo --noheader --Node --format='%N|%T'", check=False)
        return dict(line.split("|", 1) for line in out.splitlines() if "|" in line)

    def wait_nodes_in_service(self, timeout: float) -> dict[str, str]:
        """Every node's state once all are idle, mixed or allocated; {} if not within timeout."""

        def probe() -> dict[str, str] | None:
            states = self.node_states()
            ok = states and all(re.fullmatch(r"idle|mixed|allocated", s) for s in states.values())
            return states if ok else None

        return wait_for(probe, timeout, interval=2) or {}

    def installed_versions(self) -> dict[str, str]:
        """{host: the version of its installed Slurm (slurm-client, which every host has)}."""
        query = "dpkg-query --show --showformat='${Version}' slurm-client"
        return {host: self.run(host, query) for host in self.cluster.hosts}

    def daemons(self) -> dict[str, str]:
        """{"host daemon": "PID start-time"} of slurmctld, slurmdbd and every slurmd."""
        wanted = [(self.cluster.controller, d) for d in ("slurmdbd", "slurmctld")]
        wanted += [(worker, "slurmd") for worker in self.cluster.workers]
        show = "systemctl show --property=MainPID,ExecMainStartTimestampMonotonic --value"
        return {
            f"{host} {daemon}": " ".join(self.run(host, f"{show} {daemon}").split())
            for host, daemon in wanted
        }

    # --- Converges --------------------------------------------------------------------
    def converge(
        self,
        extra_vars: dict[str, Any],
        workdir: Path,
        playbook: str = str(PROJECT / "site.yml"),
        limit: str | None = None,
    ) -> subprocess.CompletedProcess[str]:
        """site.yml (or another playbook) again, as molecule converges it, with these inventory
        values on top (and on these hosts only)."""
        values = workdir / "extra-vars.json"
        values.write_text(json.dumps(extra_vars))
        # The playbook timings of lab/molecule-test.sh are molecule's converges only.
        env = {k: v for k, v in os.environ.items() if k != "GPULAB_TIMINGS_FILE"}
        # profile_tasks for play_seconds; preload and bytecode as ansible.cfg has them.
        env["ANSIBLE_CALLBACKS_ENABLED"] = (
            "gpulab.cluster.preload,gpulab.cluster.bytecode,ansible.posix.profile_tasks"
        )
        return subprocess.run(
            ["ansible-playbook", "-i", self.cluster.inventory, playbook,
             "--extra-vars", f"@{values}", *(["--limit", limit] if limit else [])],
            capture_output=True, text=True, env=env, check=False, timeout=1200,
        )  # fmt: skip


@dataclass
class StateSampler:
    """Samples every node's state once a second in the background (`with` block)."""

    slurm: Slurm
    seen: dict[str, set[str]] = field(default_factory=dict)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def __enter__(self) -> StateSampler:
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        if self._thread:
            self._thread.join(timeout=30)

    def _sample(self) -> None:
        while not self._stop.is_set():
            for node, state in self.slurm.node_states().items():
                self.seen.setdefault(node, set()).add(state)
            self._stop.wait(1.0)

    def bad(self) -> dict[str, list[str]]:
        """The states seen that a rollout must never cause, by node."""
        return {
            node: sorted(s for s in states if BAD_STATE.search(s))
            for node, states in self.seen.items()
            if any(BAD_STATE.search(s) for s in states)
        }


def decisions(output: str) -> list[str]:
    """The slurm role's decisions in a converge's output, once each (printed per host)."""
    found = re.findall(r'"msg": "(slurm: (?:restart|scontrol reconfigure)[^"]*)"', output)
    return sorted({" ".join(message.split()) for message in found})


# profile_tasks' line under each task: "... (0:00:01.234)       0:01:10.123 ****".
_PROFILE_LINE = re.compile(r"\(\d+:\d\d:\d\d\.\d+\)\s+(\d+):(\d\d):(\d\d\.\d+)")


def play_seconds(output: str) -> list[tuple[str, float]]:
    """[(play name, seconds)] in a playbook's output, in order (a serial play once per batch),
    from the running totals that the profile_tasks callback prints (molecule's ansible.cfg)."""
    marks: list[tuple[str, float]] = []
    play = ""
    for line in output.splitlines():
        if line.startswith("PLAY [") and not line.startswith("PLAY RECAP"):
            play = line[len("PLAY [") : line.index("]")]
        elif play and (found := _PROFILE_LINE.search(line)):
            hours, minutes, seconds = found.groups()
            marks.append((play, int(hours) * 3600 + int(minutes) * 60 + float(seconds)))
            play = ""
    if not marks:
        return []
    hours, minutes, seconds = _PROFILE_LINE.findall(output)[-1]  # the final total
    ends = [mark for _, mark in marks[1:]] + [
        int(hours) * 3600 + int(minutes) * 60 + float(seconds)
    ]
    names = [name for name, _ in marks]  # a serial play's batches numbered
    numbered = [
        f"{n} ({names[:i].count(n) + 1})" if names.count(n) > 1 else n for i, n in enumerate(names)
    ]
    return [
        (n, round(end - start, 1)) for n, (_, start), end in zip(numbered, marks, ends, strict=True)
    ]


def timed(start: float) -> float:
    return round(time.monotonic() - start, 1)
