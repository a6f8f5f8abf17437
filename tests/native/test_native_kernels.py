"""Each native kernel against numpy and an exact float64 reference.

Tolerance policy (float32): elementwise results within 2 ulps of each term's magnitude;
reductions within eps32 * (sum of the absolute values of the terms) of the exact value,
which bounds any correctly accumulated float32 result, and never worse than numpy's own
float32 result by more than half an ulp of the answer.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
import pytest
from gpulab.native import kernels

EPS32 = float(np.finfo(np.float32).eps)
SIZES = [0, 1, 7, 1000, 1025, 1 << 16, (1 << 20) + 3]


def vectors(n: int, seed: int) -> tuple[npt.NDArray[np.float32], npt.NDArray[np.float32]]:
    rng = np.random.default_rng(seed)
    x = rng.uniform(-1.0, 1.0, n).astype(np.float32)
    y = rng.uniform(-1.0, 1.0, n).astype(np.float32)
    return x, y


def assert_reduction(got: np.float32, numpy_result: float, terms: npt.NDArray[np.float64]) -> None:
    exact = float(np.sum(terms, dtype=np.float64))
    scale = float(np.sum(np.abs(terms))) or 1.0
    error = abs(float(got) - exact)
    assert error <= EPS32 * scale, (got, exact)
    half_ulp = float(np.spacing(np.float32(abs(exact)))) / 2
    assert error <= abs(numpy_result - exact) + half_ulp


@pytest.mark.parametrize("n", SIZES)
def test_elementwise_ops_match_numpy(n: int) -> None:
    x, y = vectors(n, 1)
    np.testing.assert_array_equal(kernels.add(x, y), x + y)
    np.testing.assert_array_equal(kernels.scale(x, 2.5), np.float32(2.5) * x)
    got = kernels.saxpy(-3.0, x, y)
    exact = -3.0 * x.astype(np.float64) + y
    tolerance = 2 * EPS32 * (3.0 * np.abs(x) + np.abs(y))
    assert np.all(np.abs(got - exact) <= tolerance)
    assert got.dtype == np.float32 and got.shape == (n,)


@pytest.mark.parametrize("n", SIZES)
def test_reductions_within_the_float32_bound(n: int) -> None:
    x, y = vectors(n, 2)
    x64, y64 = x.astype(np.float64), y.astype(np.float64)
    assert_reduction(kernels.sum(x), float(np.sum(x)), x64)
    assert_reduction(kernels.dot(x, y), float(np.dot(x, y)), x64 * y64)
    norm_squared = float(kernels.l2_norm(x)) ** 2
    assert abs(norm_squared - float(np.sum(x64 * x64))) <= 3 * EPS32 * float(np.sum(x64 * x64))
    if n:
        assert kernels.min(x) == np.min(x)
        assert kernels.max(x) == np.max(x)


def test_sum_is_more_accurate_than_float32_accumulation() -> None:
    # Large, cancelling terms: a naive float32 running sum loses most digits here.
    rng = np.random.default_rng(3)
    x = (rng.standard_normal(1 << 20) * 1e4).astype(np.float32)
    x = np.concatenate([x, -x[::-1], np.array([0.5], dtype=np.float32)])
    assert kernels.sum(x) == np.float32(0.5)


def test_reductions_return_float32_scalars() -> None:
    x, y = vectors(10, 4)
    for value in (kernels.sum(x), kernels.dot(x, y), kernels.l2_norm(x), kernels.min(x)):
        assert isinstance(value, np.float32)


def test_min_max_propagate_nan_and_handle_infinities() -> None:
    x = np.array([1.0, -np.inf, 3.0, np.inf, -0.0], dtype=np.float32)
    assert kernels.min(x) == -np.inf and kernels.max(x) == np.inf
    x[2] = np.nan
    assert np.isnan(kernels.min(x)) and np.isnan(kernels.max(x))


def test_empty_vectors() -> None:
    empty = np.zeros(0, dtype=np.float32)
    assert kernels.sum(empty) == 0 and kernels.l2_norm(empty) == 0
    with pytest.raises(ValueError, match="min of an empty vector"):
        kernels.min(empty)


def test_normalize() -> None:
    x, _ = vectors(1001, 5)
    got = kernels.normalize(x)
    np.testing.assert_allclose(got, x / np.linalg.norm(x.astype(np.float64)), rtol=4 * EPS32)
    with pytest.raises(ValueError, match="norm 0"):
        kernels.normalize(np.zeros(3))


@pytest.mark.parametrize(("m", "n"), [(1, 1), (3, 1000), (257, 129), (1024, 1024)])
def test_matvec(m: int, n: int) -> None:
    rng = np.random.default_rng(6)
    a = rng.uniform(-1, 1, (m, n)).astype(np.float32)
    x = rng.uniform(-1, 1, n).astype(np.float32)
    got = kernels.matvec(a, x)
    a64, x64 = a.astype(np.float64), x.astype(np.float64)
    assert np.all(np.abs(got - a64 @ x64) <= EPS32 * (np.abs(a64) @ np.abs(x64)))


@pytest.mark.parametrize(("m", "k", "n"), [(1, 1, 1), (5, 3, 2), (33, 130, 257), (256, 256, 256)])
def test_matmul(m: int, k: int, n: int) -> None:
    rng = np.random.default_rng(7)
    a = rng.uniform(-1, 1, (m, k)).astype(np.float32)
    b = rng.uniform(-1, 1, (k, n)).astype(np.float32)
    got = kernels.matmul(a, b)
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    assert got.shape == (m, n)
    assert np.all(np.abs(got - a64 @ b64) <= k * EPS32 * (np.abs(a64) @ np.abs(b64)))


def diagonally_dominant(
    n: int, seed: int
) -> tuple[npt.NDArray[np.float32], npt.NDArray[np.float32]]:
    rng = np.random.default_rng(seed)
    a = rng.uniform(-1, 1, (n, n)).astype(np.float32)
    a[np.diag_indices(n)] = np.abs(a).sum(axis=1) + 1
    return a, rng.uniform(-1, 1, n).astype(np.float32)


def numpy_jacobi(
    a: npt.NDArray[np.float32], b: npt.NDArray[np.float32], steps: int
) -> npt.NDArray[np.float64]:
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    diagonal = np.diag(a64)
    x = np.zeros_like(b64)
    for _ in range(steps):
        x = (b64 - (a64 @ x - diagonal * x)) / diagonal
    return x


def test_jacobi_follows_the_reference_iteration() -> None:
    a, b = diagonally_dominant(64, 8)
    for steps in (0, 1, 5):
        np.testing.assert_allclose(
            kernels.jacobi(a, b, steps), numpy_jacobi(a, b, steps), atol=1e-6
        )


def test_jacobi_converges_and_stops_at_tolerance() -> None:
    a, b = diagonally_dominant(100, 9)
    x = kernels.jacobi(a, b, 10_000, tolerance=1e-7)
    np.testing.assert_allclose(x, np.linalg.solve(a.astype(np.float64), b), atol=1e-5)
    x_next, update = kernels.jacobi_step(a, b, x)
    assert update < 1e-6
    np.testing.assert_allclose(x_next, x, atol=1e-6)


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: kernels.add(np.ones(3), np.ones(4)), "add: x has 3 elements but y has 4"),
        (
            lambda: kernels.dot(np.ones((2, 2)), np.ones(4)),
            r"x must be a vector, got shape \(2, 2\)",
        ),
        (lambda: kernels.matvec(np.ones((2, 3)), np.ones(2)), "matvec: A is 2x3 but x has 2"),
        (lambda: kernels.matmul(np.ones((2, 3)), np.ones((2, 3))), "matmul: A is 2x3 but B is 2x3"),
        (lambda: kernels.jacobi(np.ones((2, 3)), np.ones(2), 1), "A must be square"),
        (lambda: kernels.jacobi(np.eye(2), np.ones(3), 1), "A is 2x2 but b has 3"),
        (lambda: kernels.jacobi(np.eye(2), np.ones(2), -1), "iterations must be at least 0"),
    ],
)
def test_bad_shapes_raise_value_error(call: object, message: str) -> None:
    assert callable(call)
    with pytest.raises(ValueError, match=message):
        call()


def test_inputs_are_converted_like_numpy() -> None:
    # Lists, float64, strided and read-only arrays are accepted; the result is float32.
    x = np.arange(20, dtype=np.float64)[::2]
    np.testing.assert_array_equal(kernels.add(x, [1.0] * 10), (x + 1).astype(np.float32))
    assert kernels.sum([1, 2, 3]) == 6
    frozen = np.arange(4, dtype=np.float32)
    frozen.setflags(write=False)  # read-only inputs are only read
    np.testing.assert_array_equal(kernels.scale(frozen, 2.0), frozen * 2)
