"""The numpy reference agrees with the native kernels and with float64 numpy."""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt
import pytest
from gpulab.native import NativeUnavailable, kernels
from gpulab.ops import (
    OPS,
    Kind,
    NumericalError,
    ShapeError,
    kind_of_shape,
    reference,
    result_shape,
)

RTOL = 1e-5  # float32 results of float64-accumulated references


def _system(n: int) -> tuple[npt.NDArray[np.float32], npt.NDArray[np.float32]]:
    rng = np.random.default_rng(3)
    a = rng.uniform(-1, 1, (n, n)).astype(np.float32)
    a += np.diag(np.abs(a).sum(axis=1) + 1).astype(np.float32)
    return a, rng.uniform(-1, 1, n).astype(np.float32)


def test_every_op_has_a_reference() -> None:
    for name in OPS:
        assert callable(getattr(reference, name)), name


def test_jacobi_converges_to_the_solution() -> None:
    a, b = _system(16)
    x = reference.jacobi(a, b, iterations=200)
    np.testing.assert_allclose(x, np.linalg.solve(a.astype(np.float64), b), rtol=1e-4, atol=1e-6)


def test_jacobi_tolerance_stops_early() -> None:
    a, b = _system(16)
    early = reference.jacobi(a, b, iterations=1000, tolerance=1e-2)
    assert not np.allclose(early, reference.jacobi(a, b, iterations=1000))


def test_normalize_of_zero_is_an_error() -> None:
    with pytest.raises(NumericalError, match="norm 0"):
        reference.normalize(np.zeros(4, np.float32))


def test_shape_rules_give_the_result_kind() -> None:
    shapes = {Kind.SCALAR: (), Kind.VECTOR: (4,), Kind.MATRIX: (4, 4)}
    for spec in OPS.values():
        result = spec.shape({name: shapes[kind] for name, kind in spec.inputs})
        assert kind_of_shape(result) is spec.result, spec.name


def test_shape_rule_names_the_input() -> None:
    with pytest.raises(ShapeError) as raised:
        result_shape("matvec", {"A": (3, 4), "x": (3,)})
    assert raised.value.input == "x"
    with pytest.raises(ShapeError) as raised:
        result_shape("jacobi", {"A": (3, 4), "b": (3,)})
    assert raised.value.input == "A"
    assert result_shape("matmul", {"A": (2, 3), "B": (3, 5)}) == (2, 5)


def test_reference_matches_native() -> None:
    try:
        kernels.library()
    except NativeUnavailable:
        pytest.skip("native library not built")
    rng = np.random.default_rng(1)
    x, y = (rng.uniform(-1, 1, 1000).astype(np.float32) for _ in range(2))
    m, _ = _system(8)
    a, b = _system(40)
    cases: dict[str, dict[str, Any]] = {
        "add": {"x": x, "y": y},
        "scale": {"x": x, "a": 2.5},
        "saxpy": {"a": -1.5, "x": x, "y": y},
        "sum": {"x": x},
        "max": {"x": x},
        "min": {"x": x},
        "dot": {"x": x, "y": y},
        "l2_norm": {"x": x},
        "normalize": {"x": x},
        "matvec": {"A": m, "x": x[:8]},
        "matmul": {"A": m, "B": m},
        "jacobi": {"A": a, "b": b},
    }
    assert set(cases) == set(OPS)
    for op, inputs in cases.items():
        params = {"iterations": 30} if op == "jacobi" else {}
        expected = reference.evaluate(op, inputs, params)
        got = getattr(kernels, op)(**inputs, **params)
        np.testing.assert_allclose(got, expected, rtol=RTOL, atol=1e-6, err_msg=op)
