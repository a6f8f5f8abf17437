"""Argument parsing and the contract's exit codes: 0 ok, 2 bad input, 3 unavailable, 4 failed."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from gpulab._version import __version__
from gpulab.cli import bench, devices, health, run, schema, selftest, submit, validate
from gpulab.cli.errors import (
    EXIT_INPUT,
    EXIT_OK,
    EXIT_RUNTIME,
    EXIT_UNAVAILABLE,
    BackendUnavailable,
)
from gpulab.memory import report as memory_report
from gpulab.vk import NoVulkanDevice, VulkanError


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

    memory_parser = commands.add_parser(
        "memory", help="run an allocation pattern on a device and print the memory statistics"
    )
    memory_parser.add_argument("--device", type=_device_index, default=0, metavar="N")
    memory_parser.add_argument("--json", action="store_true", help="print the result as JSON")

    selftest_parser = commands.add_parser(
        "selftest", help="run every op on small data and compare with numpy"
    )
    selftest_parser.add_argument("--backend", choices=selftest.BACKENDS, default="auto")
    selftest_parser.add_argument(
        "--device",
        type=_device_index,
        metavar="N",
        help="Vulkan device index (default: the GPUs Slurm gave the job, else every device)",
    )
    selftest_parser.add_argument("--json", action="store_true", help="print the result as JSON")
    run.add_parser(commands, _device_index)
    validate.add_parser(commands)
    schema.add_parser(commands)
    bench.add_parser(commands, _device_index)
    health.add_parser(commands, _device_index)
    submit.add_parser(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; errors become one line on stderr and the contract's exit code."""
    args = build_parser().parse_args(argv)
    try:
        if args.command == "memory":
            return memory_report.run(args.json, args.device)
        if args.command == "devices":
            return devices.run(args.json)
        if hasattr(args, "handler"):
            code: int = args.handler(args)
            return code
        return selftest.run(args.backend, args.device, args.json)
    except (NoVulkanDevice, BackendUnavailable) as exc:
        print(f"gpulab: {exc}", file=sys.stderr)
        return EXIT_UNAVAILABLE
    except (VulkanError, MemoryError) as exc:
        print(f"gpulab: {exc}", file=sys.stderr)
        return EXIT_RUNTIME
    except ValueError as exc:
        print(f"gpulab: {exc}", file=sys.stderr)
        return EXIT_INPUT
    except BrokenPipeError:
        # The reader left early (`gpulab devices --json | head`): not a failure of ours.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_OK
