"""Argument types and options that several commands share."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from typing import Any, NoReturn

from gpulab._shown import VALUE_LIMIT, shown
from gpulab.backends import BACKENDS

BACKEND_HELP = (
    "where the ops run: auto (Vulkan when a device exists, else cpu), cpu (numpy), "
    "native (the C library) or vulkan (default: %(default)s)"
)


COLUMNS_ENV = "COLUMNS"
_DEFAULT_COLUMNS = 80


def help_width() -> int:
    """The width argparse's help takes: shutil.get_terminal_size's columns less 2, worked out
    here because argparse imports shutil for it (and shutil bz2 and lzma, some 3-10 ms) on
    every command line, help or not: each add_argument makes a formatter."""
    try:
        columns = int(os.environ.get(COLUMNS_ENV, ""))
    except ValueError:
        columns = 0
    stdout = sys.__stdout__
    if columns <= 0 and stdout is not None:
        try:
            columns = os.get_terminal_size(stdout.fileno()).columns
        except (ValueError, OSError):
            columns = 0
    return (columns or _DEFAULT_COLUMNS) - 2


class Parser(argparse.ArgumentParser):
    """argparse's parser, whose error lines cut the arguments they quote, as shown() does:
    argparse formats them itself (`invalid choice: '...'`, `unrecognized arguments: ...`)."""

    _arguments: Sequence[str] = ()

    def parse_known_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: Any = None
    ) -> tuple[Any, list[str]]:
        # Each subcommand's parser is called with its own arguments, so each knows what
        # its messages can quote.
        self._arguments = list(sys.argv[1:] if args is None else args)
        return super().parse_known_args(args, namespace)

    def _get_formatter(self) -> argparse.HelpFormatter:
        return self.formatter_class(prog=self.prog, width=help_width())  # type: ignore[call-arg]

    def error(self, message: str) -> NoReturn:
        long = sorted({a for a in self._arguments if len(a) > VALUE_LIMIT}, key=len, reverse=True)
        for argument in long:
            message = message.replace(repr(argument), shown(argument))
            message = message.replace(argument, shown(argument, quote=False))
        super().error(message)


def device_index(text: str) -> int:
    """A Vulkan device index (0, 1, ...); argparse turns the error into exit 2."""
    try:
        index = int(text)
    except ValueError:
        index = -1
    if index < 0:
        raise argparse.ArgumentTypeError(f"expected a device index (0, 1, ...), got {shown(text)}")
    return index


def seconds(text: str) -> float:
    """A number of seconds above 0 (argparse type)."""
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not value > 0:  # NaN too
        raise argparse.ArgumentTypeError(f"expected a number of seconds above 0, got {shown(text)}")
    return value


def add_device(parser: Any, default: str | None = None, value: int | None = None) -> None:
    """`--device N`; `default` says in the help what runs without it, `value` is its value."""
    parser.add_argument(
        "--device",
        type=device_index,
        default=value,
        metavar="N",
        help="Vulkan device index" + (f" (default: {default})" if default else ""),
    )


def add_backend(parser: Any) -> None:
    """`--backend B`, default auto."""
    parser.add_argument("--backend", choices=BACKENDS, default="auto", help=BACKEND_HELP)


def add_graph(parser: Any) -> None:
    """The GRAPH.json positional argument."""
    parser.add_argument(
        "graph", metavar="GRAPH.json", help="a compute graph (graph JSON version 1; gpulab schema)"
    )
