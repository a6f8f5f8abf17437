"""The cluster under test, commands in its containers, and jobs whose results are checked.

A job result counts as lost when Slurm reports the job COMPLETED but its complete output is
not on the shared storage, or when a submitted job is unknown to Slurm (it vanished).
Jobs publish their results atomically (a rename, or a manifest written last; `gpulab run`
renames its result JSON), so a job cut short leaves no result that looks complete.
"""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import time
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

from gpulab.submit.slurm_client import parse_node_states, sinfo_nodes_argv

from lab.cluster_under_test import Cluster, wait_for

# States after which Slurm will not run the job again.
TERMINAL_STATES = {
    "COMPLETED",
    "FAILED",
    "CANCELLED",
    "TIMEOUT",
    "NODE_FAIL",
    "OUT_OF_MEMORY",
    "BOOT_FAIL",
    "DEADLINE",
    "PREEMPTED",
}
JOB_SCRIPTS = Path(__file__).parent / "jobs"
# How long the jobs of a fault or drill may take to reach their final states.
FINAL_TIMEOUT = 420
# jobs/drill-graph.json's output n: 2 * (1 + ... + 1024), exact in float32.
DRILL_GRAPH_SUM = 1049600.0


@dataclass
class Lab:
    """Runs commands in the cluster's containers and reads Slurm's view of it."""

    cluster: Cluster

    def run(
        self,
        host: str,
        script: str,
        *,
        user: str | None = None,
        stdin: str | None = None,
        check: bool = True,
        timeout: float = 180,
    ) -> subprocess.CompletedProcess[str]:
        argv = ["podman", "exec", "-i"] + (["--user", user] if user else [])
        argv += [self.cluster.container(host), "bash", "-c", script]
        done = subprocess.run(
            argv, input=stdin or "", capture_output=True, text=True, timeout=timeout, check=False
        )
        if check and done.returncode != 0:
            raise AssertionError(
                f"{host}: `{script}` exited {done.returncode}: {done.stderr.strip()}"
            )
        return done

    def on_controller(self, script: str, **kwargs: Any) -> str:
        return self.run(self.cluster.controller, script, **kwargs).stdout

    @property
    def job_user(self) -> str:
        users = self.cluster.var("identity_users") or [{"name": "root"}]
        return str(users[0]["name"])

    @property
    def shared_dir(self) -> str:
        return str(self.cluster.var("nfs_client_mount_point"))

    @property
    def nfs_url(self) -> str:
        export = self.cluster.var("nfs_server_export_path")
        return f"nfs://{self.cluster.storage}{export}"

    def nodename(self, host: str) -> str:
        """The Slurm NodeName of an inventory host: its hostname, not its inventory name."""
        return self.cluster.node_name(host)

    # --- Slurm's view of the nodes ------------------------------------------------
    def node_states(self) -> dict[str, tuple[str, str]]:
        """{NodeName: (state, reason)} from sinfo: the base state, with a trailing * when the
        node's slurmd does not answer."""
        done = self.run(self.cluster.controller, shlex.join(sinfo_nodes_argv()), check=False)
        return {
            node.node: (node.state + ("" if node.responding else "*"), node.reason)
            for node in parse_node_states(done.stdout)
        }

    @staticmethod
    def in_service(state: str) -> bool:
        return re.fullmatch(r"(idle|mixed|allocated|completing)", state) is not None

    def worker_state(self, host: str) -> tuple[str, str]:
        return self.node_states().get(self.nodename(host), ("missing", ""))

    def wait_workers_in_service(self, timeout: float) -> dict[str, tuple[str, str]]:
        names = [self.nodename(w) for w in self.cluster.workers]

        def probe() -> dict[str, tuple[str, str]] | None:
            states = self.node_states()
            if all(self.in_service(states.get(n, ("missing", ""))[0]) for n in names):
                return states
            return None

        return wait_for(probe, timeout, interval=2) or {
            n: self.node_states().get(n, ("missing", "")) for n in names
        }

    def slurmctld_answers(self) -> bool:
        return (
            self.run(
                self.cluster.controller, "squeue --noheader >/dev/null", check=False
            ).returncode
            == 0
        )

    def log_tail_since(self, host: str, path: str, marker: int) -> str:
        """The lines a log gained after `marker` bytes (see log_size)."""
        return self.run(host, f"tail -c +{marker + 1} {shlex.quote(path)}", check=False).stdout

    def log_size(self, host: str, path: str) -> int:
        out = self.run(
            host, f"stat -c %s {shlex.quote(path)} 2>/dev/null || echo 0", check=False
        ).stdout
        return int(out.strip() or 0)


