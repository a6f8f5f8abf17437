"""`gpulab memory`: an allocation pattern's memory statistics (see
gpulab.diagnostics.memory_report)."""

from __future__ import annotations

import argparse
from typing import Any

from gpulab.cli.arguments import add_device
from gpulab.cli.errors import EXIT_OK


def add_parser(commands: Any) -> None:
    """Register `memory` on the subcommand parsers."""
    parser = commands.add_parser(
        "memory", help="run an allocation pattern on a device and print the memory statistics"
    )
    add_device(parser, value=0)
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    parser.set_defaults(handler=main)


def main(args: argparse.Namespace) -> int:
    """Print the statistics as tables or JSON."""
    from gpulab.diagnostics.memory_report import describe  # noqa: PLC0415 - loads Vulkan

    print(describe(args.json, args.device))
    return EXIT_OK
