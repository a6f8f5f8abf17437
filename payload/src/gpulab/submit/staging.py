"""The graph and the files it reads, validated here and copied into a job directory on the
shared storage, where the worker that runs the job finds them at the same path."""

from __future__ import annotations

import json
import posixpath
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpulab.graph import load_graph, read_json
from gpulab.ops.registry import find
from gpulab.submit.transport import Transport

GRAPH_NAME = "graph.json"


@dataclass(frozen=True)
class StagedGraph:
    """A valid graph ready to copy: its JSON with `file` inputs renamed to files beside it in
    the job directory, and the local files to copy there (job-directory name, local path)."""

    name: str
    document: dict[str, Any]
    files: tuple[tuple[str, Path], ...]


def safe_name(text: str) -> str:
    """A file-name-safe form of a graph name (letters, digits, `._-`), never empty."""
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", text).strip("._")[:40] or "graph"


def prepare(path: str | Path) -> StagedGraph:
    """Validate the graph here (GraphInvalid before anything reaches the cluster) and list
    its files. A `file` path may point anywhere relative to the graph; in the job directory
    each becomes `input-NAME.npy` (a kernel node's shader `kernel-N-NAME`), so nothing
    outside the job directory is ever written."""
    graph_path = Path(path)
    graph = load_graph(graph_path)
    document: dict[str, Any] = read_json(graph_path)
    files: list[tuple[str, Path]] = []
    for name, spec in document["inputs"].items():
        if isinstance(spec, dict) and "file" in spec:
            staged = f"input-{len(files)}-{safe_name(name)}.npy"
            files.append((staged, graph_path.resolve().parent / spec["file"]))
            spec["file"] = staged
    for node in document["nodes"]:
        found = find(node["op"])
        for key, inner in found.node_files if found is not None else ():
            holder = node[key]
            staged = f"kernel-{len(files)}-{safe_name(Path(holder[inner]).name)}"
            files.append((staged, graph_path.resolve().parent / holder[inner]))
            holder[inner] = staged
    return StagedGraph(graph.name, document, tuple(files))


def upload(transport: Transport, staged: StagedGraph, job_dir: str) -> str:
    """Copy the graph and its files into job_dir; the graph's path there."""
    for name, local in staged.files:
        transport.write_file(posixpath.join(job_dir, name), local.read_bytes())
    graph = posixpath.join(job_dir, GRAPH_NAME)
    text = json.dumps(staged.document, indent=2) + "\n"
    transport.write_file(graph, text.encode("utf-8"))
    return graph
