"""`gpulab devices`: a compute-focused vulkaninfo (see gpulab.diagnostics.devices)."""

from __future__ import annotations

import argparse
from typing import Any

from gpulab.cli.errors import EXIT_OK


def add_parser(commands: Any) -> None:
    """Register `devices` on the subcommand parsers."""
    parser = commands.add_parser("devices", help="list Vulkan devices and compute limits")
    parser.add_argument("--json", action="store_true", help="print a JSON list")
    parser.set_defaults(handler=main)


def main(args: argparse.Namespace) -> int:
    """Print the devices as a table or as the contract's JSON list."""
    from gpulab.diagnostics.devices import describe  # noqa: PLC0415 - loads Vulkan

    print(describe(args.json))
    return EXIT_OK
