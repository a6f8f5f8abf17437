"""add, scale and saxpy: one pass over the elements (shaders/elementwise.comp on Vulkan)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from types import ModuleType
from typing import Any

from gpulab._shown import shown
from gpulab.ops.entries._vector import vector_bench
from gpulab.ops.entry import Fusion, OpEntry
from gpulab.ops.spec import Kind, OpSpec, Shape, ShapeError

_V, _S = Kind.VECTOR, Kind.SCALAR


def same_vector(shapes: Any) -> Shape:
    """x and y of the same length: that shape."""
    x, y = shapes["x"], shapes["y"]
    if x != y:
        raise ShapeError("y", f"x has {shown(x[0])} elements but y has {shown(y[0])}")
    result: Shape = x
    return result


def _vector_in(shapes: Any) -> Shape:
    result: Shape = shapes["x"]
    return result


def _add_bound(b: ModuleType, inputs: Any, ref: Any, params: Any) -> Any:
    return b.elementwise(b.np.abs(b.wide(inputs["x"])) + b.np.abs(b.wide(inputs["y"])))


def _scale_bound(b: ModuleType, inputs: Any, ref: Any, params: Any) -> Any:
    return b.elementwise(b.np.abs(b.wide(inputs["a"]) * b.wide(inputs["x"])))


def _saxpy_bound(b: ModuleType, inputs: Any, ref: Any, params: Any) -> Any:
    scaled = b.np.abs(b.wide(inputs["a"]) * b.wide(inputs["x"]))
    return b.elementwise(scaled + b.np.abs(b.wide(inputs["y"])))


def _add_compare(xp: Any, torch: bool, v: Mapping[str, Any]) -> Callable[[], Any]:
    return lambda: xp.add(v["x"], v["y"], out=v["out"])


def _scale_compare(xp: Any, torch: bool, v: Mapping[str, Any]) -> Callable[[], Any]:
    if torch:
        return lambda: xp.mul(v["x"], v["a"], out=v["out"])
    return lambda: xp.multiply(v["x"], xp.float32(v["a"]), out=v["out"])


def _saxpy_compare(xp: Any, torch: bool, v: Mapping[str, Any]) -> Callable[[], Any]:
    if torch:
        return lambda: xp.add(v["y"], v["x"], alpha=v["a"], out=v["out"])
    kernel = xp.ElementwiseKernel(
        "float32 a, float32 x, float32 y", "float32 o", "o = a * x + y", "gpulab_saxpy"
    )
    return lambda: kernel(xp.float32(v["a"]), v["x"], v["y"], v["out"])


ADD = OpEntry(
    spec=OpSpec("add", (("x", _V), ("y", _V)), _V, same_vector, description="x + y"),
    reference="gpulab.ops.reference:add",
    native="gpulab.native.kernels:add",
    tolerance=_add_bound,
    float32=lambda np, x, y: x + y,
    cases=lambda d: [({"x": d.x, "y": d.y}, {})],
    bench=vector_bench(3, y=True, compare=_add_compare),
    fusion=Fusion("{x} + {y}"),
)

SCALE = OpEntry(
    spec=OpSpec("scale", (("x", _V), ("a", _S)), _V, _vector_in, description="a * x"),
    reference="gpulab.ops.reference:scale",
    native="gpulab.native.kernels:scale",
    tolerance=_scale_bound,
    float32=lambda np, x, a=0.0: np.float32(a) * x,
    cases=lambda d: [({"x": d.x, "a": -2.5}, {})],
    bench=vector_bench(2, a=True, compare=_scale_compare),
    fusion=Fusion("{a} * {x}"),
)

SAXPY = OpEntry(
    spec=OpSpec(
        "saxpy", (("a", _S), ("x", _V), ("y", _V)), _V, same_vector, description="a * x + y"
    ),
    reference="gpulab.ops.reference:saxpy",
    native="gpulab.native.kernels:saxpy",
    tolerance=_saxpy_bound,
    float32=lambda np, x, y, a=0.0: np.float32(a) * x + y,
    cases=lambda d: [({"a": 1.5, "x": d.x, "y": d.y}, {})],
    bench=vector_bench(3, y=True, a=True, compare=_saxpy_compare),
    fusion=Fusion("{a} * {x} + {y}"),
)

ENTRIES = (ADD, SCALE, SAXPY)
