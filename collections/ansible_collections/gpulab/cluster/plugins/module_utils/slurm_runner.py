# Copyright: gpulab contributors
# MIT License (see LICENSE)
"""The one way gpulab modules run Slurm commands: argument lists, never shell strings.

Modules take a runner as a parameter, so unit tests give them a fake one that records
each argv and answers with a fixed return code and output.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

# The one result type of gpulab's runners, shared with the payload's transports.
from ansible_collections.gpulab.cluster.plugins.module_utils.slurm_client import CommandResult

__all__ = ["CommandResult", "Runner", "SlurmRunner"]


class Runner(Protocol):
    """What modules need from a runner: SlurmRunner, or a fake in unit tests."""

    def which(self, name: str) -> str | None: ...

    def run(
        self,
        argv: Sequence[str],
        stdin: str | None = None,
        env: dict[str, str] | None = None,
    ) -> CommandResult: ...


class SlurmRunner:
    """Runs commands through AnsibleModule.run_command and finds them on PATH."""

    def __init__(self, module: Any) -> None:
        self._module = module

    def which(self, name: str) -> str | None:
        """Full path of the command, or None when it is not installed."""
        found: str | None = self._module.get_bin_path(name, required=False)
        return found

    def run(
        self,
        argv: Sequence[str],
        stdin: str | None = None,
        env: dict[str, str] | None = None,
    ) -> CommandResult:
        """Run argv (no shell), feeding stdin, with env added to the environment."""
        rc, out, err = self._module.run_command(
            list(argv), data=stdin, environ_update=env or {}, check_rc=False
        )
        return CommandResult(tuple(argv), rc, out, err)
