"""LocalTransport: Slurm's commands on this machine, for a user on a login node or controller."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path

from gpulab.submit.transport import CommandResult, Unreachable


class LocalTransport:
    """Runs commands as argument lists (no shell) and uses the local file system."""

    where = "this machine"

    @staticmethod
    def available() -> bool:
        """Whether Slurm's client commands are here (`sbatch` on PATH)."""
        return shutil.which("sbatch") is not None

    def run(self, argv: Sequence[str]) -> CommandResult:
        """Run argv to completion and capture its output."""
        try:
            done = subprocess.run(list(argv), capture_output=True, text=True, check=False)
        except FileNotFoundError:
            raise Unreachable(f"{argv[0]}: not found on PATH on {self.where}") from None
        return CommandResult(tuple(argv), done.returncode, done.stdout, done.stderr)

    def write_file(self, path: str, data: bytes) -> None:
        """Create or replace a file."""
        Path(path).write_bytes(data)

    def read_file(self, path: str) -> bytes:
        """A whole file."""
        return Path(path).read_bytes()

    def close(self) -> None:
        """Nothing to release."""
