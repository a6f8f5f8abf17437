"""The tolerance policy: bounds that scale with the terms, exact extremes, NaN agreement."""

from __future__ import annotations

import numpy as np
import pytest
from gpulab.ops import reference, tolerance


def test_sum_bound_is_relative_to_the_absolute_terms() -> None:
    x = np.array([1e6, -1e6, 1.0], dtype=np.float32)
    allowed = float(tolerance.bound("sum", {"x": x}, reference.sum(x)))
    # The cancelling terms allow an error far larger than eps * |result|.
    assert allowed > 1e6 * tolerance.EPS32
    assert allowed < 1e6 * tolerance.EPS32 * 2 * (tolerance.depth(3) + 2)


def test_a_wrong_sum_fails_and_a_rounded_one_passes() -> None:
    x = np.random.default_rng(0).uniform(-1, 1, 10_000).astype(np.float32)
    expected = reference.sum(x)
    assert tolerance.compare("sum", np.sum(x), expected, {"x": x}).ok
    # The worst-case bound here is (depth + 1) * eps * sum|x| ~ 0.03: a 0.1 error is a bug.
    assert not tolerance.compare("sum", expected + 0.1, expected, {"x": x}).ok


def test_a_bound_computed_once_serves_every_result_of_the_inputs() -> None:
    rng = np.random.default_rng(1)
    a, b = (rng.standard_normal((40, 40)).astype(np.float32) for _ in range(2))
    inputs = {"A": a, "B": b}
    expected = reference.matmul(a, b)
    allowed = tolerance.bound("matmul", inputs, expected)
    for got in (a @ b, expected + 1.0):
        given = tolerance.compare("matmul", got, expected, inputs, allowed=allowed)
        assert given == tolerance.compare("matmul", got, expected, inputs)
    assert tolerance.compare("matmul", a @ b, expected, inputs, allowed=allowed).ok
    assert not tolerance.compare("matmul", expected + 1.0, expected, inputs, allowed=allowed).ok


def test_extremes_are_exact() -> None:
    x = np.array([1.0, 2.0], dtype=np.float32)
    assert tolerance.compare("max", np.float32(2.0), np.float32(2.0), {"x": x}).ok
    assert not tolerance.compare("max", np.nextafter(np.float32(2), 3), 2.0, {"x": x}).ok


@pytest.mark.parametrize(
    ("got", "expected", "ok"),
    [
        (np.nan, np.nan, True),
        (1.0, np.nan, False),
        (np.nan, 1.0, False),
        (np.inf, np.inf, True),
        (-np.inf, np.inf, False),
    ],
)
def test_specials_must_agree(got: float, expected: float, ok: bool) -> None:
    x = np.array([1.0], dtype=np.float32)
    assert tolerance.compare("sum", np.float32(got), np.float32(expected), {"x": x}).ok is ok


def test_elementwise_allows_a_few_ulps_per_element() -> None:
    x = np.array([1.0, 1e-3], dtype=np.float32)
    y = np.array([-1.0, 1e-3], dtype=np.float32)
    expected = reference.add(x, y)
    off = expected + np.array([3e-7, 0.0], dtype=np.float32)
    assert tolerance.compare("add", off, expected, {"x": x, "y": y}).ok
    assert not tolerance.compare("add", expected + 1e-5, expected, {"x": x, "y": y}).ok


def test_shape_mismatch_fails() -> None:
    x = np.ones(3, dtype=np.float32)
    assert not tolerance.compare("add", x[:2], x, {"x": x, "y": x}).ok


def test_unknown_op_has_no_policy() -> None:
    with pytest.raises(ValueError, match="no tolerance policy"):
        tolerance.bound("fft", {}, 0.0)


def test_a_subnormal_flushed_to_zero_is_within_tolerance() -> None:
    # NVIDIA's Vulkan driver flushes subnormals (found by the fusion fuzz test on the H100):
    # x + x of a subnormal x may come back 0; an error of a normal number may not.
    x = np.array([0.0, 1.1476914682513117e-40], dtype=np.float32)
    ref = x.astype(np.float64) * 2
    assert tolerance.compare("add", np.zeros(2, np.float32), ref, {"x": x, "y": x}).ok
    assert not tolerance.compare(
        "add", np.array([0.0, 1e-37], np.float32), ref, {"x": x, "y": x}
    ).ok
