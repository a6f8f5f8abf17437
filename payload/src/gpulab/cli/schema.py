"""`gpulab schema`: print the JSON Schema of graph JSON version 1."""

from __future__ import annotations

import argparse
import json
from typing import Any

from gpulab.cli.errors import EXIT_OK
from gpulab.graph import graph_schema


def add_parser(commands: Any) -> None:
    """Register `schema` on the subcommand parsers."""
    parser = commands.add_parser("schema", help="print the JSON Schema of compute graphs")
    parser.set_defaults(handler=main)


def main(args: argparse.Namespace) -> int:
    """Print the schema."""
    print(json.dumps(graph_schema(), indent=2))
    return EXIT_OK
