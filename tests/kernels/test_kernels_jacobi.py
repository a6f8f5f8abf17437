"""jacobi's vec4 and scalar row paths, in both builds: the same products summed (the
diagonal's term left out wherever it falls in its vec4), against the float64 reference."""

from __future__ import annotations

import numpy as np
import pytest
from gpulab.kernels import Kernels
from gpulab.ops import reference, tolerance
from gpulab.vk import Device


@pytest.mark.parametrize("subgroups", [None, False], ids=["subgroup", "shared"])
@pytest.mark.parametrize("n", [64, 66])  # 64: vec4 loads; 66: scalar
def test_jacobi_rows_in_vec4_and_scalar(device: Device, subgroups: bool | None, n: int) -> None:
    rng = np.random.default_rng(n)
    a = rng.uniform(-1, 1, (n, n)).astype(np.float32)
    a[np.diag_indices(n)] = np.abs(a).sum(axis=1) + 1  # diagonally dominant: converges
    system = {"A": a, "b": rng.uniform(-1, 1, n).astype(np.float32)}
    params = {"iterations": 12}
    with Kernels(device, subgroups=subgroups) as kernels:
        got = kernels.run("jacobi", **system, **params)
    expected = reference.jacobi(**system, **params)
    outcome = tolerance.compare("jacobi", got, expected, system, params)
    assert outcome.ok, outcome
