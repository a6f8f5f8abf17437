"""Compute graphs: the model, loading with full validation, the JSON Schema, scheduling.

`materialize` (numpy) is imported on first use (PEP 562): validating a graph needs no numpy.
"""

from typing import TYPE_CHECKING

from gpulab._lazy import lazy_attributes
from gpulab.graph.load import load_graph, read_json
from gpulab.graph.model import (
    BACKEND_NAMES,
    GRAPH_VERSION,
    Graph,
    GraphInput,
    Literal,
    Node,
    Ref,
    nbytes,
)
from gpulab.graph.problems import GraphInvalid, Problem
from gpulab.graph.schedule import Schedule, schedule
from gpulab.graph.schema import graph_schema
from gpulab.graph.validate import MemoryLimit, available_memory, host_memory, validate

if TYPE_CHECKING:
    from gpulab.graph.values import materialize

__all__ = [
    "BACKEND_NAMES",
    "GRAPH_VERSION",
    "Graph",
    "GraphInput",
    "GraphInvalid",
    "Literal",
    "MemoryLimit",
    "Node",
    "Problem",
    "Ref",
    "Schedule",
    "available_memory",
    "graph_schema",
    "host_memory",
    "load_graph",
    "materialize",
    "nbytes",
    "read_json",
    "schedule",
    "validate",
]

__getattr__, __dir__ = lazy_attributes(__name__, {"materialize": "gpulab.graph.values"})
