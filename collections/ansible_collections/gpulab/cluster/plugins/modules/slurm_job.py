#!/usr/bin/python
# Copyright: gpulab contributors
# MIT License (see LICENSE)
"""Ansible module gpulab.cluster.slurm_job: submit, wait for or cancel a Slurm job."""

# Ansible modules import after DOCUMENTATION, EXAMPLES and RETURN.
# ruff: noqa: E402

from __future__ import annotations

DOCUMENTATION = r"""
---
module: slurm_job
short_description: Submit a Slurm batch job, optionally wait for it, or cancel jobs
description:
  - Submits a batch script (O(script) or O(script_path)) or a command (O(command))
    with C(sbatch --parsable) and reports the job id, its state, exit code and output path.
  - With O(wait=true), polls C(scontrol show job) (or C(sacct) once slurmctld has forgotten the job)
    until the job ends, and fails when it did not complete with exit code 0.
  - O(state=present) submits only when no pending or running job of yours has this O(name);
    O(state=absent) cancels your pending or running jobs with this O(name) or O(job_id).
  - Runs on a host with the Slurm client commands and a readable slurm.conf, usually the controller.
version_added: "1.0.0"
author: gpulab contributors (@gpulab)
options:
  state:
    description:
      - V(submitted) submits a new job on every run.
      - V(present) submits only when none of your pending or running jobs has this O(name),
        which it then needs.
      - V(absent) cancels your pending or running jobs with this O(name) or O(job_id).
    type: str
    choices: [submitted, present, absent]
    default: submitted
  script:
    description: Batch script content (starting with C(#!)), passed to sbatch on stdin.
    type: str
  script_path:
    description: Path of a batch script on the managed host.
    type: path
  command:
    description: A shell command line to run as the job (C(sbatch --wrap)).
    type: str
  job_id:
    description: The job to cancel with O(state=absent).
    type: str
  name:
    description: Job name (C(--job-name)).
    type: str
  partition:
    description: Partition (C(--partition)); default the cluster's default partition.
    type: str
  nodelist:
    description: Nodes the job must run on (C(--nodelist)), e.g. C(worker1) or C(worker[1-2]).
    type: str
  nodes:
    description: Number of nodes (C(--nodes)).
    type: int
  ntasks:
    description: Number of tasks (C(--ntasks)).
    type: int
  gres:
    description:
      - Generic resources per node (C(--gres)), e.g. C(gpu:1) or C(gpu:h200:2).
      - On a node whose cgroups constrain devices, a job sees only the GPUs it asked for here.
    type: str
  chdir:
    description:
      - Working directory of the job (C(--chdir)), where relative output paths point.
      - Default the home directory of the user the module runs as, rather than the module's
        own working directory, which may not exist on the nodes.
    type: path
  output:
    description: Path of the job's stdout on the node that runs it (C(--output));
      Slurm's patterns such as C(%j) apply.
    type: str
  error:
    description: Path of the job's stderr (C(--error)); default with stdout.
    type: str
  environment:
    description: Variables set for sbatch and exported to the job
      (C(--export=ALL) is Slurm's default).
    type: dict
    default: {}
  sbatch_args:
    description: More sbatch options, one list item per argument, e.g. C([--time=5, --mem=100]).
    type: list
    elements: str
    default: []
  wait:
    description: Wait until the job ends; fail unless it completed with exit code 0.
    type: bool
    default: false
  timeout:
    description: Seconds to wait with O(wait=true) before failing; the job keeps running.
    type: int
    default: 600
  poll_interval:
    description:
      - Longest wait in seconds between two state checks with O(wait=true).
      - The checks start 0.25 s apart and each gap is a quarter of the time waited so far, up
        to this, so that a job of a second or two returns within a quarter second of its end
        rather than up to a whole interval later.
    type: float
    default: 2.0
  tail_lines:
    description: Lines of the job's stdout and stderr to return when this host can read them.
    type: int
    default: 20
attributes:
  check_mode:
    description: Runs in check mode, predicting the change and making none.
    support: full
    details: Reports the job that would be submitted or cancelled, and submits or cancels nothing.
  diff_mode:
    description: Shows in diff mode what changed (or would change in check mode).
    support: none
requirements:
  - Slurm client commands (sbatch, scontrol, squeue, scancel) on the managed host.
notes:
  - Job output lands on the node that ran the job; RV(stdout_tail) is filled only when that file
    is readable here, for example on a shared file system.
"""

