"""Argument types and options that several commands share."""

from __future__ import annotations

import argparse
from typing import Any


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
