"""`gpulab validate GRAPH.json`: every problem of a graph at once, without running it."""

from __future__ import annotations

import argparse
from typing import Any

from gpulab.cli.arguments import add_graph
from gpulab.cli.errors import EXIT_OK
from gpulab.cli.graph_errors import guarded
from gpulab.cli.graph_file import load_for_command
from gpulab.cli.output import warn


def add_parser(commands: Any) -> None:
    """Register `validate` on the subcommand parsers."""
    parser = commands.add_parser("validate", help="check a compute graph without running it")
    add_graph(parser)
    parser.set_defaults(handler=main)


def _validate(path: str) -> int:
    graph = load_for_command(path)
    warn(path, graph.warnings)
    print("ok")
    return EXIT_OK


def main(args: argparse.Namespace) -> int:
    """Exit 0 and `ok`, or exit 2 with one line per error."""
    return guarded(args.graph, lambda: _validate(args.graph))
