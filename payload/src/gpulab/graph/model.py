"""The graph model: float32 values (scalar, vector, matrix), where inputs come from, and nodes.

Built by `gpulab.graph.load` from JSON after validation, so every object here is consistent:
references resolve, kinds and shapes agree, there is no cycle.
"""

from __future__ import annotations

import math
from collections.abc import ItemsView, Iterator, Mapping, ValuesView
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

from gpulab.graph.problems import Problem
from gpulab.ops import Kind, Shape

GRAPH_VERSION = 1
BACKEND_NAMES = ("cpu", "native", "vulkan")
"""Backends a node may name as its override (`auto` is a run-wide choice only)."""


@dataclass(frozen=True)
class Random:
    """numpy's default_rng(seed).uniform(low, high, shape) cast to float32."""

    seed: int
    low: float
    high: float


@dataclass(frozen=True)
class Fill:
    """Every element equal to `value`."""

    value: float


@dataclass(frozen=True)
class Linspace:
    """np.linspace(start, stop, n) cast to float32."""

    start: float
    stop: float


@dataclass(frozen=True)
class Data:
    """Values given in the graph: a number, a list, or a list of rows."""

    values: Any


@dataclass(frozen=True)
class NpyFile:
    """A .npy file (resolved against the graph file's folder) cast to float32."""

    path: Path
    shown_as: str = ""
    """The path as the graph gives it, as messages show it."""
    values_checked: bool = True
    """False when loading left the check of the values (finite float32) to whoever reads
    them (load_graph's check_values): gpulab.graph.npy.refuse_bad_values."""


Source = Random | Fill | Linspace | Data | NpyFile


@dataclass(frozen=True)
class GraphInput:
    """A named input value: its kind, shape and source."""

    name: str
    kind: Kind
    shape: Shape
    source: Source


@dataclass(frozen=True, slots=True)
class Ref:
    """A node input that names a graph input or another node."""

    name: str


@dataclass(frozen=True, slots=True)
class Literal:
    """A node input given as a number (a scalar)."""

    value: float


Argument = Ref | Literal


class Arguments(Mapping[str, Argument]):
    """A node's inputs by name, in the op's order: `names` is the op's tuple, shared by all
    its nodes, `given` this node's values. Half the memory of a dict, which counts in a
    graph of 10^6 nodes. Read-only, like the rest of the model."""

    __slots__ = ("given", "names")

    def __init__(self, names: tuple[str, ...], given: tuple[Argument, ...]) -> None:
        if len(names) != len(given):
            raise ValueError(f"{len(names)} input names but {len(given)} values")
        self.names = names
        self.given = given

    def __getitem__(self, name: str) -> Argument:
        for own, value in zip(self.names, self.given, strict=True):
            if own == name:
                return value
        raise KeyError(name)

    def __iter__(self) -> Iterator[str]:
        return iter(self.names)

    def __len__(self) -> int:
        return len(self.names)

    def values(self) -> ValuesView[Argument]:
        return _Values(self)

    def items(self) -> ItemsView[str, Argument]:
        return _Items(self)

    def __repr__(self) -> str:
        return repr(dict(self.items()))


class _Values(ValuesView[Argument]):
    _mapping: Arguments

    def __iter__(self) -> Iterator[Argument]:
        return iter(self._mapping.given)  # no lookup per name


class _Items(ItemsView[str, Argument]):
    _mapping: Arguments

    def __iter__(self) -> Iterator[tuple[str, Argument]]:
        return zip(self._mapping.names, self._mapping.given, strict=True)


@dataclass(frozen=True, slots=True)
class Node:
    """One op application; `index` is its position in the graph file (the schedule tie-break)."""

    id: str
    op: str
    inputs: Arguments
    params: Mapping[str, Any]
    backend: str | None
    index: int
    kind: Kind
    shape: Shape

    @property
    def references(self) -> tuple[str, ...]:
        """The names this node reads, in the op's input order."""
        return tuple(arg.name for arg in self.inputs.given if isinstance(arg, Ref))


def nbytes(shape: Shape) -> int:
    """Bytes of a float32 value of this shape."""
    return 4 * math.prod(shape)


@dataclass(frozen=True)
class Graph:
    """A validated graph, ready to schedule and run."""

    name: str
    inputs: Mapping[str, GraphInput]
    nodes: Mapping[str, Node]
    outputs: tuple[str, ...]
    warnings: tuple[Problem, ...] = field(default=())
    source: Mapping[str, Any] = field(default_factory=dict, compare=False, repr=False)
    """The decoded JSON it was validated from; without `nodes` when loaded from a file (their
    JSON is dropped as they are parsed: `nodes` holds them)."""

    @cached_property
    def output_set(self) -> frozenset[str]:
        """`outputs` for membership tests (a tuple's would make thousands of outputs quadratic)."""
        return frozenset(self.outputs)

    def shape(self, name: str) -> Shape:
        """The shape of an input or node value."""
        if name in self.inputs:
            return self.inputs[name].shape
        return self.nodes[name].shape

    def kind(self, name: str) -> Kind:
        """The kind of an input or node value."""
        if name in self.inputs:
            return self.inputs[name].kind
        return self.nodes[name].kind