EXAMPLES = r"""
- name: Run hostname on worker1 and wait for it
  gpulab.cluster.slurm_job:
    command: hostname
    nodelist: worker1
    output: /home/gpulab/hostname-%j.out
    wait: true
  become: true
  become_user: gpulab

- name: Submit a batch script once, by name
  gpulab.cluster.slurm_job:
    state: present
    name: nightly-selftest
    script: |
      #!/bin/sh
      #SBATCH --time=10
      gpulab selftest --json
    partition: main

- name: Run the self-test on one GPU of worker1
  gpulab.cluster.slurm_job:
    command: gpulab selftest --backend vulkan --json
    nodelist: worker1
    gres: gpu:1
    wait: true

- name: Cancel it
  gpulab.cluster.slurm_job:
    state: absent
    name: nightly-selftest
"""

RETURN = r"""
job_id:
  description: Id of the job submitted or found; null in check mode when a job would be submitted.
  returned: when a job was submitted or found
  type: str
  sample: "42"
job_ids:
  description: Ids of the jobs cancelled (or that would be) with O(state=absent).
  returned: state is absent
  type: list
  elements: str
  sample: ["42"]
state:
  description: Slurm job state when the module returned
    (PENDING, RUNNING, COMPLETED, FAILED, TIMEOUT, ...).
  returned: when a job was submitted or found
  type: str
  sample: COMPLETED
exit_code:
  description: Exit code of the job's script; null while it runs.
  returned: when a job was submitted or found
  type: int
  sample: 0
signal:
  description: Signal that ended the job, 0 if none; null while it runs.
  returned: when a job was submitted or found
  type: int
  sample: 0
elapsed:
  description: Run time of the job in seconds, as Slurm counts it.
  returned: when a job was submitted or found
  type: int
  sample: 1
output_path:
  description: Path of the job's stdout on the node that ran it.
  returned: when a job was submitted or found
  type: str
  sample: /home/gpulab/slurm-42.out
nodes:
  description: Nodes the job ran on.
  returned: when a job was submitted or found
  type: str
  sample: worker1
stdout_tail:
  description: Last O(tail_lines) lines of the job's stdout, when readable on this host.
  returned: when the job ended and its stdout is readable here
  type: str
  sample: worker1
stderr_tail:
  description: Last O(tail_lines) lines of the job's stderr, when it is a separate file
    readable here.
  returned: when the job ended and its stderr is readable here
  type: str
  sample: ""
"""

import os
import pwd
import time
from collections.abc import Callable
from typing import Any

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.gpulab.cluster.plugins.module_utils.slurm_client import (
    JobState,
    SlurmClient,
    SlurmError,
    WaitTimedOut,
    parse_job_id,
    parse_squeue_lines,
    sbatch_argv,
    scancel_argv,
    squeue_named_argv,
)
from ansible_collections.gpulab.cluster.plugins.module_utils.slurm_runner import (
    CommandResult,
    Runner,
    SlurmRunner,
)

