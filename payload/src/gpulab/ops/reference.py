"""numpy float32 implementations of every contract op: the semantics the other backends match.

Same names and signatures as `gpulab.native.kernels`, so a backend can dispatch on either module.
Inputs are converted to float32; results are float32 arrays, or np.float32 for reductions.
Reductions and products accumulate in float64 and round once to float32; elementwise ops
compute in float32 as the GPU does.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import numpy.typing as npt

from gpulab.ops import registry
from gpulab.ops.solver import SolverReport, solve
from gpulab.ops.spec import NumericalError

FloatArray = npt.NDArray[np.float32]


def _array(value: npt.ArrayLike) -> FloatArray:
    return np.asarray(value, dtype=np.float32)


def _scalar(value: float | np.floating[Any]) -> np.float32:
    result: np.float32 = np.float32(value)
    return result


def add(x: npt.ArrayLike, y: npt.ArrayLike) -> FloatArray:
    """x + y."""
    return _array(_array(x) + _array(y))


def scale(x: npt.ArrayLike, a: float) -> FloatArray:
    """a * x."""
    return _array(np.float32(a) * _array(x))


def saxpy(a: float, x: npt.ArrayLike, y: npt.ArrayLike) -> FloatArray:
    """a * x + y."""
    return _array(np.float32(a) * _array(x) + _array(y))


def sum(x: npt.ArrayLike) -> np.float32:
    """The sum of x, accumulated in float64."""
    return _scalar(np.sum(_array(x), dtype=np.float64))


def max(x: npt.ArrayLike) -> np.float32:
    """The largest element of x; NaN if x holds a NaN."""
    return _scalar(np.max(_array(x)))


def min(x: npt.ArrayLike) -> np.float32:
    """The smallest element of x; NaN if x holds a NaN."""
    return _scalar(np.min(_array(x)))


def dot(x: npt.ArrayLike, y: npt.ArrayLike) -> np.float32:
    """The sum of x * y, accumulated in float64."""
    return _scalar(np.dot(_array(x).astype(np.float64), _array(y).astype(np.float64)))


def _norm64(x: FloatArray) -> float:
    wide = x.astype(np.float64)
    return float(np.sqrt(np.dot(wide, wide)))


def l2_norm(x: npt.ArrayLike) -> np.float32:
    """sqrt(sum(x**2)), accumulated in float64."""
    return _scalar(_norm64(_array(x)))


def normalize(x: npt.ArrayLike) -> FloatArray:
    """x / l2_norm(x). A zero vector has no direction: NumericalError, not NaNs."""
    xv = _array(x)
    norm = _norm64(xv)
    if norm == 0:
        raise NumericalError("normalize: x has norm 0")
    return _array(xv.astype(np.float64) / norm)


def matvec(A: npt.ArrayLike, x: npt.ArrayLike) -> FloatArray:
    """A @ x, accumulated in float64."""
    return _array(_array(A).astype(np.float64) @ _array(x).astype(np.float64))


def matmul(A: npt.ArrayLike, B: npt.ArrayLike) -> FloatArray:
    """A @ B, accumulated in float64."""
    return _array(_array(A).astype(np.float64) @ _array(B).astype(np.float64))


def jacobi_step(A: npt.ArrayLike, b: npt.ArrayLike, x: npt.ArrayLike) -> tuple[FloatArray, float]:
    """One Jacobi step from x: the next float32 iterate and the max-norm of the update."""
    a = _array(A).astype(np.float64)
    bv, xv = _array(b).astype(np.float64), _array(x)
    diagonal = np.diag(a)
    off_diagonal = a @ xv.astype(np.float64) - diagonal * xv
    following = _array((bv - off_diagonal) / diagonal)
    update = float(np.max(np.abs(following - xv))) if xv.size else 0.0
    return following, update


def jacobi(
    A: npt.ArrayLike, b: npt.ArrayLike, iterations: int, tolerance: float | None = None
) -> FloatArray:
    """x after `iterations` Jacobi steps from x0 = 0, stopping after the first step whose
    update has a max-norm below `tolerance` (when given)."""
    return jacobi_solve(A, b, iterations, tolerance)[0]


def jacobi_solve(
    A: npt.ArrayLike, b: npt.ArrayLike, iterations: int, tolerance: float | None = None
) -> tuple[FloatArray, SolverReport]:
    """jacobi, and how the solve went (steps, convergence, last update)."""
    return solve(jacobi_step, A, b, iterations, tolerance)


def evaluate(op: str, inputs: Mapping[str, Any], params: Mapping[str, Any]) -> Any:
    """Run `op` on named inputs and params (the graph's calling convention)."""
    found = registry.entry(op)
    arguments = {name: inputs[name] for name in found.spec.input_names}
    arguments.update(params)
    return found.reference_function(**arguments)
