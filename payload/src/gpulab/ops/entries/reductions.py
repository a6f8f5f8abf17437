"""sum, max, min, dot, l2_norm and normalize: a vector reduced to one number (shaders/reduce.glsl
on Vulkan; normalize reduces to the norm, then divides elementwise)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from types import ModuleType
from typing import Any

from gpulab._shown import shown
from gpulab.ops.entries._vector import vector_bench
from gpulab.ops.entries.elementwise import same_vector
from gpulab.ops.entry import Combine, Fusion, OpEntry
from gpulab.ops.solver import SolverReport
from gpulab.ops.spec import Kind, NumericalError, OpSpec, Shape

_V, _S = Kind.VECTOR, Kind.SCALAR


def _to_scalar(shapes: Any) -> Shape:
    return ()


def _same_vector_to_scalar(shapes: Any) -> Shape:
    same_vector(shapes)
    return ()


def _vector_in(shapes: Any) -> Shape:
    result: Shape = shapes["x"]
    return result


def _exact(b: ModuleType, inputs: Any, ref: Any, params: Any) -> Any:
    # min and max must return one of the inputs.
    return b.np.zeros(ref.shape)


def _sum_bound(b: ModuleType, inputs: Any, ref: Any, params: Any) -> Any:
    x = b.wide(inputs["x"])
    return b.dot_bound(x.size, b.np.asarray(b.np.sum(b.np.abs(x))), ref)


def _dot_bound(b: ModuleType, inputs: Any, ref: Any, params: Any) -> Any:
    products = b.np.abs(b.wide(inputs["x"]) * b.wide(inputs["y"]))
    return b.dot_bound(products.size, b.np.asarray(b.np.sum(products)), ref)


def _l2_norm_bound(b: ModuleType, inputs: Any, ref: Any, params: Any) -> Any:
    n = b.wide(inputs["x"]).size
    return ((b.depth(n) + 1) / 2 + 2) * b.EPS32 * b.np.abs(ref)


def _normalize_bound(b: ModuleType, inputs: Any, ref: Any, params: Any) -> Any:
    # Each element carries the norm's relative bound plus the division's.
    n = b.wide(inputs["x"]).size
    relative = ((b.depth(n) + 1) / 2 + 2 + b.ELEMENTWISE_ULPS) * b.EPS32
    return relative * b.np.abs(ref)


def _normalize_check(node: str, extras: Mapping[str, Any]) -> SolverReport | None:
    if extras["norm"] == 0.0:
        raise NumericalError(f"normalize: x has norm 0 (node {shown(node)})")
    return None


def _compare(
    library: Callable[[Any, bool, Mapping[str, Any]], Any],
) -> Callable[[Any, bool, Mapping[str, Any]], Callable[[], Any]]:
    return lambda xp, torch, v: lambda: library(xp, torch, v)


def _norm(xp: Any, torch: bool, x: Any) -> Any:
    return xp.linalg.vector_norm(x) if torch else xp.linalg.norm(x)


def _reduction(  # noqa: PLR0917 - one row of the table below
    name: str,
    inputs: tuple[tuple[str, Kind], ...],
    rule: Any,
    float32: Callable[..., Any],
    library: Callable[[Any, bool, Mapping[str, Any]], Any],
    description: str,
    fusion: Fusion,
) -> OpEntry:
    two = len(inputs) == 2
    return OpEntry(
        spec=OpSpec(
            name, inputs, _S, _same_vector_to_scalar if two else _to_scalar, description=description
        ),
        reference=f"gpulab.ops.reference:{name}",
        native=f"gpulab.native.kernels:{name}",
        tolerance=rule,
        float32=float32,
        cases=(lambda d: [({"x": d.x, "y": d.y}, {})]) if two else (lambda d: [({"x": d.x}, {})]),
        bench=vector_bench(2 if two else 1, y=two, compare=_compare(library)),
        fusion=fusion,
    )


SUM = _reduction(
    "sum",
    (("x", _V),),
    _sum_bound,
    lambda np, x: np.sum(x),
    lambda xp, torch, v: xp.sum(v["x"]),
    "sum of x",
    Fusion("{x}", Combine.SUM),
)
MAX = _reduction(
    "max",
    (("x", _V),),
    _exact,
    lambda np, x: np.max(x),
    lambda xp, torch, v: xp.max(v["x"]),
    "largest element of x",
    Fusion("{x}", Combine.MAX),
)
MIN = _reduction(
    "min",
    (("x", _V),),
    _exact,
    lambda np, x: np.min(x),
    lambda xp, torch, v: xp.min(v["x"]),
    "smallest element of x",
    Fusion("{x}", Combine.MIN),
)
DOT = _reduction(
    "dot",
    (("x", _V), ("y", _V)),
    _dot_bound,
    lambda np, x, y: np.dot(x, y),
    lambda xp, torch, v: xp.dot(v["x"], v["y"]),
    "sum of x * y",
    Fusion("{x} * {y}", Combine.SUM),
)
L2_NORM = _reduction(
    "l2_norm",
    (("x", _V),),
    _l2_norm_bound,
    lambda np, x: np.linalg.norm(x),
    lambda xp, torch, v: _norm(xp, torch, v["x"]),
    "sqrt(sum(x**2))",
    Fusion("{x} * {x}", Combine.SUM, root=True),
)


def _normalize_compare(xp: Any, torch: bool, v: Mapping[str, Any]) -> Callable[[], Any]:
    divide = xp.div if torch else xp.divide
    return lambda: divide(v["x"], _norm(xp, torch, v["x"]), out=v["out"])


NORMALIZE = OpEntry(
    spec=OpSpec(
        "normalize",
        (("x", _V),),
        _V,
        _vector_in,
        description="x / l2_norm(x); a zero vector is an error (NumericalError)",
    ),
    reference="gpulab.ops.reference:normalize",
    native="gpulab.native.kernels:normalize",
    tolerance=_normalize_bound,
    float32=lambda np, x: x / np.linalg.norm(x),
    cases=lambda d: [({"x": d.x}, {})],
    # x read for the norm, read again and written scaled.
    bench=vector_bench(3, compare=_normalize_compare),
    host_errors_are_numerical=True,
    check=_normalize_check,
    # The norm first (its own pass over x), then x / norm fuses like an elementwise op.
    fusion=Fusion(
        "{x} / {norm}", prepared=(("norm", Fusion("{x} * {x}", Combine.SUM, root=True)),)
    ),
)

ENTRIES = (SUM, MAX, MIN, DOT, L2_NORM, NORMALIZE)
