"""`gpulab run GRAPH.json`: validate, run on a backend, write the result JSON."""

from __future__ import annotations

import argparse
from typing import Any

from gpulab.backends import BACKENDS, Runner
from gpulab.cli.errors import EXIT_INPUT, EXIT_OK, EXIT_RUNTIME
from gpulab.cli.graph_errors import guarded, say, warn, write_json
from gpulab.graph import load_graph


def add_parser(commands: Any, device_index: Any) -> None:
    """Register `run` on the subcommand parsers."""
    parser = commands.add_parser("run", help="validate and run a compute graph")
    parser.add_argument("graph", metavar="GRAPH.json")
    parser.add_argument("--backend", choices=BACKENDS, default="auto")
    parser.add_argument("--device", type=device_index, metavar="N", help="Vulkan device index")
    parser.add_argument("-o", "--output", metavar="OUT.json", help="write the result here")
    parser.add_argument(
        "--full", action="store_true", help="include the data of outputs over 65536 elements"
    )
    parser.add_argument(
        "--compare",
        choices=("cpu", "native", "vulkan"),
        help="run again on this backend and report the largest relative error per output",
    )
    parser.set_defaults(handler=main)


def _run(args: argparse.Namespace) -> int:
    with Runner(args.backend, args.device) as runner:
        graph = load_graph(args.graph, limit=runner.memory_limit())
        warn(args.graph, graph.warnings)
        if args.backend == "auto":
            say(runner.reason)
        result = runner.run(graph, compare=args.compare)
    if not write_json(result.to_json(full=args.full), args.output):
        return EXIT_INPUT
    comparison = result.comparison
    if comparison is not None and not comparison["ok"]:
        for name, error in comparison["max_rel_err"].items():
            if error > comparison["rtol"]:
                say(
                    f"--compare {args.compare}: output {name!r} differs by {error:.3g} "
                    f"(relative), more than {comparison['rtol']:g}"
                )
        return EXIT_RUNTIME
    return EXIT_OK


def main(args: argparse.Namespace) -> int:
    """Run the graph; errors become one line each and the contract's exit code."""
    return guarded(args.graph, lambda: _run(args))
