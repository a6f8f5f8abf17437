"""Argument types and options that several commands share."""

from __future__ import annotations

import argparse
from typing import Any

from gpulab.backends import BACKENDS

BACKEND_HELP = (
    "where the ops run: auto (Vulkan when a device exists, else cpu), cpu (numpy), "
    "native (the C library) or vulkan (default: %(default)s)"
)


def device_index(text: str) -> int:
    """A Vulkan device index (0, 1, ...); argparse turns the error into exit 2."""
    try:
        index = int(text)
    except ValueError:
        index = -1
    if index < 0:
        raise argparse.ArgumentTypeError(f"expected a device index (0, 1, ...), got {text!r}")
    return index


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
