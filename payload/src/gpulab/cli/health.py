"""`gpulab health`: is the Vulkan device there and does a tiny kernel give the exact answer?

Exit 0 healthy, 3 no loader, driver or device (unavailable), 4 the device failed the check; on
failure one line on stderr, `gpulab health: <check>: <what failed>`, which Slurm's health check
program puts into the drain reason.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from gpulab.cli.arguments import add_device
from gpulab.cli.errors import EXIT_OK, EXIT_RUNTIME, EXIT_UNAVAILABLE

EXIT_CODES = {"ok": EXIT_OK, "unavailable": EXIT_UNAVAILABLE, "failed": EXIT_RUNTIME}


def add_parser(commands: Any) -> None:
    """Register `health` on the subcommand parsers."""
    parser = commands.add_parser(
        "health", help="check that the Vulkan device runs a tiny kernel exactly (exit 0, 3 or 4)"
    )
    add_device(parser, "the GPU Slurm gave the job, else device 0")
    parser.add_argument("--json", action="store_true", help="print the checks as JSON")
    parser.set_defaults(handler=main)


def main(args: argparse.Namespace) -> int:
    """Run the check, print it, and return the contract's exit code."""
    # Imported here: `gpulab health` runs every few minutes on every worker, and the other
    # commands need not pay for numpy and Vulkan to build the parser.
    from gpulab.diagnostics import health  # noqa: PLC0415

    report = health.check(args.device)
    if args.json:
        print(json.dumps(report.to_json(), indent=2))
    elif report.ok:
        summary = "; ".join(c.detail for c in report.checks)
        print(f"healthy: {summary} ({report.elapsed_ms:.0f} ms)")
    if report.failure is not None:
        print(f"gpulab health: {report.failure}", file=sys.stderr)
    return EXIT_CODES[report.status]
