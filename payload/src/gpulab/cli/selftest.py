"""`gpulab selftest`: every contract op on small, awkward sizes against the reference (see
gpulab.diagnostics.selftest); exit 4 when a check failed."""

from __future__ import annotations

import argparse
import json
from typing import Any

from gpulab.cli.arguments import add_backend, add_device
from gpulab.cli.errors import EXIT_OK, EXIT_RUNTIME
from gpulab.cli.output import say


def add_parser(commands: Any) -> None:
    """Register `selftest` on the subcommand parsers."""
    parser = commands.add_parser(
        "selftest", help="run every op on small data and compare with numpy"
    )
    add_backend(parser)
    add_device(parser, "the GPUs Slurm gave the job, else every device")
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    parser.set_defaults(handler=main)


def main(args: argparse.Namespace) -> int:
    """Print the result (JSON or one line per check)."""
    from gpulab.diagnostics import selftest  # noqa: PLC0415 - numpy, Vulkan and the kernels

    result = selftest.selftest(args.backend, args.device, say)
    print(json.dumps(result, indent=2) if args.json else selftest.text(result))
    return EXIT_OK if result["ok"] else EXIT_RUNTIME
