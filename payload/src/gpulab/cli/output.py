"""What the commands print besides their results: one line per message on stderr, and result
documents written to a file or stdout."""

from __future__ import annotations

import json
import sys
from typing import Any

from gpulab._shown import PATH_LIMIT, shown
from gpulab.graph import Problem
from gpulab.graph.problems import one_line
from gpulab.results import OutputFailed, OutputRefused, output_target, write_result


def say(message: str) -> None:
    """One line on stderr, prefixed like every gpulab message."""
    print(f"gpulab: {one_line(message)}", file=sys.stderr)


def write_json(document: dict[str, Any], output: str | None) -> bool:
    """Write a result document to OUTPUT (atomically), or stdout without one or with `-`;
    False (and a line) on failure."""

    def dump(stream: Any) -> None:
        json.dump(document, stream, indent=2)
        stream.write("\n")

    try:
        write_result(output_target(output, ()), dump)
    except (OutputRefused, OutputFailed) as exc:
        say(str(exc))
        return False
    return True


def warn(graph: str, warnings: tuple[Problem, ...]) -> None:
    """The graph's warnings (unused inputs and nodes), one line each."""
    for problem in warnings:
        say(f"{shown(graph, quote=False, limit=PATH_LIMIT)}: warning: {problem}")
