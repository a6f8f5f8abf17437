"""The arithmetic of the tolerance policy (gpulab.ops.tolerance), what each op's rule is made
of: float32's epsilon, the rounding depth of a sum, the bound of a dot product."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import numpy.typing as npt

EPS32 = float(np.finfo(np.float32).eps)
"""2**-23: the spacing of float32 numbers at 1."""
SEQUENTIAL_DEPTH = 32
ELEMENTWISE_ULPS = 4

Float64Array = npt.NDArray[np.float64]


def depth(n: int) -> int:
    """The most roundings a term passes through in a float32 sum of n terms."""
    if n <= 1:
        return 0
    return min(n - 1, math.ceil(math.log2(n)) + SEQUENTIAL_DEPTH)


def wide(value: Any) -> Float64Array:
    """`value` as float32, widened to float64."""
    return np.asarray(value, dtype=np.float32).astype(np.float64)


def dot_bound(k: int, abs_products: Any, ref: Float64Array) -> Float64Array:
    """The bound of dots of length k, given the sum of their absolute products."""
    result: Float64Array = (depth(k) + 1) * EPS32 * abs_products + 2 * EPS32 * np.abs(ref)
    return result


def norm_relative(n: int) -> float:
    """The relative bound of the l2 norm of n elements."""
    return ((depth(n) + 1) / 2 + 2) * EPS32


def elementwise(terms: Any) -> Float64Array:
    """The bound of an elementwise op whose terms have these absolute values."""
    result: Float64Array = ELEMENTWISE_ULPS * EPS32 * terms
    return result