ARGUMENT_SPEC: dict[str, Any] = {
    "state": {"type": "str", "choices": ["submitted", "present", "absent"], "default": "submitted"},
    "script": {"type": "str"},
    "script_path": {"type": "path"},
    "command": {"type": "str"},
    "job_id": {"type": "str"},
    "name": {"type": "str"},
    "partition": {"type": "str"},
    "nodelist": {"type": "str"},
    "nodes": {"type": "int"},
    "ntasks": {"type": "int"},
    "gres": {"type": "str"},
    "chdir": {"type": "path"},
    "output": {"type": "str"},
    "error": {"type": "str"},
    "environment": {"type": "dict", "default": {}},
    "sbatch_args": {"type": "list", "elements": "str", "default": []},
    "wait": {"type": "bool", "default": False},
    "timeout": {"type": "int", "default": 600},
    "poll_interval": {"type": "float", "default": 2.0},
    "tail_lines": {"type": "int", "default": 20},
}
JOB_SOURCES = ("script", "script_path", "command")
# The shortest gap between two state checks (slurm_client.poll_gap: a quarter of the time
# waited, up to poll_interval): a late answer costs at most a quarter of the job's time, a job
# of a few seconds a few more scontrol calls.
FIRST_POLL_S = 0.25
MODULE_KWARGS: dict[str, Any] = {
    "mutually_exclusive": [
        JOB_SOURCES,
        ("job_id", "script"),
        ("job_id", "script_path"),
        ("job_id", "command"),
    ],
    "required_if": [
        ("state", "submitted", JOB_SOURCES, True),
        ("state", "present", JOB_SOURCES, True),
        ("state", "present", ("name",)),
        ("state", "absent", ("job_id", "name"), True),
    ],
    "supports_check_mode": True,
}
# Module options passed to sbatch_argv under the same name.
SBATCH_OPTIONS = ("partition", "nodelist", "nodes", "ntasks", "gres", "chdir", "output", "error")


class SlurmJobError(Exception):
    """A failure to report with fail_json: a message and the result so far."""

    def __init__(self, msg: str, **result: Any) -> None:
        super().__init__(msg)
        self.result = result


