"""The public names of gpulab.submit."""

from __future__ import annotations

import subprocess
import sys

import gpulab.submit


def test_exports_are_pinned() -> None:
    assert sorted(gpulab.submit.__all__) == [
        "CommandResult",
        "ConnectionLost",
        "DEFAULT_SHARED_DIR",
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
    for name in gpulab.submit.__all__:
        assert getattr(gpulab.submit, name) is not None


def test_paramiko_is_imported_only_for_ssh() -> None:
    code = "import sys, gpulab.cli.main; print('paramiko' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "False"
