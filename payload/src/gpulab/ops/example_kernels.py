"""numpy references of the example graph's own kernels (examples/user_kernels.json names them
as `kernel.reference`): what its leaky_relu.comp and softplus.comp compute, in float32 as the
shaders do, so the graph runs on cpu and native and `--compare cpu` checks the Vulkan run.

In the package (not beside the graph) so that every install imports them, as a worker's
validation runs the examples of its own gpulab."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float32]


def leaky_relu(x: npt.ArrayLike, alpha: float) -> FloatArray:
    """x where x > 0, else alpha * x (leaky_relu.comp)."""
    values = np.asarray(x, dtype=np.float32)
    result: FloatArray = np.where(values > 0, values, np.float32(alpha) * values)
    return result.astype(np.float32)


def softplus(x: npt.ArrayLike) -> FloatArray:
    """log(1 + exp(x)) as max(x, 0) + log(1 + exp(-|x|)), which no x overflows (softplus.comp)."""
    values = np.asarray(x, dtype=np.float32)
    one = np.float32(1.0)
    result: FloatArray = np.maximum(values, np.float32(0.0)) + np.log(one + np.exp(-np.abs(values)))
    return result.astype(np.float32)
