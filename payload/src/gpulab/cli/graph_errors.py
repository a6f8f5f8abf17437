"""How graph commands report failures: one line per problem on stderr, the contract's exit code."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from typing import Any, TypeVar

from gpulab.backends import (
    OutputFailed,
    OutputRefused,
    output_target,
    write_result,
)
from gpulab.backends.errors import failed_errors, unavailable_errors
from gpulab.cli.errors import EXIT_INPUT, EXIT_RUNTIME, EXIT_UNAVAILABLE
from gpulab.graph import GraphInvalid, Problem
from gpulab.graph.problems import one_line
from gpulab.ops import NumericalError

T = TypeVar("T")


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
        say(f"{graph}: warning: {problem}")


def guarded(graph: str, action: Callable[[], int]) -> int:
    """Run a graph command, turning every expected failure into its message and exit code."""
    try:
        return action()
    except GraphInvalid as invalid:
        for problem in invalid.errors:
            say(f"{graph}: {problem}")
        return EXIT_INPUT
    except unavailable_errors() as exc:
        say(str(exc))
        return EXIT_UNAVAILABLE
    except NumericalError as exc:
        say(f"numerical failure: {exc}")
        return EXIT_RUNTIME
    except failed_errors() as exc:
        say(f"run failed: {exc}")
        return EXIT_RUNTIME
    except OutputFailed as exc:
        say(str(exc))
        return EXIT_RUNTIME
    except ValueError as exc:  # a malformed setting from the environment
        say(str(exc))
        return EXIT_INPUT
