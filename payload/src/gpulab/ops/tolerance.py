"""The tolerance policy for comparing float32 results with the reference (gpulab.ops.reference).

The reference accumulates in float64 and rounds once, so the error to allow is the error of
float32 arithmetic on our side, bounded the way numerical analysis bounds it (Higham,
"Accuracy and Stability of Numerical Algorithms", ch. 3-4), not by a flat epsilon:

- Sums and dots: |got - ref| <= (depth(n) + 1) * eps * sum(|terms|) + 2 * eps * |ref|
  (the + 1 covers the rounding of each product of a dot).
  A blocked/tree summation passes each term through at most depth(n) roundings; `depth(n)` is
  ceil(log2 n) plus SEQUENTIAL_DEPTH for the stretches summed one after the other (per
  invocation on the GPU, per block in SIMD CPU code). The bound is relative to the sum of the
  absolute terms: a sum that cancels to ~0 is allowed the error its terms imply.
- l2_norm: the sum of squares has no cancellation, and the square root halves its relative
  error: |got - ref| <= ((depth(n) + 1) / 2 + 2) * eps * ref.
- Elementwise ops (add, scale, saxpy): ELEMENTWISE_ULPS * eps times the sum of the absolute
  terms of each element (so a fused multiply-add, or cancellation in a*x + y, is covered).
- normalize: each element carries the norm's relative bound plus ELEMENTWISE_ULPS * eps.
- matvec, matmul: every output is a dot of length k, bounded as above with |A| @ |x|.
- min, max: exact. They must return one of the inputs; NaN exactly when the input holds one.
- jacobi: each step is a dot per row, so its rounding is bounded like a row of matvec, scaled
  by 1 / |A_ii|; the iteration contracts earlier errors by rho = max_i sum_j!=i |A_ij| / |A_ii|,
  so the accumulated bound is that step bound times min(iterations, 1 / (1 - rho)).

Everywhere: NaN must meet NaN, and an infinity the same infinity.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

EPS32 = float(np.finfo(np.float32).eps)
"""2**-23: the spacing of float32 numbers at 1."""
SEQUENTIAL_DEPTH = 32
ELEMENTWISE_ULPS = 4
_TINY = float(np.finfo(np.float32).tiny)

Float64Array = npt.NDArray[np.float64]


def depth(n: int) -> int:
    """The most roundings a term passes through in a float32 sum of n terms (see above)."""
    if n <= 1:
        return 0
    return min(n - 1, math.ceil(math.log2(n)) + SEQUENTIAL_DEPTH)


def _wide(value: Any) -> Float64Array:
    return np.asarray(value, dtype=np.float32).astype(np.float64)


def _dot_bound(k: int, abs_products: Float64Array, ref: Float64Array) -> Float64Array:
    result: Float64Array = (depth(k) + 1) * EPS32 * abs_products + 2 * EPS32 * np.abs(ref)
    return result


def _jacobi_bound(inputs: Mapping[str, Any], ref: Float64Array, iterations: int) -> Float64Array:
    a, b = _wide(inputs["A"]), _wide(inputs["b"])
    n = b.size
    diagonal = np.abs(np.diag(a))
    off = np.abs(a) - np.diag(diagonal)
    with np.errstate(divide="ignore", invalid="ignore"):
        step = (depth(n) + 3) * EPS32 * (np.abs(b) + off @ np.abs(ref)) / diagonal
        rho = float(np.max(off.sum(axis=1) / diagonal)) if n else 0.0
    growth = float(iterations) if rho >= 1 else min(float(iterations), 1 / (1 - rho))
    result: Float64Array = step * max(growth, 1.0) + 2 * EPS32 * np.abs(ref)
    return result


def bound(
    op: str, inputs: Mapping[str, Any], ref: Any, params: Mapping[str, Any] | None = None
) -> Float64Array:
    """The allowed |got - ref| of each element of `op`'s result (a 0-d array for scalars)."""
    expected = _wide(ref)
    options = dict(params or {})
    if op in ("min", "max"):
        exact: Float64Array = np.zeros(expected.shape)
        return exact
    if op == "add":
        terms = np.abs(_wide(inputs["x"])) + np.abs(_wide(inputs["y"]))
        return ELEMENTWISE_ULPS * EPS32 * terms
    if op == "scale":
        return ELEMENTWISE_ULPS * EPS32 * np.abs(_wide(inputs["a"]) * _wide(inputs["x"]))
    if op == "saxpy":
        scaled = np.abs(_wide(inputs["a"]) * _wide(inputs["x"]))
        return ELEMENTWISE_ULPS * EPS32 * (scaled + np.abs(_wide(inputs["y"])))
    if op == "sum":
        x = _wide(inputs["x"])
        return _dot_bound(x.size, np.asarray(np.sum(np.abs(x))), expected)
    if op == "dot":
        products = np.abs(_wide(inputs["x"]) * _wide(inputs["y"]))
        return _dot_bound(products.size, np.asarray(np.sum(products)), expected)
    if op == "l2_norm":
        n = _wide(inputs["x"]).size
        return ((depth(n) + 1) / 2 + 2) * EPS32 * np.abs(expected)
    if op == "normalize":
        n = _wide(inputs["x"]).size
        relative = ((depth(n) + 1) / 2 + 2 + ELEMENTWISE_ULPS) * EPS32
        return relative * np.abs(expected)
    if op == "matvec":
        a, x = _wide(inputs["A"]), _wide(inputs["x"])
        return _dot_bound(a.shape[1], np.abs(a) @ np.abs(x), expected)
    if op == "matmul":
        a, b = _wide(inputs["A"]), _wide(inputs["B"])
        return _dot_bound(a.shape[1], np.abs(a) @ np.abs(b), expected)
    if op == "jacobi":
        return _jacobi_bound(inputs, expected, int(options.get("iterations", 0)))
    raise ValueError(f"no tolerance policy for op {op!r}")


@dataclass(frozen=True)
class Comparison:
    """The outcome of comparing a result with the reference under the policy."""

    ok: bool
    max_abs_err: float
    max_rel_err: float
    """max |got - ref| / |ref| over the elements (|ref| floored at float32's smallest normal)."""
    bound_ratio: float
    """max |got - ref| / bound: at most 1 when ok (0 when both are 0)."""


def compare(
    op: str,
    got: Any,
    ref: Any,
    inputs: Mapping[str, Any],
    params: Mapping[str, Any] | None = None,
) -> Comparison:
    """Compare `got` with `ref` under the policy for `op`."""
    result, expected = _wide(got), _wide(ref)
    if result.shape != expected.shape:
        return Comparison(False, math.inf, math.inf, math.inf)
    allowed = bound(op, inputs, expected, params)
    special = ~np.isfinite(expected) | ~np.isfinite(result)
    specials_agree = bool(
        np.all(
            (np.isnan(expected) == np.isnan(result))
            & np.where(np.isinf(expected) | np.isinf(result), expected == result, True)
        )
    )
    finite = ~special
    with np.errstate(invalid="ignore"):
        error = np.where(finite, np.abs(result - expected), 0.0)
        allowed = np.where(finite, allowed, 0.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        relative = np.where(finite, error / np.maximum(np.abs(expected), _TINY), 0.0)
        ratio = np.where(error == 0, 0.0, error / allowed)
    ok = specials_agree and bool(np.all(error <= allowed))
    return Comparison(
        ok=ok,
        max_abs_err=float(np.max(error, initial=0.0)),
        max_rel_err=float(np.max(relative, initial=0.0)),
        bound_ratio=float(np.max(ratio, initial=0.0)),
    )
