"""`gpulab submit`: run a graph as a Slurm job, here or on the controller over SSH.

Layers: a Transport runs Slurm's commands and moves files (LocalTransport here, SshTransport
on the controller); staging puts the graph and its files in a job directory on the shared
storage; slurm_client knows Slurm's commands and their output (the collection ships the same
file), slurm runs them through the Transport; lookup finds a job by its tag when sbatch's
answer was lost; job ties them into submit, wait, fetch. Names are imported on first use
(PEP 562): `gpulab run` and `--help` do not load Slurm's client, SSH or logging.
"""

from typing import TYPE_CHECKING

from gpulab._lazy import lazy_attributes

if TYPE_CHECKING:
    from gpulab.submit.defaults import DEFAULT_SHARED_DIR
    from gpulab.submit.job import (
        JobFailed,
        JobForgotten,
        JobOptions,
        SubmittedJob,
        WaitTimedOut,
        fetch_result,
        submit,
        wait,
        wait_for_result,
    )
    from gpulab.submit.local import LocalTransport
    from gpulab.submit.lookup import MaybeQueued, NothingQueued
    from gpulab.submit.slurm import SubmitRejected
    from gpulab.submit.slurm_client import JobState
    from gpulab.submit.ssh import SshTarget, SshTransport, parse_target
    from gpulab.submit.ssh_config import resolve_target
    from gpulab.submit.staging import StagedGraph, prepare
    from gpulab.submit.transport import CommandResult, ConnectionLost, Transport, Unreachable

__all__ = [
    "DEFAULT_SHARED_DIR",
    "CommandResult",
    "ConnectionLost",
    "JobFailed",
    "JobForgotten",
    "JobOptions",
    "JobState",
    "LocalTransport",
    "MaybeQueued",
    "NothingQueued",
    "SshTarget",
    "SshTransport",
    "StagedGraph",
    "SubmitRejected",
    "SubmittedJob",
    "Transport",
    "Unreachable",
    "WaitTimedOut",
    "fetch_result",
    "parse_target",
    "prepare",
    "resolve_target",
    "submit",
    "wait",
    "wait_for_result",
]

__getattr__, __dir__ = lazy_attributes(
    __name__,
    {
        "DEFAULT_SHARED_DIR": "gpulab.submit.defaults",
        "CommandResult": "gpulab.submit.transport",
        "ConnectionLost": "gpulab.submit.transport",
        "JobFailed": "gpulab.submit.job",
        "JobForgotten": "gpulab.submit.job",
        "JobOptions": "gpulab.submit.job",
        "JobState": "gpulab.submit.slurm_client",
        "LocalTransport": "gpulab.submit.local",
        "MaybeQueued": "gpulab.submit.lookup",
        "NothingQueued": "gpulab.submit.lookup",
        "SshTarget": "gpulab.submit.ssh",
        "SshTransport": "gpulab.submit.ssh",
        "StagedGraph": "gpulab.submit.staging",
        "SubmitRejected": "gpulab.submit.slurm",
        "SubmittedJob": "gpulab.submit.job",
        "Transport": "gpulab.submit.transport",
        "Unreachable": "gpulab.submit.transport",
        "WaitTimedOut": "gpulab.submit.job",
        "fetch_result": "gpulab.submit.job",
        "parse_target": "gpulab.submit.ssh",
        "prepare": "gpulab.submit.staging",
        "resolve_target": "gpulab.submit.ssh_config",
        "submit": "gpulab.submit.job",
        "wait": "gpulab.submit.job",
        "wait_for_result": "gpulab.submit.job",
    },
)
