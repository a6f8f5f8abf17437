"""Argument parsing and the contract's exit codes: 0 ok, 2 bad input, 3 unavailable, 4 failed."""

from __future__ import annotations

import argparse
import contextlib
import importlib
import os
import sys
from collections.abc import Sequence
from typing import NoReturn

from gpulab._version import __version__
from gpulab.backends.errors import failed_errors, unavailable_errors
from gpulab.cli.arguments import Parser
from gpulab.cli.epilog import epilog
from gpulab.cli.errors import (
    EXIT_INPUT,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_RUNTIME,
    EXIT_TERMINATED,
    EXIT_UNAVAILABLE,
)
from gpulab.cli.graph_file import collector_handed_back
from gpulab.cli.output import say
from gpulab.cli.signals import Terminated, sigterm_unwinds

COMMANDS = (
    "devices",
    "memory",
    "selftest",
    "run",
    "validate",
    "schema",
    "bench",
    "health",
    "submit",
    "metrics",
    "worker",
    "completion",
)
"""The subcommands, each the module gpulab.cli.NAME that registers its parser and handler; a
handler imports what its command needs (Vulkan, kernels, numpy) only when it runs, so
`gpulab --help` and the light commands start fast."""


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The parser of every subcommand (argparse exits 2 on bad flags); with `only`, of that
    one alone, whose module is then the only command module imported (a command line that
    names its command parses the same either way, about 10 ms sooner)."""
    parser = Parser(
        prog="gpulab",
        description="A small Vulkan compute framework.",
        epilog=epilog(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"gpulab {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in COMMANDS if only is None else (only,):
        importlib.import_module(f"gpulab.cli.{name}").add_parser(commands)
    return parser


def main(argv: Sequence[str] | None = None, *, process_ends: bool = False) -> int:
    """Run one command; errors become one line on stderr and the contract's exit code.
    `process_ends`: the process ends with the command (the `gpulab` command), so a command
    may leave what it holds (a Vulkan device and its memory) to the process's end instead of
    releasing it object by object."""
    return run_command(parse_command(list(sys.argv[1:] if argv is None else argv), process_ends))


def parse_command(argv: list[str], process_ends: bool = False) -> argparse.Namespace:
    """The parsed command line (argparse exits 2 on bad flags), with what the handlers read
    beside the flags: `argv` as given (run --worker hands it on) and `process_ends`."""
    named = argv[0] if argv and argv[0] in COMMANDS else None
    args = build_parser(named).parse_args(argv)
    args.argv = argv
    args.process_ends = process_ends
    return args


def run_command(args: argparse.Namespace) -> int:
    """The parsed command's handler; its errors become one line on stderr and the contract's
    exit code."""
    try:
        with sigterm_unwinds(), collector_handed_back():
            code: int = args.handler(args)
        return code
    except Terminated:
        say("stopped by SIGTERM")
        return EXIT_TERMINATED
    except KeyboardInterrupt:
        say("stopped by Ctrl-C")
        return EXIT_INTERRUPTED
    except unavailable_errors() as exc:
        print(f"gpulab: {exc}", file=sys.stderr)
        return EXIT_UNAVAILABLE
    except failed_errors() as exc:
        print(f"gpulab: {exc}", file=sys.stderr)
        return EXIT_RUNTIME
    except ValueError as exc:
        print(f"gpulab: {exc}", file=sys.stderr)
        return EXIT_INPUT
    except BrokenPipeError:
        # The reader left early (`gpulab devices --json | head`): not a failure of ours.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_OK


def entry() -> NoReturn:
    """The `gpulab` command: main(), its output flushed, then the process ends at once.

    By then every file the command wrote is closed and renamed into place; what interpreter
    finalization would still do (tear down some 200 modules, run the finalizers of objects
    nothing uses any more) costs 50-100 ms per command and changes nothing outside. A `run`
    leaves its Vulkan device to the process's end too: the driver releases a device, its
    memory and pipelines at exit at once, where destroying them one by one took 40-100 ms on
    the H100. argparse's own exits (--help, bad flags) end the same way: the driver thread
    the launcher may have started (head_start) can still be inside the driver, which an
    interpreter's exit would unload under it."""
    try:
        code = main(process_ends=True)
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 0 if exc.code is None else 1
        if isinstance(exc.code, str):
            print(exc.code, file=sys.stderr)
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):  # a reader that left, a closed stream
            stream.flush()
    os._exit(code)