@dataclass
class Job:
    job_id: str
    # "local": one file on the share, renamed when complete; "nfs": parts over NFS, then a
    # manifest; "gpulab": `gpulab run` of jobs/drill-graph.json after `steps` seconds
    kind: str
    steps: int


@dataclass
class JobRun:
    """Jobs of one fault test, all writing below one directory of the shared storage."""

    lab: Lab
    name: str
    jobs: list[Job] = field(default_factory=list)

    @cached_property
    def directory(self) -> str:
        path = f"{self.lab.shared_dir}/jobs/faults/{self.name}-{time.strftime('%H%M%S')}"
        lab = self.lab
        lab.on_controller(f"mkdir -p {path}", user=lab.job_user)
        for source in JOB_SCRIPTS.iterdir():
            target = f"{path}/{source.name}"
            mode = "0755" if source.suffix == ".sh" else "0644"
            lab.on_controller(
                f"cat > {target} && chmod {mode} {target}",
                user=lab.job_user,
                stdin=source.read_text(),
            )
        return path

    def submit(
        self,
        *,
        kind: str = "local",
        steps: int = 10,
        node: str | None = None,
        exclusive: bool = False,
        output: str | None = None,
    ) -> Job:
        """sbatch one job; `output` is the job's stdout and stderr file on its node (default
        slurm-JOBID.out in the run's directory: a %j in it is the job id)."""
        lab = self.lab
        args = [
            "sbatch",
            "--parsable",
            f"--job-name=fault-{self.name}",
            f"--chdir={self.directory}",
            f"--output={output or self.directory + '/slurm-%j.out'}",
        ]
        if node:
            args.append(f"--nodelist={lab.nodename(node)}")
        if exclusive:
            args.append("--exclusive")
        submitter = lab.job_user
        if kind == "nfs":
            # A stand-in for the kernel's NFS client, which the lab's kernel lacks: the export
            # takes requests from privileged ports only (nfs_server: a user's own client cannot
            # claim another uid), so the job runs as root, whose libnfs binds one, and speaks
            # for the job user's uid and gid as a kernel mount would.
            submitter = "root"
            ids = self.lab.on_controller(f"id -u {lab.job_user}; id -g {lab.job_user}").split()
            args += [
                f"{self.directory}/write-nfs.sh",
                f"{lab.nfs_url}{self._share_relative}",
                str(steps),
                "120",
                f"?uid={ids[0]}&gid={ids[1]}",
            ]
        elif kind == "gpulab":
            args += [f"{self.directory}/gpulab-run.sh", self.directory, str(steps)]
        else:
            args += [f"{self.directory}/write-local.sh", self.directory, str(steps)]
        job_id = lab.on_controller(shlex.join(args), user=submitter).strip().split(";")[0]
        job = Job(job_id, kind, steps)
        self.jobs.append(job)
        return job

    @property
    def _share_relative(self) -> str:
        return self.directory.removeprefix(self.lab.shared_dir)

    # --- Slurm's view of the jobs -------------------------------------------------
    def job_fields(self, job: Job) -> dict[str, str]:
        """scontrol's fields for the job; sacct's State and ExitCode once slurmctld forgot it."""
        done = self.lab.run(
            self.lab.cluster.controller, f"scontrol --oneliner show job {job.job_id}", check=False
        )
        if done.returncode == 0 and "JobState=" in done.stdout:
            return dict(item.split("=", 1) for item in done.stdout.split() if "=" in item)
        acct = self.lab.on_controller(
            f"sacct --noheader --allocations --parsable2 --format=State,ExitCode -j {job.job_id}",
            check=False,
        ).strip()
        if not acct:
            return {}
        state, exit_code = acct.splitlines()[-1].split("|")
        return {"JobState": state.split()[0], "ExitCode": exit_code}

    def state(self, job: Job) -> str:
        return self.job_fields(job).get("JobState", "UNKNOWN")

    def wait_running(self, job: Job, timeout: float = 120) -> bool:
        return bool(wait_for(lambda: self.state(job) == "RUNNING", timeout))

    def progress(self, job: Job) -> int:
        """How many steps the job's current run has written (parts on the share)."""
        pattern = f"{job.job_id}.r*.p*" if job.kind == "nfs" else f"{job.job_id}.run*.part"
        script = f"cd {self.directory} && cat {pattern} 2>/dev/null | wc -l"
        return int(self.lab.on_controller(script, check=False).strip() or 0)

    def wait_final(self, timeout: float) -> dict[str, str]:
        """{job id: final state}; a state counts as final when two polls 3 s apart agree."""
        finals: dict[str, str] = {}
        deadline = time.monotonic() + timeout
        previous: dict[str, str] = {}
        while True:
            for job in self.jobs:
                if job.job_id in finals:
                    continue
                state = self.state(job)
                if state in TERMINAL_STATES and previous.get(job.job_id) == state:
                    finals[job.job_id] = state
                previous[job.job_id] = state
            if len(finals) == len(self.jobs) or time.monotonic() > deadline:
                return finals | {
                    j.job_id: previous.get(j.job_id, "UNKNOWN")
                    for j in self.jobs
                    if j.job_id not in finals
                }
            time.sleep(3)

    def settle(self, timeout: float = FINAL_TIMEOUT) -> tuple[dict[str, str], list[str]]:
        """The jobs' final states (wait_final) and the results lost among them (lost)."""
        finals = self.wait_final(timeout)
        return finals, self.lost(finals)

    # --- The results ----------------------------------------------------------------
    def read(self, name: str) -> str | None:
        done = self.lab.run(
            self.lab.cluster.controller, f"cat {self.directory}/{name}", check=False
        )
        return done.stdout if done.returncode == 0 else None

    def listing(self) -> list[str]:
        return self.lab.on_controller(f"ls -1 {self.directory}").split()

    def result_complete(self, job: Job) -> bool:
        """The job's published result holds every step, in order."""
        if job.kind == "gpulab":
            return gpulab_result_complete(self.read(f"{job.job_id}.gpulab.json"))
        expected_parts = [f"{job.job_id} {i}" for i in range(1, job.steps + 1)]
        if job.kind == "local":
            text = self.read(f"{job.job_id}.result")
            return text is not None and text.splitlines() == [
                *expected_parts,
                f"{job.job_id} done {job.steps}",
            ]
        manifests = [
            n for n in self.listing() if re.fullmatch(rf"{job.job_id}\.r\d+\.result\.a\d+", n)
        ]
        return any(self._manifest_complete(job, m, expected_parts) for m in manifests)

    def _manifest_complete(self, job: Job, manifest: str, expected_parts: list[str]) -> bool:
        lines = (self.read(manifest) or "").splitlines()
        if len(lines) != job.steps + 1 or lines[-1] != f"{job.job_id} done {job.steps}":
            return False
        for i, line in enumerate(lines[:-1], start=1):
            fields = line.split()
            if fields[:2] != ["part", str(i)] or len(fields) != 3:
                return False
            if (self.read(fields[2]) or "").strip() != expected_parts[i - 1]:
                return False
        return True

    def starts(self, job: Job) -> int:
        """How many times the job started (write-local.sh appends a line at each start)."""
        return len((self.read(f"{job.job_id}.starts") or "").splitlines())

    def output(self, job: Job) -> str:
        return self.read(f"slurm-{job.job_id}.out") or ""

    def lost(self, finals: dict[str, str]) -> list[str]:
        """Job results lost: COMPLETED without the complete result, vanished, or never finished."""
        lost = []
        for job in self.jobs:
            state = finals[job.job_id]
            if state == "UNKNOWN":
                lost.append(f"job {job.job_id} vanished (neither scontrol nor sacct knows it)")
            elif state == "COMPLETED" and not self.result_complete(job):
                lost.append(f"job {job.job_id} COMPLETED without its complete result")
            elif state not in TERMINAL_STATES:
                lost.append(f"job {job.job_id} still {state}: no result and no final state")
        return lost


def gpulab_result_complete(text: str | None) -> bool:
    """A `gpulab run` result JSON of jobs/drill-graph.json with the exact answer."""
    if not text:
        return False
    try:
        document = json.loads(text)
        return bool(document["outputs"]["n"]["value"] == DRILL_GRAPH_SUM)
    except (ValueError, KeyError, TypeError):
        return False
