"""Reductions: exact on integer data across workgroups, passes and binding chunks; min/max
on one-signed data; NaN and infinity behaviour."""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt
import pytest
from gpulab.kernels import Kernels
from gpulab.vk import Device

# 4096 floats per workgroup in the first pass: these need 1, 2, many workgroups, and (beyond
# 4096 * 4096) a third pass.
SIZES = [1, 3, 4, 5, 4095, 4096, 4097, 70001, 4096 * 4096 + 13]


def _integers(n: int, seed: int = 0) -> npt.NDArray[np.float32]:
    """Small integers: every partial sum is exact in float32 (|sum| < 2**24)."""
    return np.random.default_rng(seed).integers(-3, 4, n).astype(np.float32)


@pytest.mark.parametrize("n", SIZES)
def test_integer_sums_and_dots_are_exact(kernels: Kernels, n: int) -> None:
    x, y = _integers(n, 1), _integers(n, 2)
    assert kernels.run("sum", x=x) == np.sum(x, dtype=np.float64)
    assert kernels.run("dot", x=x, y=y) == np.dot(x.astype(np.float64), y.astype(np.float64))
    assert kernels.run("min", x=x) == x.min()
    assert kernels.run("max", x=x) == x.max()


@pytest.mark.parametrize("n", [1, 5, 1023, 70001])
def test_min_and_max_on_one_signed_data(kernels: Kernels, n: int) -> None:
    rng = np.random.default_rng(n)
    negative = -rng.uniform(1.0, 2.0, n).astype(np.float32)
    positive = rng.uniform(1.0, 2.0, n).astype(np.float32)
    assert kernels.run("max", x=negative) == negative.max()
    assert kernels.run("min", x=negative) == negative.min()
    assert kernels.run("min", x=positive) == positive.min()
    assert kernels.run("max", x=positive) == positive.max()


def test_extremes_at_every_position(kernels: Kernels) -> None:
    """The extreme found whether it sits in the vec4 body or the n % 4 tail."""
    n = 4097
    for position in (0, 1, 2, 3, 2048, n - 2, n - 1):
        x = np.zeros(n, dtype=np.float32)
        x[position] = 7.0
        assert kernels.run("max", x=x) == 7.0
        x[position] = -7.0
        assert kernels.run("min", x=x) == -7.0


@pytest.mark.parametrize("position", [0, 3, 4095, 70000])
@pytest.mark.parametrize("op", ["min", "max", "sum", "dot", "l2_norm"])
def test_nan_propagates_like_numpy(kernels: Kernels, op: str, position: int) -> None:
    x = np.linspace(-1.0, 1.0, 70001, dtype=np.float32)
    x[position] = np.nan
    arguments = {"x": x, "y": np.ones_like(x)} if op == "dot" else {"x": x}
    assert np.isnan(kernels.run(op, **arguments))


@pytest.mark.parametrize("nan_bits", [0x7FC00000, 0xFFC00000, 0x7F800001, 0xFFFFFFFF])
@pytest.mark.parametrize("op", ["min", "max"])
@pytest.mark.parametrize("sign", [-1.0, 1.0])
def test_any_nan_wins_min_and_max(kernels: Kernels, op: str, sign: float, nan_bits: int) -> None:
    """Either sign bit, quiet or signalling, beside infinities of one-signed data."""
    x = sign * np.linspace(1.0, 2.0, 70001, dtype=np.float32)
    x[500] = sign * np.inf
    x[69999:70000] = np.array([nan_bits], dtype=np.uint32).view(np.float32)
    assert np.isnan(kernels.run(op, x=x))


def test_infinities(kernels: Kernels) -> None:
    x = np.zeros(1025, dtype=np.float32)
    x[100] = np.inf
    assert kernels.run("max", x=x) == np.inf
    assert kernels.run("sum", x=x) == np.inf
    x[900] = -np.inf
    assert kernels.run("min", x=x) == -np.inf
    assert np.isnan(kernels.run("sum", x=x))


def test_an_empty_min_is_an_error(kernels: Kernels) -> None:
    with pytest.raises(ValueError, match="min of an empty vector"):
        kernels.run("min", x=np.zeros(0, dtype=np.float32))
    assert kernels.run("sum", x=np.zeros(0, dtype=np.float32)) == 0


@pytest.mark.parametrize("op", ["sum", "max", "dot", "add", "saxpy", "normalize"])
def test_inputs_split_over_small_bindings(device: Device, op: str) -> None:
    """Many binding chunks (a 64 KiB range here): same results as one binding."""
    x, y = _integers(100_003, 3), _integers(100_003, 4)
    arguments: dict[str, Any] = {"x": x}
    if op in ("dot", "add", "saxpy"):
        arguments["y"] = y
    if op == "saxpy":
        arguments["a"] = 2.0
    with Kernels(device, max_binding_bytes=65536) as chunked, Kernels(device) as whole:
        assert chunked.elements_per_binding() == 16384
        np.testing.assert_array_equal(chunked.run(op, **arguments), whole.run(op, **arguments))


def test_a_vector_beyond_lavapipes_binding_range(kernels: Kernels) -> None:
    """128 MiB + 20 bytes: split into two bindings by the device's own limit."""
    n = kernels.elements_per_binding() + 5
    x = np.ones(n, dtype=np.float32)
    x[::2] = -1.0  # partial sums stay small, so the total is exact
    x[-1] = 5.0
    assert kernels.run("sum", x=x) == np.sum(x, dtype=np.float64)
    assert kernels.run("max", x=x) == 5.0
