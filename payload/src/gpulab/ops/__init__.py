"""The ops: one entry each (`entry`, listed by `registry`), their table rows (`spec`) and
numpy reference semantics (`reference`)."""

from gpulab.ops.registry import OPS, result_shape
from gpulab.ops.spec import (
    Kind,
    NumericalError,
    OpSpec,
    ParamSpec,
    Shape,
    ShapeError,
    kind_of_shape,
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
