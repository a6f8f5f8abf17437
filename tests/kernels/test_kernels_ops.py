"""Every contract op at the awkward sizes, on numpy float32 and on Vulkan (lavapipe), against
gpulab.ops.reference under the tolerance policy: the cases `gpulab selftest` runs."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from gpulab.diagnostics.selftest import Case, cases, numpy32
from gpulab.kernels import Kernels
from gpulab.ops import reference, tolerance

CASES = list(cases())


def _id(case: Case) -> str:
    suffix = "-tol" if "tolerance" in case.params else ""
    return f"{case.op}{suffix}-{case.n}"


def _assert_close(case: Case, got: Any) -> None:
    arguments = case.inputs | case.params
    expected = getattr(reference, case.op)(**arguments)
    outcome = tolerance.compare(case.op, got, expected, case.inputs, case.params)
    assert outcome.ok, (case.op, case.n, outcome)


def test_the_cases_cover_every_op_at_every_size() -> None:
    ops = {"add", "scale", "saxpy", "sum", "min", "max", "dot", "l2_norm", "normalize"}
    ops |= {"matvec", "matmul", "jacobi"}
    assert {c.op for c in CASES} == ops
    assert {c.n for c in CASES} == {1, 31, 32, 33, 1023, 1025, 2**20 + 7}


@pytest.mark.parametrize("case", CASES, ids=_id)
def test_numpy_float32(case: Case) -> None:
    _assert_close(case, numpy32(case.op, **(case.inputs | case.params)))


def test_every_op_on_vulkan(kernels: Kernels) -> None:
    # One device for all cases (a device per case would dominate the run time).
    failures = []
    for case in CASES:
        arguments = case.inputs | case.params
        expected = getattr(reference, case.op)(**arguments)
        got = kernels.run(case.op, **arguments)
        outcome = tolerance.compare(case.op, got, expected, case.inputs, case.params)
        if not outcome.ok:
            failures.append((_id(case), outcome))
    assert not failures


@pytest.mark.parametrize("op", ["sum", "min", "max", "dot", "l2_norm", "matvec", "jacobi"])
def test_the_shared_memory_builds(device: Any, op: str) -> None:
    """The kernels for devices without subgroup arithmetic, forced on lavapipe."""
    with Kernels(device, subgroups=False) as shared:
        assert not shared.geometry.subgroup_arithmetic
        for case in (c for c in CASES if c.op == op and c.n in (33, 1025, 2**20 + 7)):
            _assert_close(case, shared.run(case.op, **(case.inputs | case.params)))


def test_scalar_results_are_numpy_float32(kernels: Kernels) -> None:
    result = kernels.run("sum", x=np.ones(5, dtype=np.float32))
    assert isinstance(result, np.float32)
    assert result == 5