class SlurmJob:
    """What the module does, with the runner, the clock and sleep passed in."""

    def __init__(
        self,
        params: dict[str, Any],
        runner: Runner,
        check_mode: bool = False,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.params = params
        self.runner = runner
        self.check_mode = check_mode
        self.clock = clock
        self.sleep = sleep
        self.client = SlurmClient(runner.run, runner.which)

    def apply(self) -> dict[str, Any]:
        if self.params["state"] == "absent":
            return self.cancel()
        if self.params["state"] == "present":
            active = self.active_jobs()
            if active:
                return self.report(active[0], changed=False)
        return self.submit()

    # --- commands -------------------------------------------------------------

    def tool(self, name: str) -> str:
        try:
            return self.client.program(name)
        except SlurmError as error:
            raise SlurmJobError(str(error)) from None

    def resolve(self, argv: list[str]) -> list[str]:
        """argv with its program's path, as the client finds it."""
        try:
            return self.client.resolve(argv)
        except SlurmError as error:
            raise SlurmJobError(str(error)) from None

    def run(
        self, argv: list[str], stdin: str | None = None, env: dict[str, str] | None = None
    ) -> CommandResult:
        result = self.runner.run(argv, stdin=stdin, env=env)
        if result.returncode != 0:
            detail = (result.stderr or result.stdout).strip() or "no output"
            raise SlurmJobError(
                f"{os.path.basename(argv[0])} failed (rc {result.returncode}): {detail}",
                cmd=argv,
                rc=result.returncode,
            )
        return result

    def sbatch_argv(self) -> list[str]:
        return sbatch_argv(
            sbatch=self.tool("sbatch"),
            job_name=self.params["name"],
            extra=self.params["sbatch_args"],
            wrap=self.params["command"],
            script=self.params["script_path"],
            **{option: self.params[option] for option in SBATCH_OPTIONS},
        )

    # --- state ----------------------------------------------------------------

    def submit(self) -> dict[str, Any]:
        argv = self.sbatch_argv()
        if self.check_mode:
            return {"changed": True, "job_id": None, "cmd": argv, "msg": "a job would be submitted"}
        env = {str(k): str(v) for k, v in self.params["environment"].items()}
        result = self.run(argv, stdin=self.params["script"], env=env)
        try:
            job_id = parse_job_id(result.stdout)
        except ValueError as error:
            raise SlurmJobError(str(error), cmd=argv) from None
        return self.report(job_id, changed=True)

    def report(self, job_id: str, changed: bool) -> dict[str, Any]:
        info = self.wait_for(job_id) if self.params["wait"] else self.job_info(job_id)
        result = describe(info, self.params["tail_lines"])
        result["changed"] = changed
        if info.finished and (info.state != "COMPLETED" or info.exit_code != 0):
            raise SlurmJobError(
                f"job {job_id} ended {info.state} with exit code {info.exit_code}"
                + (f" (signal {info.signal})" if info.signal else ""),
                **result,
            )
        return result

    def job_info(self, job_id: str) -> JobState:
        # slurmctld forgets a finished job after MinJobAge; the accounting database does not.
        try:
            return self.client.job_state(job_id)
        except SlurmError as error:
            raise SlurmJobError(str(error), job_id=job_id) from None

    def wait_for(self, job_id: str) -> JobState:
        try:
            return self.client.wait_for_end(
                job_id,
                timeout=self.params["timeout"],
                longest_gap=self.params["poll_interval"],
                first_gap=FIRST_POLL_S,
                clock=self.clock,
                sleep=self.sleep,
            )
        except WaitTimedOut as timed_out:
            raise SlurmJobError(
                f"{timed_out}; it keeps running (cancel it with state=absent)",
                **describe(timed_out.state, 0),
            ) from None
        except SlurmError as error:
            raise SlurmJobError(str(error), job_id=job_id) from None

    def active_jobs(self) -> list[str]:
        """Your pending or running jobs named params['name'], oldest first."""
        listed = self.run(self.resolve(squeue_named_argv(self.params["name"])))
        return sorted(
            (
                job_id
                for job_id, state in parse_squeue_lines(listed.stdout)
                if not JobState(state).finished
            ),
            key=lambda job_id: (
                int(job_id.split("_", 1)[0]) if job_id.split("_", 1)[0].isdigit() else 0
            ),
        )

    def cancel(self) -> dict[str, Any]:
        if self.params["job_id"] is not None:
            info = self.job_info(self.params["job_id"])
            targets = [] if info.finished else [info.job_id]
        else:
            targets = self.active_jobs()
        if targets and not self.check_mode:
            self.run(self.resolve(scancel_argv(targets)))
        return {"changed": bool(targets), "job_ids": targets}


def describe(info: JobState, tail_lines: int) -> dict[str, Any]:
    """The module's return values for a job."""
    result: dict[str, Any] = {
        "job_id": info.job_id,
        "state": info.state,
        "exit_code": info.exit_code if info.finished else None,
        "signal": info.signal if info.finished else None,
        "elapsed": info.elapsed,
        "output_path": info.stdout_path or None,
        "nodes": info.nodes or None,
    }
    if info.finished and tail_lines > 0:
        stdout = read_tail(info.stdout_path, tail_lines)
        if stdout is not None:
            result["stdout_tail"] = stdout
        if info.stderr_path != info.stdout_path:
            stderr = read_tail(info.stderr_path, tail_lines)
            if stderr is not None:
                result["stderr_tail"] = stderr
    return result


def read_tail(path: str | None, lines: int) -> str | None:
    """The last lines of a file, or None when it is not readable on this host."""
    if not path:
        return None
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            return "".join(handle.readlines()[-lines:])
    except OSError:
        return None


def home_dir() -> str:
    """The user's home directory as `~` names it: $HOME, else the password database's."""
    return os.environ.get("HOME") or pwd.getpwuid(os.getuid()).pw_dir


def main() -> None:
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, **MODULE_KWARGS)
    if module.params["chdir"] is None:
        module.params["chdir"] = home_dir()
    try:
        result = SlurmJob(module.params, SlurmRunner(module), check_mode=module.check_mode).apply()
    except SlurmJobError as error:
        module.fail_json(msg=str(error), **error.result)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
