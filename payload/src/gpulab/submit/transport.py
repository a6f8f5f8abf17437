"""Where Slurm's commands run and the job's files are read and written: one small interface."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

# The one command result of gpulab (argv, returncode, stdout, stderr), the collection's too.
from gpulab.submit.slurm_client import CommandResult

__all__ = ["CommandResult", "ConnectionLost", "Transport", "Unreachable"]


class Unreachable(RuntimeError):
    """Slurm, its host or a command it needs cannot be reached (exit 3)."""


class ConnectionLost(Unreachable):
    """The connection failed while a command ran (dropped, timed out): the command may have
    run on the host, or not."""


class Transport(Protocol):
    """Runs argument lists and moves whole files on the host that submits to Slurm."""

    @property
    def where(self) -> str:
        """The host, for messages ("this machine", "gpulab@controller1")."""
        ...

    def run(self, argv: Sequence[str]) -> CommandResult:
        """Run argv to completion; Unreachable when the program does not exist there,
        ConnectionLost when the link failed while it ran."""
        ...

    def write_file(self, path: str, data: bytes) -> None:
        """Create or replace a file (its folder exists); OSError when it cannot be written."""
        ...

    def read_file(self, path: str) -> bytes:
        """A whole file; FileNotFoundError when it is missing."""
        ...

    def close(self) -> None:
        """Release the connection, if any; a second call does nothing."""
        ...
