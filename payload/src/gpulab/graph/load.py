"""Loading a graph from a file, JSON text or a decoded dict; malformed JSON is a GraphInvalid."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from gpulab.graph.model import Graph
from gpulab.graph.problems import GraphInvalid, Problem
from gpulab.graph.validate import MemoryLimit, validate


def read_json(path: Path) -> Any:
    """The decoded contents of a JSON file (GraphInvalid if unreadable or malformed)."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise GraphInvalid([Problem("", f"cannot read the graph: {reason}")]) from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        where = f"line {exc.lineno} column {exc.colno}"
        raise GraphInvalid([Problem(where, f"malformed JSON: {exc.msg}")]) from None


def load_graph(source: str | Path | Mapping[str, Any], limit: MemoryLimit | None = None) -> Graph:
    """A validated graph from a path or a decoded dict (`file` inputs resolve against the
    graph file's folder, or the working directory for a dict). Raises GraphInvalid."""
    if isinstance(source, Mapping):
        return validate(dict(source), Path.cwd(), limit=limit)
    path = Path(source)
    return validate(read_json(path), path.resolve().parent, default_name=path.stem, limit=limit)
