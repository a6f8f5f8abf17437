"""The contract's ops: their table (`spec`) and numpy reference semantics (`reference`)."""

from gpulab.ops.spec import (
    OPS,
    Kind,
    NumericalError,
    OpSpec,
    ParamSpec,
    Shape,
    ShapeError,
    kind_of_shape,
    result_shape,
)

__all__ = [
    "OPS",
    "Kind",
    "NumericalError",
    "OpSpec",
    "ParamSpec",
    "Shape",
    "ShapeError",
    "kind_of_shape",
    "result_shape",
]
