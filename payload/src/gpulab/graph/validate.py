"""Validation of a decoded graph: every problem found at once, then the model (or GraphInvalid)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpulab._shown import shown
from gpulab.graph._json import expect_object, type_name, unknown_keys
from gpulab.graph.inputs import parse_input
from gpulab.graph.model import GRAPH_VERSION, Graph, GraphInput, Node, Ref, nbytes
from gpulab.graph.nodes import ParsedNode, parse_node
from gpulab.graph.problems import GraphInvalid, Problem
from gpulab.graph.schedule import find_cycles, schedule, topological_order
from gpulab.ops import Shape, ShapeError, kind_of_shape

GRAPH_KEYS = ("version", "name", "description", "inputs", "nodes", "outputs")
GIB = 1 << 30


@dataclass(frozen=True)
class MemoryLimit:
    """How many bytes a run may hold at once, and what they are (for the message)."""

    bytes: int
    what: str


def host_memory() -> MemoryLimit:
    """The physical memory of this machine."""
    total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    return MemoryLimit(total, "host memory")


def available_memory() -> MemoryLimit:
    """The memory the kernel could give this process now (MemAvailable), for a run: a graph
    larger than that is refused before anything is made, instead of meeting the OOM killer
    half way. Physical memory where /proc/meminfo does not say."""
    try:
        with open("/proc/meminfo", encoding="ascii") as meminfo:
            for line in meminfo:
                if line.startswith("MemAvailable:"):
                    return MemoryLimit(int(line.split()[1]) * 1024, "available host memory")
    except (OSError, ValueError, IndexError):
        pass
    return host_memory()


def _size(count: int) -> str:
    if count >= GIB:
        return f"{count / GIB:.2f} GiB"
    return f"{count / (1 << 20):.2f} MiB" if count >= 1 << 20 else f"{count} bytes"


def _references(node: ParsedNode) -> list[str]:
    return [a.name for a in node.inputs.values() if isinstance(a, Ref)]


class _Checker:
    def __init__(self, raw: dict[str, Any], base_dir: Path) -> None:
        self.raw = raw
        self.base_dir = base_dir
        self.errors: list[Problem] = []
        self.warnings: list[Problem] = []
        self.inputs: dict[str, GraphInput] = {}
        self.nodes: dict[str, ParsedNode] = {}
        self.declared: set[str] = set()  # every name given, even if its entry is broken
        self.shapes: dict[str, Shape] = {}

    def header(self) -> None:
        unknown_keys(self.raw, GRAPH_KEYS, "", self.errors)
        version = self.raw.get("version")
        if version != GRAPH_VERSION or isinstance(version, bool):
            self.errors.append(Problem("version", f"must be {GRAPH_VERSION}, got {shown(version)}"))
        name = self.raw.get("name", "graph")
        if not isinstance(name, str):
            self.errors.append(Problem("name", f"must be a string, got {type_name(name)}"))

    def parse_inputs(self) -> None:
        raw_inputs = self.raw.get("inputs", {})
        if not expect_object(raw_inputs, "inputs", self.errors):
            return
        for name, spec in raw_inputs.items():
            self.declared.add(name)
            parsed = parse_input(name, spec, self.base_dir, self.errors)
            if parsed is not None:
                self.inputs[name] = parsed
                self.shapes[name] = parsed.shape

    def parse_nodes(self) -> None:
        raw_nodes = self.raw.get("nodes")
        if not isinstance(raw_nodes, list) or not raw_nodes:
            self.errors.append(Problem("nodes", "must be a non-empty array of nodes"))
            return
        first_seen: dict[str, str] = {}
        for index, raw_node in enumerate(raw_nodes):
            node_id = raw_node.get("id") if isinstance(raw_node, dict) else None
            if isinstance(node_id, str) and node_id:
                path = f"nodes[{index}].id"
                if node_id in first_seen:
                    self.errors.append(
                        Problem(path, f"duplicate id (also {first_seen[node_id]})", node_id)
                    )
                elif node_id in self.declared:
                    self.errors.append(Problem(path, "an input has the same name", node_id))
                first_seen.setdefault(node_id, path)
                self.declared.add(node_id)
            parsed = parse_node(index, raw_node, self.errors)
            if parsed is not None and parsed.id not in self.nodes:
                self.nodes[parsed.id] = parsed

    def references(self) -> None:
        for node in self.nodes.values():
            for name, argument in node.inputs.items():
                if isinstance(argument, Ref) and argument.name not in self.declared:
                    self.errors.append(
                        Problem(
                            f"{node.path}.inputs.{name}",
                            f"unknown reference {shown(argument.name)} (not an input or a node id)",
                            node.id,
                        )
                    )

    def order(self) -> list[str]:
        dependencies = {node.id: _references(node) for node in self.nodes.values()}
        position = {node.id: node.index for node in self.nodes.values()}
        order, blocked = topological_order(dependencies, position)
        for cycle in find_cycles(blocked, dependencies, position):
            start = self.nodes[cycle[0]]
            self.errors.append(
                Problem(
                    start.path,
                    f"cycle: {' -> '.join(shown(n, quote=False) for n in cycle)}",
                    start.id,
                )
            )
        return order

    def shapes_in(self, order: list[str]) -> None:
        for node_id in order:
            node = self.nodes[node_id]
            shapes: dict[str, Shape] = {}
            for name, argument in node.inputs.items():
                if not isinstance(argument, Ref):
                    shapes[name] = ()
                    continue
                if argument.name not in self.shapes:
                    break  # broken upstream, already reported
                shape, want = self.shapes[argument.name], node.op.input_kind(name)
                if kind_of_shape(shape) is not want:
                    self.errors.append(
                        Problem(
                            f"{node.path}.inputs.{name}",
                            f"{node.op.name}'s {name} must be a {want.value}, but "
                            f"{shown(argument.name)} is a {kind_of_shape(shape).value}",
                            node.id,
                        )
                    )
                    break
                shapes[name] = shape
            if len(shapes) != len(node.op.inputs):
                continue
            try:
                self.shapes[node_id] = node.op.shape(shapes)
            except ShapeError as exc:
                self.errors.append(Problem(f"{node.path}.inputs.{exc.input}", str(exc), node.id))

    def outputs(self) -> tuple[str, ...]:
        raw_outputs = self.raw.get("outputs")
        if not isinstance(raw_outputs, list) or not raw_outputs:
            self.errors.append(
                Problem("outputs", "must be a non-empty array of node or input names")
            )
            return ()
        seen: set[str] = set()
        for i, name in enumerate(raw_outputs):
            if not isinstance(name, str):
                self.errors.append(Problem(f"outputs[{i}]", f"must be a string, got {shown(name)}"))
            elif name not in self.declared:
                self.errors.append(
                    Problem(
                        f"outputs[{i}]", f"unknown output {shown(name)} (not a node id or input)"
                    )
                )
            elif name in seen:
                self.errors.append(Problem(f"outputs[{i}]", f"{shown(name)} is listed twice"))
            seen.add(str(name))
        return tuple(name for name in raw_outputs if isinstance(name, str))

    def unused(self, outputs: tuple[str, ...]) -> None:
        listed = set(outputs)
        read = {
            a.name for n in self.nodes.values() for a in n.inputs.values() if isinstance(a, Ref)
        }
        for name in self.inputs:
            if name not in read and name not in listed:
                self.warnings.append(Problem(f"inputs.{name}", "unused input"))
        for node in self.nodes.values():
            if node.id not in read and node.id not in listed:
                self.warnings.append(
                    Problem(node.path, "result is not read by any node or output", node.id)
                )

    def sizes(self, limit: MemoryLimit) -> None:
        for name, shape in self.shapes.items():
            size = nbytes(shape)
            if size > limit.bytes:
                node = self.nodes.get(name)
                self.errors.append(
                    Problem(
                        f"nodes[{node.index}]" if node else f"inputs.{name}",
                        f"{shown(list(shape))} float32 values need {_size(size)}, "
                        f"only {_size(limit.bytes)} of {limit.what} exist",
                        node.id if node else None,
                    )
                )

    def peak(self, graph: Graph, limit: MemoryLimit) -> None:
        plan = schedule(graph)
        if plan.peak_bytes > limit.bytes:
            peak = graph.nodes[plan.peak_after]
            self.errors.append(
                Problem(
                    f"nodes[{peak.index}]",
                    f"the graph holds {_size(plan.peak_bytes)} at once when this node runs, "
                    f"only {_size(limit.bytes)} of {limit.what} exist",
                    peak.id,
                )
            )


def validate(
    raw: Any, base_dir: Path, default_name: str = "graph", limit: MemoryLimit | None = None
) -> Graph:
    """The model of a decoded graph, or GraphInvalid listing every error (warnings kept)."""
    if not isinstance(raw, dict):
        raise GraphInvalid([Problem("$", f"a graph must be a JSON object, got {type_name(raw)}")])
    checker = _Checker(raw, base_dir)
    checker.header()
    checker.parse_inputs()
    checker.parse_nodes()
    checker.references()
    order = checker.order()
    checker.shapes_in(order)
    outputs = checker.outputs()
    checker.unused(outputs)
    limit = limit or host_memory()
    checker.sizes(limit)
    if checker.errors:
        raise GraphInvalid(checker.errors, checker.warnings)
    nodes = {
        node_id: Node(
            id=node_id,
            op=checker.nodes[node_id].op.name,
            inputs=checker.nodes[node_id].inputs,
            params=checker.nodes[node_id].params,
            backend=checker.nodes[node_id].backend,
            index=checker.nodes[node_id].index,
            kind=kind_of_shape(checker.shapes[node_id]),
            shape=checker.shapes[node_id],
        )
        for node_id in sorted(checker.nodes, key=lambda n: checker.nodes[n].index)
    }
    graph = Graph(
        name=raw.get("name", default_name),
        inputs=checker.inputs,
        nodes=nodes,
        outputs=outputs,
        warnings=tuple(checker.warnings),
        source=raw,
    )
    checker.peak(graph, limit)
    if checker.errors:
        raise GraphInvalid(checker.errors, checker.warnings)
    return graph
