"""Scheduling: Kahn's topological order, cycles, and when each value can be released."""

from __future__ import annotations

import heapq
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from gpulab.graph.model import Graph, nbytes


def topological_order(
    dependencies: Mapping[str, Sequence[str]], position: Mapping[str, int]
) -> tuple[list[str], set[str]]:
    """Kahn's algorithm over node ids; among ready nodes the earliest in the file goes first.

    `dependencies` maps each node to the nodes it reads (names outside the mapping are ignored).
    Returns the order and the nodes left out because they are on or behind a cycle.
    """
    waiting = {node: {d for d in deps if d in dependencies} for node, deps in dependencies.items()}
    readers: dict[str, list[str]] = {node: [] for node in dependencies}
    for node, deps in waiting.items():
        for dep in deps:
            readers[dep].append(node)
    ready = [(position[node], node) for node, deps in waiting.items() if not deps]
    heapq.heapify(ready)
    order: list[str] = []
    while ready:
        _, node = heapq.heappop(ready)
        order.append(node)
        for reader in readers[node]:
            waiting[reader].discard(node)
            if not waiting[reader]:
                heapq.heappush(ready, (position[reader], reader))
    return order, set(dependencies) - set(order)


def find_cycles(
    blocked: set[str], dependencies: Mapping[str, Sequence[str]], position: Mapping[str, int]
) -> list[list[str]]:
    """The distinct cycles among `blocked` nodes, each as a path that returns to its start."""
    cycles: list[list[str]] = []
    done: set[str] = set()
    for start in sorted(blocked, key=position.__getitem__):
        if start in done:
            continue
        path: list[str] = []
        on_path: dict[str, int] = {}
        node = start
        # Every blocked node reads another blocked node, so this walk ends on a repeat.
        while node not in on_path and node not in done:
            on_path[node] = len(path)
            path.append(node)
            node = min(
                (d for d in dependencies[node] if d in blocked),
                key=position.__getitem__,
            )
        if node in on_path:
            cycles.append([*path[on_path[node] :], node])
        done.update(path)
    return cycles


@dataclass(frozen=True)
class Schedule:
    """The run order and, after each node, the values no later node or output needs."""

    order: tuple[str, ...]
    releases: Mapping[str, tuple[str, ...]]
    peak_bytes: int
    peak_after: str


def schedule(graph: Graph) -> Schedule:
    """Kahn's order of `graph` with the release point of every intermediate and input."""
    dependencies = {node.id: node.references for node in graph.nodes.values()}
    position = {node.id: node.index for node in graph.nodes.values()}
    order, _ = topological_order(dependencies, position)
    last_use: dict[str, str] = {}
    for node_id in order:
        last_use.setdefault(node_id, node_id)  # a result nobody reads goes right after
        for name in graph.nodes[node_id].references:
            last_use[name] = node_id
    releases: dict[str, list[str]] = {node_id: [] for node_id in order}
    for name, node_id in last_use.items():
        if name not in graph.output_set:
            releases[node_id].append(name)
    peak, peak_after, live = 0, order[0] if order else "", 0
    loaded: set[str] = set()
    for node_id in order:
        node = graph.nodes[node_id]
        for name in node.references:
            if name in graph.inputs and name not in loaded:
                loaded.add(name)
                live += nbytes(graph.shape(name))
        live += nbytes(node.shape)
        if live > peak:
            peak, peak_after = live, node_id
        live -= sum(nbytes(graph.shape(name)) for name in releases[node_id])
    return Schedule(
        tuple(order),
        {node_id: tuple(names) for node_id, names in releases.items()},
        peak,
        peak_after,
    )
