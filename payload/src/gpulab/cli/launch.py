"""The `gpulab` command's entry point: the run's driver started (head_start), then the CLI.

The command's start-up (the Vulkan binding, numpy, the backends: some 10^5 objects and no
garbage) imports with Python's cycle collector off, whose walks over what is already imported
cost a cold run 10-20 ms of its imports; resume_collector turns it back on once the command's
own modules are in (a run's, after its graph is loaded and frozen: gpulab.cli.graph_file).
"""

from __future__ import annotations

import gc
import sys
from typing import NoReturn

from gpulab.cli import head_start

_paused = False


def entry() -> NoReturn:
    """`gpulab`: head_start.start on the bare command line, then gpulab.cli.main.entry."""
    global _paused  # noqa: PLW0603 - one command per process
    if gc.isenabled():
        gc.disable()
        _paused = True
    head_start.start(sys.argv[1:])
    from gpulab.cli.main import entry as command  # noqa: PLC0415 - imported after the start

    command()


def resume_collector() -> None:
    """The cycle collector back on if entry() paused it (else nothing: main() called from a
    program keeps that program's collector as it is)."""
    global _paused  # noqa: PLW0603
    if _paused:
        _paused = False
        gc.enable()
