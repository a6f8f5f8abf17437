"""Validation of a decoded graph: every problem found at once, then the model (or GraphInvalid)."""

from __future__ import annotations

import itertools
import math
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpulab._shown import shown
from gpulab.graph._json import expect_object, type_name, unknown_keys
from gpulab.graph.in_order import Taken, nodes_in_file_order
from gpulab.graph.inputs import parse_input
from gpulab.graph.model import GRAPH_VERSION, Graph, GraphInput, Node, NpyFile, Ref, nbytes
from gpulab.graph.nodes import ParsedNode, parse_node
from gpulab.graph.problems import GraphInvalid, Problem
from gpulab.graph.schedule import (
    Placed,
    file_order,
    find_cycles,
    peak_bytes,
    topological_order,
)
from gpulab.ops import Shape, ShapeError, kind_of_shape
from gpulab.ops.registry import OPS

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
        if count >= 1 << 1000:  # from JSON integers of hundreds of digits: beyond any float
            return f"about 10^{math.log10(count) - math.log10(GIB):.0f} GiB"
        return f"{shown(f'{count / GIB:.2f}', quote=False)} GiB"
    return f"{count / (1 << 20):.2f} MiB" if count >= 1 << 20 else f"{count} bytes"


def _references(node: ParsedNode) -> list[str]:
    return [a.name for a in node.inputs.values() if isinstance(a, Ref)]


