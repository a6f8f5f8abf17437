"""User values as messages quote them: at most VALUE_LIMIT characters of each.

A graph's node id, a key, a file name or a command-line argument can be megabytes long; an error
line that quoted it whole would be as long, on every line that names it.
"""

from __future__ import annotations

VALUE_LIMIT = 80
"""The characters of a user value a message shows; the rest is left out and counted."""
PATH_LIMIT = 4096
"""The characters of a file path a message shows: Linux's PATH_MAX, so every path that can
name a file is shown whole (a cut one could not be found); a longer one names nothing."""


def shown(value: object, *, quote: bool = True, limit: int = VALUE_LIMIT) -> str:
    """`value` as a message shows it: repr() (a string without quotes when `quote` is false),
    cut after `limit` characters with an ellipsis and the full length, e.g.
    `'aaaa…' (1000000 characters)`. Short values read exactly as repr() or str() give them."""
    if isinstance(value, str):
        if len(value) <= limit:
            return repr(value) if quote else value
        head = value[:limit]
        if quote:
            quoted = repr(head)
            return f"{quoted[:-1]}…{quoted[-1]} ({len(value)} characters)"
        return f"{head}… ({len(value)} characters)"
    text = repr(value)
    if len(text) <= limit:
        return text
    return f"{text[:limit]}… ({len(text)} characters)"
