"""What an op's table row is made of: inputs and their kinds, params, result kind and shape
rule (`OpSpec`). Each op's row is part of its entry (gpulab.ops.entry); gpulab.ops.registry
lists them as OPS. Shapes are numpy's: () for a scalar, (n,) for a vector, (rows, cols) for a
matrix.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import cached_property

Shape = tuple[int, ...]


class Kind(str, enum.Enum):
    """The kind of a value; the string is the graph JSON's `type`."""

    SCALAR = "scalar"
    VECTOR = "vector"
    MATRIX = "matrix"

    @property
    def ndim(self) -> int:
        """The number of dimensions of values of this kind."""
        return {Kind.SCALAR: 0, Kind.VECTOR: 1, Kind.MATRIX: 2}[self]


KIND_OF_NDIM = (Kind.SCALAR, Kind.VECTOR, Kind.MATRIX)
"""The kind of a value by its number of dimensions (kind_of_shape, for loops over 10^6
values that cannot afford the call)."""


def kind_of_shape(shape: Shape) -> Kind:
    """The kind of a value with this shape (0, 1 or 2 dimensions)."""
    return KIND_OF_NDIM[len(shape)]


class ShapeError(ValueError):
    """Input shapes that an op cannot combine; `input` names the offending input."""

    def __init__(self, input: str, message: str) -> None:
        super().__init__(message)
        self.input = input


class NumericalError(ArithmeticError):
    """An op has no defined result for its values (normalize of a zero vector)."""


@dataclass(frozen=True)
class ParamSpec:
    """One op parameter: its type, whether it is required, its default and lower bound."""

    name: str
    type: type[int] | type[float]
    required: bool
    default: int | float | None = None
    minimum: float | None = None
    exclusive_minimum: bool = False
    maximum: int | None = None
    """The largest value an integer param takes."""
    description: str = ""


ShapeRule = Callable[[Mapping[str, Shape]], Shape]


@dataclass(frozen=True)
class OpSpec:
    """One op: ordered inputs with their kinds, params, result kind and shape rule."""

    name: str
    inputs: tuple[tuple[str, Kind], ...]
    result: Kind
    shape: ShapeRule
    params: tuple[ParamSpec, ...] = ()
    description: str = ""
    any_kind: bool = False
    """Its inputs by name take a value of any kind; the shape rule checks them (a user
    kernel node's own spec)."""

    # Computed once per op: validation asks them for every node of graphs of 10^6 nodes.
    @cached_property
    def input_names(self) -> tuple[str, ...]:
        """The input names in the order the op takes them."""
        return tuple(name for name, _ in self.inputs)

    @cached_property
    def input_kinds(self) -> Mapping[str, Kind]:
        """The kind each input must have, by name."""
        return dict(self.inputs)

    def input_kind(self, name: str) -> Kind:
        """The kind the input `name` must have."""
        return self.input_kinds[name]

    def param(self, name: str) -> ParamSpec:
        """The spec of the param `name` (KeyError if the op has none by that name)."""
        for param in self.params:
            if param.name == name:
                return param
        raise KeyError(name)
