"""The `gpulab` command's entry point: the Vulkan driver started first, then the command.

Importing the command line (argparse's parsers of every command, the graph model they name)
takes 50-90 ms. A `gpulab run` on Vulkan starts creating the instance and its device on a
second thread before that (gpulab.running.early.start_for_command_line), so the driver's
work overlaps those imports too, not only the run's own.
"""

from __future__ import annotations

import contextlib
import os
import sys
from typing import NoReturn


def entry() -> NoReturn:
    """The `gpulab` command: main(), its output flushed, then the process ends at once.

    By then every file the command wrote is closed and renamed into place; what interpreter
    finalization would still do (tear down some 200 modules, run the finalizers of objects
    nothing uses any more) costs 50-100 ms per command and changes nothing outside. A `run`
    leaves its Vulkan device to the process's end too: the driver releases a device, its
    memory and pipelines at exit at once, where destroying them one by one took 40-100 ms on
    the H100. Also after argparse's exits, whose process may have the driver half started on
    the other thread, which the interpreter's own exit could meet mid-call."""
    from gpulab.running.early import start_for_command_line  # noqa: PLC0415 - before main

    start_for_command_line(sys.argv[1:])
    from gpulab.cli.main import main  # noqa: PLC0415 - after the driver's start

    try:
        code = main(process_ends=True)
    except SystemExit as exc:  # argparse's --help, --version and bad flags: said already
        code = exc.code if isinstance(exc.code, int) else int(exc.code is not None)
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):  # a reader that left, a closed stream
            stream.flush()
    os._exit(code)
