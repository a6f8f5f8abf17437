"""Validation's one pass for the common graph: nodes well formed, each reading only graph
inputs and nodes before it in the file, with kinds and shapes that agree.

Such a node becomes its model Node at once. The step-by-step passes (ids, references, order,
shapes), which word every problem, would find nothing in it, and cost several times as much
on graphs of millions of nodes. The first node that is not so stops this pass: the rest of
the graph, and the nodes taken so far, go through those passes instead.
"""

from __future__ import annotations

from collections.abc import Container, Mapping
from typing import Any, NamedTuple

from gpulab.graph.model import Argument, Arguments, GraphInput, Node, Ref
from gpulab.graph.nodes import argument_value, literal, node_header, node_params
from gpulab.ops import Shape, ShapeError
from gpulab.ops.spec import KIND_OF_NDIM


class Taken(NamedTuple):
    """What the one pass took: the model's nodes, where it stopped (the number of nodes when
    it took them all), and, when it took them all, every name they read (for the warnings
    about values nobody reads)."""

    nodes: dict[str, Node]
    stop: int
    read: set[str]


def nodes_in_file_order(
    raw_nodes: list[Any], inputs: Mapping[str, GraphInput], names: Container[str], consume: bool
) -> Taken:
    """The model's nodes for the longest run of `raw_nodes` from the start that needs no
    other check, and where that run stops.

    `inputs` are the graph inputs that are well formed, `names` every input's name. With
    `consume` each node's JSON is dropped once taken. A reference is made from the name of
    what it reads (one Ref per input, shared), so the JSON's copy of the name goes too."""
    nodes: dict[str, Node] = {}
    read_names: set[str] = set()
    input_refs = {name: Ref(name) for name in inputs}
    for index, raw in enumerate(raw_nodes):
        # The checks of nodes.well_formed, step by step, with each name resolved on the way.
        header = node_header(raw)
        if header is None:
            return Taken(nodes, index, read_names)
        node_id, spec, raw_inputs, backend = header
        if node_id in nodes or node_id in names:
            return Taken(nodes, index, read_names)  # a duplicate id, or an input's name
        given: dict[str, Shape] = {}
        arguments: list[Argument] = []
        for name, kind in spec.inputs:
            value = argument_value(kind, raw_inputs[name])
            if value is None:
                return Taken(nodes, index, read_names)
            if isinstance(value, str):
                read = nodes.get(value)
                if read is not None:
                    shape = read.shape
                    arguments.append(Ref(read.id))
                else:
                    read_input = inputs.get(value)
                    if read_input is None:  # unknown, later in the file, broken, or itself
                        return Taken(nodes, index, read_names)
                    shape = read_input.shape
                    arguments.append(input_refs[value])
                if KIND_OF_NDIM[len(shape)] is not kind:
                    return Taken(nodes, index, read_names)
                read_names.add(value)
            else:
                shape = ()
                arguments.append(literal(value))
            given[name] = shape
        params = node_params(index, raw, spec)
        if params is None:
            return Taken(nodes, index, read_names)
        try:
            shape = spec.shape(given)
        except ShapeError:
            return Taken(nodes, index, read_names)
        inputs_of = Arguments(spec.input_names, tuple(arguments))
        nodes[node_id] = Node(
            node_id, spec.name, inputs_of, params, backend, index, KIND_OF_NDIM[len(shape)], shape
        )
        if consume:
            raw_nodes[index] = None  # its JSON (about 500 bytes) is not needed again
    return Taken(nodes, len(raw_nodes), read_names)
