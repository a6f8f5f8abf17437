"""The `gpulab` command's entry point: the run's driver started (head_start), then the CLI."""

from __future__ import annotations

import sys
from typing import NoReturn

from gpulab.cli import head_start


def entry() -> NoReturn:
    """`gpulab`: head_start.start on the bare command line, then gpulab.cli.main.entry."""
    head_start.start(sys.argv[1:])
    from gpulab.cli.main import entry as command  # noqa: PLC0415 - imported after the start

    command()
