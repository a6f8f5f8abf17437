"""How graph commands report failures: one line per problem on stderr, the contract's exit code."""

from __future__ import annotations

from collections.abc import Callable

from gpulab._shown import PATH_LIMIT, shown
from gpulab.backends.errors import failed_errors, unavailable_errors
from gpulab.cli.errors import EXIT_INPUT, EXIT_RUNTIME, EXIT_UNAVAILABLE
from gpulab.cli.output import say
from gpulab.graph import GraphInvalid
from gpulab.ops import NumericalError
from gpulab.results import OutputFailed


def guarded(graph: str, action: Callable[[], int]) -> int:
    """Run a graph command, turning every expected failure into its message and exit code."""
    try:
        return action()
    except GraphInvalid as invalid:
        for problem in invalid.errors:
            say(f"{shown(graph, quote=False, limit=PATH_LIMIT)}: {problem}")
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
