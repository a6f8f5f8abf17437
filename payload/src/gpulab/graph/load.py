"""Loading a graph from a file, JSON text or a decoded dict; malformed JSON is a GraphInvalid."""

from __future__ import annotations

import contextlib
import gc
import json
import os
import stat
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from gpulab.graph.model import Graph
from gpulab.graph.problems import GraphInvalid, Problem
from gpulab.graph.validate import MemoryLimit, validate


class _Object(dict[str, Any]):
    """A decoded JSON object that remembers the keys it was given more than once."""

    duplicates: tuple[str, ...] = ()


def _with_duplicates(pairs: list[tuple[str, Any]]) -> _Object:
    decoded = _Object(pairs)
    keys = [key for key, _ in pairs]
    decoded.duplicates = tuple(dict.fromkeys(k for i, k in enumerate(keys) if k in keys[:i]))
    return decoded


def _decode(text: str) -> tuple[Any, bool]:
    """The decoded JSON, and whether some object in it gives a key twice. Called once per
    object (2 x 10^6 times for a graph of 10^6 nodes), so the common case is one dict()."""
    repeated: list[_Object] = []

    def object_from(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        decoded = dict(pairs)
        if len(decoded) != len(pairs):
            decoded = _with_duplicates(pairs)
            repeated.append(decoded)
        return decoded

    return json.loads(text, object_pairs_hook=object_from), bool(repeated)


def duplicate_keys(value: Any) -> list[Problem]:
    """A problem per key given twice in one object (JSON keeps the last one silently, so a
    reader of the file and the run could see different graphs). Walked without recursion:
    the value may be nested as deep as the decoder allows."""
    problems: list[Problem] = []
    stack: list[tuple[str, Any]] = [("", value)]
    while stack:
        path, item = stack.pop()
        if isinstance(item, _Object):
            for key in item.duplicates:
                where = f"{path}.{key}" if path else key
                problems.append(Problem(where, "this key is given more than once"))
        if isinstance(item, dict):
            stack.extend((f"{path}.{key}" if path else str(key), v) for key, v in item.items())
        elif isinstance(item, list):
            stack.extend((f"{path}[{i}]", v) for i, v in enumerate(item))
    return sorted(problems, key=lambda problem: problem.path)


MAX_GRAPH_BYTES = 256 << 20
"""The largest graph file read (inline data included): decoding takes several times its size
in memory, and a larger file is a mistake (the wrong path), not a graph."""


def _not_a_graph_file(path: Path) -> str | None:
    """Why `path` is not read at all, or None: only regular files of a sane size, checked
    before opening (a FIFO blocks the open, /dev/zero never ends)."""
    try:
        status = path.stat()
    except OSError as exc:
        return f"cannot read the graph: {exc.strerror or exc}"
    if stat.S_ISDIR(status.st_mode):
        return "cannot read the graph: it is a directory"
    if not stat.S_ISREG(status.st_mode):
        return "cannot read the graph: not a regular file (a device, FIFO or socket)"
    if status.st_size > MAX_GRAPH_BYTES:
        return (
            f"cannot read the graph: {status.st_size} bytes, more than the "
            f"{MAX_GRAPH_BYTES >> 20} MiB a graph file may have"
        )
    return None


def _read_text(path: Path) -> str:
    """The file's text; its bytes are dropped on return, before decoding (a 250 MB graph)."""
    refused = _not_a_graph_file(path)
    if refused is not None:
        raise GraphInvalid([Problem("", refused)])
    try:
        with path.open("rb") as stream:
            # Its size, not the limit, at once: reading asks for a buffer of that many bytes.
            wanted = min(os.fstat(stream.fileno()).st_size, MAX_GRAPH_BYTES) + 1
            data = stream.read(wanted)
            if len(data) == wanted:  # it grew after the check: read on, up to the limit
                data += stream.read(MAX_GRAPH_BYTES + 1 - len(data))
        if len(data) > MAX_GRAPH_BYTES:
            raise GraphInvalid([Problem("", "cannot read the graph: it grew while read")])
        return data.decode("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise GraphInvalid([Problem("", f"cannot read the graph: {reason}")]) from None


def read_json(path: Path) -> Any:
    """The decoded contents of a JSON file (GraphInvalid if unreadable or malformed)."""
    text = _read_text(path)
    try:
        decoded, repeated = _decode(text)
    except json.JSONDecodeError as exc:
        where = f"line {exc.lineno} column {exc.colno}"
        raise GraphInvalid([Problem(where, f"malformed JSON: {exc.msg}")]) from None
    except RecursionError:
        # Python's decoder recurses once per level: thousands of `[` exhaust its stack.
        raise GraphInvalid([Problem("", "malformed JSON: nested too deeply")]) from None
    except ValueError as exc:
        # int() refuses numbers of more than sys.get_int_max_str_digits() digits.
        raise GraphInvalid([Problem("", f"malformed JSON: {exc}")]) from None
    if repeated:  # walked only then: the walk names every value's JSON path
        raise GraphInvalid(duplicate_keys(decoded))
    return decoded


@contextlib.contextmanager
def cycle_collector_paused() -> Iterator[None]:
    """Python's cycle collector off while a graph is decoded and validated: that makes
    millions of containers (10^6 nodes: 2 x 10^6 dicts, then the model) and no cycles, and
    each collection on the way walks all those made so far, most of the time at that size."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def load_graph(
    source: str | Path | Mapping[str, Any],
    limit: MemoryLimit | None = None,
    *,
    check_values: bool = True,
) -> Graph:
    """A validated graph from a path or a decoded dict (`file` inputs resolve against the
    graph file's folder, or the working directory for a dict). Raises GraphInvalid.
    `check_values=False` leaves the check of .npy values to their one read in the run (a
    second pass over every file here would cost as much as the read)."""
    with cycle_collector_paused():
        if isinstance(source, Mapping):
            return validate(dict(source), Path.cwd(), limit=limit, check_values=check_values)
        path = Path(source)
        # The decoded file is this call's own: validation may drop each node's JSON once
        # parsed, so that a large graph is not held twice.
        document = read_json(path)
        return validate(
            document,
            path.resolve().parent,
            default_name=path.stem,
            limit=limit,
            consume=True,
            check_values=check_values,
        )
