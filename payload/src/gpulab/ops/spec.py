"""The contract's ops in one table: inputs and their kinds, params, result kind and shape rule.

Every layer reads this table: graph validation checks kinds and shapes with it before any work,
and each backend dispatches on the same names. Shapes are numpy's: () for a scalar, (n,) for a
vector, (rows, cols) for a matrix.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import cached_property

from gpulab._shown import shown

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


# Sizes are shown cut (gpulab._shown): a JSON integer may have thousands of digits.


def _same_vector(shapes: Mapping[str, Shape]) -> Shape:
    x, y = shapes["x"], shapes["y"]
    if x != y:
        raise ShapeError("y", f"x has {shown(x[0])} elements but y has {shown(y[0])}")
    return x


def _same_vector_to_scalar(shapes: Mapping[str, Shape]) -> Shape:
    _same_vector(shapes)
    return ()


def _vector_in(shapes: Mapping[str, Shape]) -> Shape:
    return shapes["x"]


def _to_scalar(shapes: Mapping[str, Shape]) -> Shape:
    return ()


def _matvec(shapes: Mapping[str, Shape]) -> Shape:
    (m, n), (length,) = shapes["A"], shapes["x"]
    if length != n:
        raise ShapeError(
            "x", f"A is {shown(m)}x{shown(n)} so x needs {shown(n)} elements, got {shown(length)}"
        )
    return (m,)


def _matmul(shapes: Mapping[str, Shape]) -> Shape:
    (m, k), (k_b, n) = shapes["A"], shapes["B"]
    if k != k_b:
        raise ShapeError(
            "B",
            f"A is {shown(m)}x{shown(k)} so B needs {shown(k)} rows, got {shown(k_b)}x{shown(n)}",
        )
    return (m, n)


def _jacobi(shapes: Mapping[str, Shape]) -> Shape:
    (m, n), (length,) = shapes["A"], shapes["b"]
    if m != n:
        raise ShapeError("A", f"jacobi needs a square matrix A, got {shown(m)}x{shown(n)}")
    if length != n:
        raise ShapeError(
            "b", f"A is {shown(m)}x{shown(n)} so b needs {shown(n)} elements, got {shown(length)}"
        )
    return (n,)


_V, _S, _M = Kind.VECTOR, Kind.SCALAR, Kind.MATRIX

OPS: Mapping[str, OpSpec] = {
    spec.name: spec
    for spec in (
        OpSpec("add", (("x", _V), ("y", _V)), _V, _same_vector, description="x + y"),
        OpSpec("scale", (("x", _V), ("a", _S)), _V, _vector_in, description="a * x"),
        OpSpec(
            "saxpy", (("a", _S), ("x", _V), ("y", _V)), _V, _same_vector, description="a * x + y"
        ),
        OpSpec("sum", (("x", _V),), _S, _to_scalar, description="sum of x"),
        OpSpec("max", (("x", _V),), _S, _to_scalar, description="largest element of x"),
        OpSpec("min", (("x", _V),), _S, _to_scalar, description="smallest element of x"),
        OpSpec(
            "dot",
            (("x", _V), ("y", _V)),
            _S,
            _same_vector_to_scalar,
            description="sum of x * y",
        ),
        OpSpec("l2_norm", (("x", _V),), _S, _to_scalar, description="sqrt(sum(x**2))"),
        OpSpec(
            "normalize",
            (("x", _V),),
            _V,
            _vector_in,
            description="x / l2_norm(x); a zero vector is an error (NumericalError)",
        ),
        OpSpec("matvec", (("A", _M), ("x", _V)), _V, _matvec, description="A @ x"),
        OpSpec("matmul", (("A", _M), ("B", _M)), _M, _matmul, description="A @ B"),
        OpSpec(
            "jacobi",
            (("A", _M), ("b", _V)),
            _V,
            _jacobi,
            params=(
                ParamSpec(
                    "iterations",
                    int,
                    required=True,
                    minimum=0,
                    description="Jacobi steps from x0 = 0",
                ),
                ParamSpec(
                    "tolerance",
                    float,
                    required=False,
                    minimum=0,
                    exclusive_minimum=True,
                    description="stop after the first step whose update has a max-norm below it",
                ),
            ),
            description="x after `iterations` Jacobi steps for A x = b from x0 = 0",
        ),
    )
}


def result_shape(op: str, shapes: Mapping[str, Shape]) -> Shape:
    """The result shape of `op` for input shapes of the right kinds (ShapeError otherwise)."""
    return OPS[op].shape(shapes)
