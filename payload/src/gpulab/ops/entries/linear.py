"""matvec and matmul: dots of matrix rows (shaders/matvec.glsl and matmul.comp on Vulkan)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from types import ModuleType
from typing import Any

from gpulab._shown import shown
from gpulab.ops.entry import Bench, OpEntry
from gpulab.ops.spec import Kind, OpSpec, Shape, ShapeError

_V, _M = Kind.VECTOR, Kind.MATRIX
MATMUL_INNER = (65, 31)
"""matmul's inner and output-column sizes beyond 33 rows in selftest (a full 1025^3 product
takes seconds on lavapipe and tells no more than these awkward shapes)."""
MATRIX, VECTOR = 0.25, 0.5
"""bench's fill values of the matrix and of the vector (or second matrix)."""


def _matvec(shapes: Any) -> Shape:
    (m, n), (length,) = shapes["A"], shapes["x"]
    if length != n:
        raise ShapeError(
            "x", f"A is {shown(m)}x{shown(n)} so x needs {shown(n)} elements, got {shown(length)}"
        )
    return (m,)


def _matmul(shapes: Any) -> Shape:
    (m, k), (k_b, n) = shapes["A"], shapes["B"]
    if k != k_b:
        raise ShapeError(
            "B",
            f"A is {shown(m)}x{shown(k)} so B needs {shown(k)} rows, got {shown(k_b)}x{shown(n)}",
        )
    return (m, n)


def _matvec_bound(b: ModuleType, inputs: Any, ref: Any, params: Any) -> Any:
    a, x = b.wide(inputs["A"]), b.wide(inputs["x"])
    return b.dot_bound(a.shape[1], b.np.abs(a) @ b.np.abs(x), ref)


def _matmul_bound(b: ModuleType, inputs: Any, ref: Any, params: Any) -> Any:
    a, m = b.wide(inputs["A"]), b.wide(inputs["B"])
    return b.dot_bound(a.shape[1], b.np.abs(a) @ b.np.abs(m), ref)


def _matvec_cases(d: Any) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    rows, cols = d.square_side()
    return [({"A": d.uniform((rows, cols)), "x": d.uniform(cols)}, {})]


def _matmul_cases(d: Any) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    rows, cols = d.square_side()
    inner, columns = (cols, cols) if d.n <= 33 else MATMUL_INNER
    return [({"A": d.uniform((rows, inner)), "B": d.uniform((inner, columns))}, {})]


def _matvec_compare(xp: Any, torch: bool, v: Mapping[str, Any]) -> Callable[[], Any]:
    if torch:
        return lambda: xp.mv(v["A"], v["x"], out=v["out"])
    return lambda: xp.matmul(v["A"], v["x"], out=v["out"])


def _matmul_bytes(n: int, dims: tuple[int, int, int]) -> int:
    m, k, cols = dims
    return 4 * (m * k + k * cols + m * cols)


MATVEC = OpEntry(
    spec=OpSpec("matvec", (("A", _M), ("x", _V)), _V, _matvec, description="A @ x"),
    reference="gpulab.ops.reference:matvec",
    native="gpulab.native.kernels:matvec",
    tolerance=_matvec_bound,
    float32=lambda np, A, x: A @ x,
    cases=_matvec_cases,
    bench=Bench(
        bytes_moved=lambda n, dims: 4 * (n * n + 2 * n),
        flops=lambda n, dims: 2 * n * n,
        inputs=lambda n, dims: {"A": ((n, n), MATRIX), "x": ((n,), VECTOR)},
        matrix=True,
        fields=lambda n, dims, seconds: {"shape": [n, n]},
        compare=_matvec_compare,
        sizes=(8, 13, 1),
    ),
    one_binding=True,
)

MATMUL = OpEntry(
    spec=OpSpec("matmul", (("A", _M), ("B", _M)), _M, _matmul, description="A @ B"),
    reference="gpulab.ops.reference:matmul",
    native="gpulab.native.kernels:matmul",
    tolerance=_matmul_bound,
    float32=lambda np, A, B: A @ B,
    cases=_matmul_cases,
    bench=Bench(
        bytes_moved=_matmul_bytes,
        flops=lambda n, dims: 2 * dims[0] * dims[1] * dims[2],
        inputs=lambda n, dims: {
            "A": ((dims[0], dims[1]), MATRIX),
            "B": ((dims[1], dims[2]), VECTOR),
        },
        matrix=True,
        fields=lambda n, dims, seconds: {"shape": list(dims)},
        compare=lambda xp, torch, v: lambda: xp.matmul(v["A"], v["B"], out=v["out"]),
        shapes=True,
        sizes=(8, 12, 1),
        device_bytes=_matmul_bytes,
    ),
    one_binding=True,
)

ENTRIES = (MATVEC, MATMUL)
