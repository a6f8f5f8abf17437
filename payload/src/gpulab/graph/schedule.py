"""Scheduling: Kahn's topological order, cycles, and when each value can be released."""

from __future__ import annotations

import heapq
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from gpulab.graph.model import Arguments, Graph, Ref, nbytes
from gpulab.ops import Shape


class Placed(Protocol):
    """A node as ordering and the last checks of validation see it, parsed or already the
    model's: its id, its position in the file and what it reads."""

    @property
    def id(self) -> str: ...

    @property
    def index(self) -> int: ...

    @property
    def inputs(self) -> Arguments: ...


def file_order(nodes: Mapping[str, Placed]) -> list[str] | None:
    """The node ids in file order when every node reads only nodes before it (and `nodes`
    iterates in file order), else None. Kahn's order is then exactly the file's, since the
    earliest node not run yet is always ready: one pass instead of a queue and a set per node,
    which is what graphs of millions of nodes (written in order) need."""
    last = -1
    for node in nodes.values():
        if node.index <= last:
            return None
        last = node.index
        for argument in node.inputs.given:
            if isinstance(argument, Ref):
                read = nodes.get(argument.name)
                if read is not None and read.index >= last:
                    return None
    return list(nodes)


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


def run_order(graph: Graph) -> list[str]:
    """Kahn's order of the nodes of `graph` (a validated graph has no cycle)."""
    order = file_order(graph.nodes)
    if order is None:
        dependencies = {node.id: node.references for node in graph.nodes.values()}
        position = {node.id: node.index for node in graph.nodes.values()}
        order, _ = topological_order(dependencies, position)
    return order


def _last_steps(graph: Graph, order: Sequence[str]) -> dict[str, int]:
    """For each input read and each node, the step of `order` after which no node needs it
    (a result nobody reads: its own step). Outputs included; they are never released."""
    last: dict[str, int] = {}
    nodes = graph.nodes
    for step, node_id in enumerate(order):
        last.setdefault(node_id, step)
        for argument in nodes[node_id].inputs.given:
            if isinstance(argument, Ref):
                last[argument.name] = step
    return last


def _peak(graph: Graph, order: Sequence[str], last: Mapping[str, int]) -> tuple[int, str]:
    """The most bytes held at once running `order`, and the node running then: inputs are
    loaded when first read, each result made by its node, and what is not an output freed
    after its last step."""
    nodes, inputs, outputs = graph.nodes, graph.inputs, graph.output_set
    sizes: dict[Shape, int] = {}  # nodes share few shapes

    def size(shape: Shape) -> int:
        found = sizes.get(shape)
        if found is None:
            found = sizes[shape] = nbytes(shape)
        return found

    freed = [0] * len(order)
    for name, step in last.items():
        if name not in outputs:
            freed[step] += size(inputs[name].shape if name in inputs else nodes[name].shape)
    peak, peak_after, live = 0, order[0] if order else "", 0
    loaded: set[str] = set()
    for step, node_id in enumerate(order):
        node = nodes[node_id]
        for argument in node.inputs.given:
            if (
                isinstance(argument, Ref)
                and argument.name in inputs
                and argument.name not in loaded
            ):
                loaded.add(argument.name)
                live += size(inputs[argument.name].shape)
        live += size(node.shape)
        if live > peak:
            peak, peak_after = live, node_id
        live -= freed[step]
    return peak, peak_after


def peak_bytes(graph: Graph, order: Sequence[str] | None = None) -> tuple[int, str]:
    """schedule(graph)'s peak_bytes and peak_after, without the release lists (validation
    asks only this, of graphs of up to millions of nodes); `order` is run_order(graph)'s
    when the caller knows it already."""
    order = run_order(graph) if order is None else order
    return _peak(graph, order, _last_steps(graph, order))


def schedule(graph: Graph) -> Schedule:
    """Kahn's order of `graph` with the release point of every intermediate and input."""
    order = run_order(graph)
    last = _last_steps(graph, order)
    # A node releases at most its inputs and itself: tuples grow by concatenation, and a node
    # that releases nothing shares the empty tuple.
    released: dict[int, tuple[str, ...]] = {}
    for name, step in last.items():
        if name not in graph.output_set:
            released[step] = (*released.get(step, ()), name)
    peak, peak_after = _peak(graph, order, last)
    releases = {node_id: released.get(step, ()) for step, node_id in enumerate(order)}
    return Schedule(tuple(order), releases, peak, peak_after)
