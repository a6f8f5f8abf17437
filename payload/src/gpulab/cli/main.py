"""Argument parsing and the contract's exit codes: 0 ok, 2 bad input, 3 unavailable, 4 failed."""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any

from gpulab._version import __version__
from gpulab.backends import BACKENDS
from gpulab.backends.errors import failed_errors, unavailable_errors
from gpulab.cli import bench_args, health, metrics, run, schema, submit, validate
from gpulab.cli.errors import EXIT_INPUT, EXIT_OK, EXIT_RUNTIME, EXIT_UNAVAILABLE

Handler = Callable[[argparse.Namespace], int]


def _deferred(module: str, call: Callable[[Any, argparse.Namespace], int]) -> Handler:
    """A handler that imports `module` (Vulkan, kernels, numpy) only when its command runs,
    so `gpulab --help` and the light commands start fast."""
    return lambda args: call(importlib.import_module(module), args)


def _device_index(text: str) -> int:
    try:
        index = int(text)
    except ValueError:
        index = -1
    if index < 0:
        raise argparse.ArgumentTypeError(f"expected a device index (0, 1, ...), got {text!r}")
    return index


def build_parser() -> argparse.ArgumentParser:
    """The parser of every subcommand (argparse exits 2 on bad flags)."""
    parser = argparse.ArgumentParser(prog="gpulab", description="A small Vulkan compute framework.")
    parser.add_argument("--version", action="version", version=f"gpulab {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    devices_parser = commands.add_parser("devices", help="list Vulkan devices and compute limits")
    devices_parser.add_argument("--json", action="store_true", help="print a JSON list")
    devices_parser.set_defaults(
        handler=_deferred("gpulab.cli.devices", lambda devices, a: devices.run(a.json))
    )

    memory_parser = commands.add_parser(
        "memory", help="run an allocation pattern on a device and print the memory statistics"
    )
    memory_parser.add_argument("--device", type=_device_index, default=0, metavar="N")
    memory_parser.add_argument("--json", action="store_true", help="print the result as JSON")
    memory_parser.set_defaults(
        handler=_deferred("gpulab.memory.report", lambda report, a: report.run(a.json, a.device))
    )

    selftest_parser = commands.add_parser(
        "selftest", help="run every op on small data and compare with numpy"
    )
    selftest_parser.add_argument("--backend", choices=BACKENDS, default="auto")
    selftest_parser.add_argument(
        "--device",
        type=_device_index,
        metavar="N",
        help="Vulkan device index (default: the GPUs Slurm gave the job, else every device)",
    )
    selftest_parser.add_argument("--json", action="store_true", help="print the result as JSON")
    selftest_parser.set_defaults(
        handler=_deferred(
            "gpulab.cli.selftest", lambda selftest, a: selftest.run(a.backend, a.device, a.json)
        )
    )
    run.add_parser(commands, _device_index)
    validate.add_parser(commands)
    schema.add_parser(commands)
    bench_args.add_parser(
        commands, _device_index, _deferred("gpulab.cli.bench", lambda bench, a: bench.main(a))
    )
    health.add_parser(commands, _device_index)
    submit.add_parser(commands)
    metrics.add_parser(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; errors become one line on stderr and the contract's exit code."""
    args = build_parser().parse_args(argv)
    try:
        code: int = args.handler(args)
        return code
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