class _Checker:
    def __init__(
        self, raw: dict[str, Any], base_dir: Path, consume: bool, check_values: bool = True
    ) -> None:
        self.raw = raw
        self.base_dir = base_dir
        self.consume = consume
        self.check_values = check_values
        self.errors: list[Problem] = []
        self.warnings: list[Problem] = []
        self.inputs: dict[str, GraphInput] = {}
        self.nodes: dict[str, ParsedNode] = {}
        # Every name given, even if its entry is broken: an input's maps to -1, a node id to
        # the index of the first node with it (one table for both: 10^6-node graphs).
        self.declared: dict[str, int] = {}
        self.shapes: dict[str, Shape] = {}
        self.resume_at = 0  # the first node the one pass (in_order) left to parse_nodes

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
            self.declared[name] = -1
            parsed = parse_input(name, spec, self.base_dir, self.errors, self.check_values)
            if parsed is not None:
                self.inputs[name] = parsed
                self.shapes[name] = parsed.shape

    def nodes_in_file_order(self) -> Taken | None:
        """What the one pass took when it took every node; else None, and the nodes it took
        are parsed nodes for the step-by-step passes."""
        raw_nodes = self.raw.get("nodes")
        if not isinstance(raw_nodes, list) or not raw_nodes:
            return None
        taken = nodes_in_file_order(raw_nodes, self.inputs, self.declared, self.consume)
        if taken.stop == len(raw_nodes):
            return taken
        for node in taken.nodes.values():
            self.declared[node.id] = node.index
            spec = OPS[node.op]  # parsed: a package's op is loaded by now
            self.nodes[node.id] = ParsedNode(
                node.id, spec, node.inputs, node.params, node.backend, node.index
            )
        self.resume_at = taken.stop
        return None

    def parse_nodes(self) -> None:
        raw_nodes = self.raw.get("nodes")
        if not isinstance(raw_nodes, list) or not raw_nodes:
            self.errors.append(Problem("nodes", "must be a non-empty array of nodes"))
            return
        declared, nodes, errors = self.declared, self.nodes, self.errors
        for index in range(self.resume_at, len(raw_nodes)):
            raw_node = raw_nodes[index]
            node_id = raw_node.get("id") if isinstance(raw_node, dict) else None
            if isinstance(node_id, str) and node_id:
                first = declared.get(node_id)
                if first is None or first < 0:
                    if first is not None:
                        problem = Problem(
                            f"nodes[{index}].id", "an input has the same name", node_id
                        )
                        errors.append(problem)
                    declared[node_id] = index
                else:
                    errors.append(
                        Problem(
                            f"nodes[{index}].id", f"duplicate id (also nodes[{first}].id)", node_id
                        )
                    )
            parsed = parse_node(index, raw_node, errors, self.base_dir)
            if parsed is not None and parsed.id not in nodes:
                nodes[parsed.id] = parsed
            if self.consume:
                raw_nodes[index] = None  # its JSON (about 500 bytes) is not needed again

    def references(self) -> None:
        declared = self.declared
        for node in self.nodes.values():
            for name, argument in node.inputs.items():
                if isinstance(argument, Ref) and argument.name not in declared:
                    self.errors.append(
                        Problem(
                            f"{node.path}.inputs.{name}",
                            f"unknown reference {shown(argument.name)} (not an input or a node id)",
                            node.id,
                        )
                    )

    def order(self) -> list[str]:
        in_file_order = file_order(self.nodes)
        if in_file_order is not None:
            return in_file_order
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
        known, nodes = self.shapes, self.nodes
        for node_id in order:
            node = nodes[node_id]
            op = node.op
            shapes: dict[str, Shape] = {}
            for name, argument in node.inputs.items():
                if not isinstance(argument, Ref):
                    shapes[name] = ()
                    continue
                shape = known.get(argument.name)
                if shape is None:
                    break  # broken upstream, already reported
                want = op.input_kinds[name]
                if kind_of_shape(shape) is not want and not op.any_kind:
                    self.errors.append(
                        Problem(
                            f"{node.path}.inputs.{name}",
                            f"{op.name}'s {name} must be a {want.value}, but "
                            f"{shown(argument.name)} is a {kind_of_shape(shape).value}",
                            node.id,
                        )
                    )
                    break
                shapes[name] = shape
            if len(shapes) != len(op.inputs):
                continue
            try:
                known[node_id] = op.shape(shapes)
            except ShapeError as exc:
                self.errors.append(Problem(f"{node.path}.inputs.{exc.input}", str(exc), node.id))

    def outputs(self, nodes: Mapping[str, Placed]) -> tuple[str, ...]:
        raw_outputs = self.raw.get("outputs")
        if not isinstance(raw_outputs, list) or not raw_outputs:
            self.errors.append(
                Problem("outputs", "must be a non-empty array of node or input names")
            )
            return ()
        if self._known_once(raw_outputs, nodes):
            return tuple(raw_outputs)
        seen: set[str] = set()
        for i, name in enumerate(raw_outputs):
            if not isinstance(name, str):
                self.errors.append(Problem(f"outputs[{i}]", f"must be a string, got {shown(name)}"))
            elif name not in nodes and name not in self.declared:
                self.errors.append(
                    Problem(
                        f"outputs[{i}]", f"unknown output {shown(name)} (not a node id or input)"
                    )
                )
            elif name in seen:
                self.errors.append(Problem(f"outputs[{i}]", f"{shown(name)} is listed twice"))
            seen.add(str(name))
        return tuple(name for name in raw_outputs if isinstance(name, str))

    def _known_once(self, names: list[Any], nodes: Mapping[str, Placed]) -> bool:
        """Whether each of `names` is a distinct node id or input name, leaving the outputs
        nothing to report: set operations, for graphs with 10^6 outputs."""
        try:
            distinct = set(names)
        except TypeError:  # an object or array among them
            return False
        if len(distinct) != len(names):
            return False
        declared = self.declared
        return all(name in declared for name in distinct.difference(nodes))

    def _check_unread_file(self, name: str, source: NpyFile) -> None:
        """The values of a .npy input no node reads, which no run would check (the load was
        asked to leave values to their reader)."""
        from gpulab.graph.npy import bad_values_problem  # noqa: PLC0415 - numpy, files only

        problem = bad_values_problem(name, source)
        if problem is not None:
            self.errors.append(problem)

    def unused(
        self, outputs: tuple[str, ...], nodes: Mapping[str, Placed], read: set[str] | None
    ) -> None:
        """Warnings for inputs and results nobody reads; `read`, the names nodes read, when
        already known."""
        listed = set(outputs)
        if read is None:
            read = {a.name for n in nodes.values() for a in n.inputs.given if isinstance(a, Ref)}
        for name, spec in self.inputs.items():
            if name not in read and name not in listed:
                self.warnings.append(Problem(f"inputs.{name}", "unused input"))
                if isinstance(spec.source, NpyFile) and not spec.source.values_checked:
                    self._check_unread_file(name, spec.source)
        if not nodes.keys() - read - listed:
            return  # every result read or listed: no node to go through
        for node in nodes.values():
            if node.id not in read and node.id not in listed:
                self.warnings.append(
                    Problem(
                        f"nodes[{node.index}]", "result is not read by any node or output", node.id
                    )
                )

    def sizes(
        self, limit: MemoryLimit, nodes: Mapping[str, Placed], shapes: Iterable[tuple[str, Shape]]
    ) -> int:
        """Checks each value on its own; returns the bytes of them all."""
        known: dict[Shape, int] = {}  # nodes share few shapes
        total = 0
        for name, shape in shapes:
            size = known.get(shape)
            if size is None:
                size = known[shape] = nbytes(shape)
            total += size
            if size > limit.bytes:
                node = nodes.get(name)
                self.errors.append(
                    Problem(
                        f"nodes[{node.index}]" if node else f"inputs.{name}",
                        f"{shown(list(shape))} float32 values need {_size(size)}, "
                        f"only {_size(limit.bytes)} of {limit.what} exist",
                        node.id if node else None,
                    )
                )
        return total

    def model_nodes(self) -> dict[str, Node]:
        """The model's nodes, in file order, from the parsed ones, which are dropped one by
        one as their Node is made (a graph may have 10^6)."""
        parsed, shapes = self.nodes, self.shapes
        nodes: dict[str, Node] = {}
        for node_id in list(parsed):
            node, shape = parsed.pop(node_id), shapes[node_id]
            nodes[node_id] = Node(
                node_id,
                node.op.name,
                node.inputs,
                node.params,
                node.backend,
                node.index,
                kind_of_shape(shape),
                shape,
            )
        return nodes

    def peak(self, graph: Graph, limit: MemoryLimit, order: list[str]) -> None:
        held, after = peak_bytes(graph, order)
        if held > limit.bytes:
            peak = graph.nodes[after]
            self.errors.append(
                Problem(
                    f"nodes[{peak.index}]",
                    f"the graph holds {_size(held)} at once when this node runs, "
                    f"only {_size(limit.bytes)} of {limit.what} exist",
                    peak.id,
                )
            )


