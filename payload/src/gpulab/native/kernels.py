"""Float32 kernels of libgpulab_kernels, called like numpy code.

Inputs are anything numpy turns into float32 arrays (converted only when needed); outputs
are new float32 arrays, or np.float32 scalars for reductions. Shape errors raise ValueError
naming the argument. The library loads on first use and raises NativeUnavailable if it is
missing, so importing this module never needs it.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from gpulab.native import _ffi

FloatArray = npt.NDArray[np.float32]


def library() -> _ffi.NativeLibrary:
    """The loaded kernels library (raises NativeUnavailable); its `path` says which file."""
    return _ffi.load(_ffi.KERNELS)


def _vector(value: npt.ArrayLike, name: str) -> FloatArray:
    array = np.ascontiguousarray(value, dtype=np.float32)
    if array.ndim != 1:
        raise ValueError(f"{name} must be a vector, got shape {array.shape}")
    return array


def _matrix(value: npt.ArrayLike, name: str) -> FloatArray:
    array = np.ascontiguousarray(value, dtype=np.float32)
    if array.ndim != 2:
        raise ValueError(f"{name} must be a matrix, got shape {array.shape}")
    return array


def _same_length(op: str, x: FloatArray, y: FloatArray) -> None:
    if x.shape != y.shape:
        raise ValueError(f"{op}: x has {x.shape[0]} elements but y has {y.shape[0]}")


def _scalar(value: float) -> np.float32:
    # The annotated variable pins the type: numpy's stubs leave np.float32() untyped for
    # Python 3.10 targets.
    result: np.float32 = np.float32(value)
    return result


def _in(native: _ffi.NativeLibrary, array: FloatArray) -> Any:
    return native.ffi.from_buffer("float[]", array)


def _out(native: _ffi.NativeLibrary, array: FloatArray) -> Any:
    return native.ffi.from_buffer("float[]", array, require_writable=True)


def add(x: npt.ArrayLike, y: npt.ArrayLike) -> FloatArray:
    """x + y."""
    xv, yv = _vector(x, "x"), _vector(y, "y")
    _same_length("add", xv, yv)
    native, out = library(), np.empty_like(xv)
    native.lib.gpulab_add(_in(native, xv), _in(native, yv), _out(native, out), xv.size)
    return out


def scale(x: npt.ArrayLike, a: float) -> FloatArray:
    """a * x."""
    xv = _vector(x, "x")
    native, out = library(), np.empty_like(xv)
    native.lib.gpulab_scale(float(a), _in(native, xv), _out(native, out), xv.size)
    return out


def saxpy(a: float, x: npt.ArrayLike, y: npt.ArrayLike) -> FloatArray:
    """a * x + y."""
    xv, yv = _vector(x, "x"), _vector(y, "y")
    _same_length("saxpy", xv, yv)
    native, out = library(), np.empty_like(xv)
    native.lib.gpulab_saxpy(float(a), _in(native, xv), _in(native, yv), _out(native, out), xv.size)
    return out


def sum(x: npt.ArrayLike) -> np.float32:
    """The sum of x (0 for an empty vector)."""
    xv, native = _vector(x, "x"), library()
    return _scalar(native.lib.gpulab_sum(_in(native, xv), xv.size))


def _extreme(op: str, x: npt.ArrayLike) -> np.float32:
    xv, native = _vector(x, "x"), library()
    if xv.size == 0:
        raise ValueError(f"{op} of an empty vector")
    return _scalar(getattr(native.lib, f"gpulab_{op}")(_in(native, xv), xv.size))


def min(x: npt.ArrayLike) -> np.float32:
    """The smallest element of x; NaN if x holds a NaN."""
    return _extreme("min", x)


def max(x: npt.ArrayLike) -> np.float32:
    """The largest element of x; NaN if x holds a NaN."""
    return _extreme("max", x)


def dot(x: npt.ArrayLike, y: npt.ArrayLike) -> np.float32:
    """The sum of x * y."""
    xv, yv = _vector(x, "x"), _vector(y, "y")
    _same_length("dot", xv, yv)
    native = library()
    return _scalar(native.lib.gpulab_dot(_in(native, xv), _in(native, yv), xv.size))


def l2_norm(x: npt.ArrayLike) -> np.float32:
    """sqrt(sum(x**2))."""
    xv, native = _vector(x, "x"), library()
    return _scalar(native.lib.gpulab_l2_norm(_in(native, xv), xv.size))


def normalize(x: npt.ArrayLike) -> FloatArray:
    """x / l2_norm(x); a zero vector has no direction and raises ValueError."""
    xv = _vector(x, "x")
    norm = l2_norm(xv)
    if norm == 0:
        raise ValueError("normalize: x has norm 0")
    return scale(xv, 1.0 / float(norm))


def matvec(A: npt.ArrayLike, x: npt.ArrayLike) -> FloatArray:
    """A @ x for A (m x n) and x (n)."""
    a, xv = _matrix(A, "A"), _vector(x, "x")
    m, n = a.shape
    if xv.size != n:
        raise ValueError(f"matvec: A is {m}x{n} but x has {xv.size} elements")
    native, out = library(), np.empty(m, dtype=np.float32)
    native.lib.gpulab_matvec(_in(native, a), _in(native, xv), _out(native, out), m, n)
    return out


def matmul(A: npt.ArrayLike, B: npt.ArrayLike) -> FloatArray:
    """A @ B for A (m x k) and B (k x n)."""
    a, b = _matrix(A, "A"), _matrix(B, "B")
    (m, k), (k_b, n) = a.shape, b.shape
    if k != k_b:
        raise ValueError(f"matmul: A is {m}x{k} but B is {k_b}x{n}")
    native, out = library(), np.empty((m, n), dtype=np.float32)
    native.lib.gpulab_matmul(_in(native, a), _in(native, b), _out(native, out), m, k, n)
    return out


def _square_system(A: npt.ArrayLike, b: npt.ArrayLike) -> tuple[FloatArray, FloatArray]:
    a, bv = _matrix(A, "A"), _vector(b, "b")
    if a.shape[0] != a.shape[1]:
        raise ValueError(f"jacobi: A must be square, got {a.shape[0]}x{a.shape[1]}")
    if bv.size != a.shape[0]:
        raise ValueError(f"jacobi: A is {a.shape[0]}x{a.shape[1]} but b has {bv.size} elements")
    return a, bv


def jacobi_step(
    A: npt.ArrayLike,
    b: npt.ArrayLike,
    x: npt.ArrayLike,
) -> tuple[FloatArray, float]:
    """One Jacobi step from x: the next iterate and the max-norm of the update."""
    a, bv = _square_system(A, b)
    xv = _vector(x, "x")
    if xv.size != bv.size:
        raise ValueError(f"jacobi: b has {bv.size} elements but x has {xv.size}")
    native, out = library(), np.empty_like(xv)
    update = native.lib.gpulab_jacobi_step(
        _in(native, a), _in(native, bv), _in(native, xv), _out(native, out), xv.size
    )
    return out, float(update)


def jacobi(
    A: npt.ArrayLike,
    b: npt.ArrayLike,
    iterations: int,
    tolerance: float | None = None,
) -> FloatArray:
    """x after `iterations` Jacobi steps from x0 = 0, stopping after the first step whose
    update has a max-norm below `tolerance` (when given)."""
    if iterations < 0:
        raise ValueError(f"jacobi: iterations must be at least 0, got {iterations}")
    a, bv = _square_system(A, b)
    native = library()
    current, following = np.zeros_like(bv), np.empty_like(bv)
    pointers = (_in(native, a), _in(native, bv))
    for _ in range(iterations):
        update = native.lib.gpulab_jacobi_step(
            *pointers, _in(native, current), _out(native, following), bv.size
        )
        current, following = following, current
        if tolerance is not None and update < tolerance:
            break
    return current
