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

Everywhere: NaN must meet NaN, and an infinity the same infinity; and an error below float32's
smallest normal number is allowed, since a device may flush subnormal inputs and results to
zero (Vulkan leaves it to the implementation unless a shader asks for denormPreserve:
NVIDIA's flushes, lavapipe keeps them). Each op's rule is part of
its entry (gpulab.ops.entries); gpulab.ops.bounds has the arithmetic they share.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from gpulab.ops import bounds
from gpulab.ops.bounds import (
    ELEMENTWISE_ULPS,
    EPS32,
    SEQUENTIAL_DEPTH,
    Float64Array,
    depth,
)
from gpulab.ops.registry import find

__all__ = [
    "ELEMENTWISE_ULPS",
    "EPS32",
    "SEQUENTIAL_DEPTH",
    "Comparison",
    "bound",
    "compare",
    "depth",
]

_TINY = float(np.finfo(np.float32).tiny)
_wide = bounds.wide


def bound(
    op: str, inputs: Mapping[str, Any], ref: Any, params: Mapping[str, Any] | None = None
) -> Float64Array:
    """The allowed |got - ref| of each element of `op`'s result (a 0-d array for scalars):
    the rule of the op's entry."""
    entry = find(op)
    if entry is None:
        raise ValueError(f"no tolerance policy for op {op!r}")
    allowed: Float64Array = np.asarray(
        entry.tolerance(bounds, inputs, _wide(ref), dict(params or {}))
    )
    return allowed


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
    *,
    allowed: Float64Array | None = None,
) -> Comparison:
    """Compare `got` with `ref` under the policy for `op`; `allowed`: bound(op, inputs, ref,
    params) already computed, for several results of the same inputs."""
    result, expected = _wide(got), _wide(ref)
    if result.shape != expected.shape:
        return Comparison(False, math.inf, math.inf, math.inf)
    if allowed is None:
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
        allowed = np.where(finite, np.maximum(allowed, _TINY), 0.0)
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