def validate(
    raw: Any,
    base_dir: Path,
    default_name: str = "graph",
    limit: MemoryLimit | None = None,
    *,
    consume: bool = False,
    check_values: bool = True,
) -> Graph:
    """The model of a decoded graph, or GraphInvalid listing every error (warnings kept).
    With `consume` the caller hands `raw` over: each entry of its `nodes` is dropped once
    parsed (a graph of 10^6 nodes is not held as JSON and model at once), and the Graph's
    `source` keeps the other keys. Without `check_values`, the values of .npy inputs are
    checked by whoever reads them (NpyFile.values_checked), not here."""
    if not isinstance(raw, dict):
        raise GraphInvalid([Problem("$", f"a graph must be a JSON object, got {type_name(raw)}")])
    checker = _Checker(raw, base_dir, consume, check_values)
    checker.header()
    checker.parse_inputs()
    taken = checker.nodes_in_file_order()
    if taken is None:
        checker.parse_nodes()
        checker.references()
        order = checker.order()
        checker.shapes_in(order)
        placed: Mapping[str, Placed] = checker.nodes
        # Inputs, then nodes in the order shapes_in went.
        shapes: Iterable[tuple[str, Shape]] = checker.shapes.items()
    else:
        order = list(taken.nodes)  # the order Kahn's algorithm gives such a graph
        placed = taken.nodes
        shapes = itertools.chain(checker.shapes.items(), ((n.id, n.shape) for n in placed.values()))
    outputs = checker.outputs(placed)
    checker.unused(outputs, placed, None if taken is None else taken.read)
    limit = limit or host_memory()
    total = checker.sizes(limit, placed, shapes)
    if checker.errors:
        raise GraphInvalid(checker.errors, checker.warnings)
    nodes = checker.model_nodes() if taken is None else taken.nodes
    graph = Graph(
        name=raw.get("name", default_name),
        inputs=checker.inputs,
        nodes=nodes,
        outputs=outputs,
        warnings=tuple(checker.warnings),
        source={key: value for key, value in raw.items() if key != "nodes"} if consume else raw,
    )
    if total > limit.bytes:  # else no moment can hold more than fits: the peak is no question
        checker.peak(graph, limit, order)
    if checker.errors:
        raise GraphInvalid(checker.errors, checker.warnings)
    return graph
