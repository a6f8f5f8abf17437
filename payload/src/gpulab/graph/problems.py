"""What validation reports: each problem names where (JSON path, node id) and what is wrong."""

from __future__ import annotations

import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass

from gpulab._shown import shown


def one_line(text: str) -> str:
    """`text` with line breaks and other control characters escaped (`\\n`, `\\x1b`):
    a key or file name from a graph cannot split a message or drive the terminal."""
    if text.isprintable():
        return text
    return "".join(
        char.encode("unicode_escape").decode("ascii")
        if unicodedata.category(char) in ("Cc", "Zl", "Zp")
        else char
        for char in text
    )


@dataclass(frozen=True)
class Problem:
    """One error or warning, located by JSON path and, when it belongs to a node, its id."""

    path: str
    message: str
    node: str | None = None

    def __str__(self) -> str:
        if not self.path:
            return one_line(self.message)
        # A path holds the graph's keys (input names, unknown keys): each is cut like a value.
        path = ".".join(shown(part, quote=False) for part in self.path.split("."))
        where = f"{path} (node {shown(self.node)})" if self.node is not None else path
        return one_line(f"{where}: {self.message}")


class GraphInvalid(ValueError):
    """A graph that cannot run; `errors` lists every problem found, `warnings` the rest."""

    def __init__(self, errors: Sequence[Problem], warnings: Sequence[Problem] = ()) -> None:
        self.errors = tuple(errors)
        self.warnings = tuple(warnings)
        count = len(self.errors)
        first = str(self.errors[0]) if self.errors else "invalid graph"
        more = f" (and {count - 1} more)" if count > 1 else ""
        super().__init__(first + more)
