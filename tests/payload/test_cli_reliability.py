"""The payload CLI under faults an admin meets: a missing device, a full disk, a wrong path."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.graph.graph_helpers import cli, small_graph, write_graph


def test_a_device_that_does_not_exist_is_exit_3_under_auto(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Was: auto quietly ran on cpu with exit 0, though the contract says 3.
    path = write_graph(tmp_path, small_graph())
    code, out, err = cli(capsys, "run", str(path), "--device", "99")
    assert (code, out) == (3, "")
    assert err.startswith("gpulab: --device 99: there is no such Vulkan device here (found: 0: ")
    assert len(err.splitlines()) == 1


@pytest.mark.parametrize(
    ("values", "found"),
    [
        (np.array([1.0, np.nan], dtype=np.float32), "element [1] is nan"),
        (np.array([[1.0, 2.0], [np.inf, 0.0]], dtype=np.float32), "element [1, 0] is inf"),
        (np.array([1.0, 1e300]), "element [1] is 1e+300"),
    ],
)
def test_npy_values_that_are_no_finite_float32_are_refused_by_validate(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], values: Any, found: str
) -> None:
    # Was: accepted; the run turned them into nulls or garbage with exit 0.
    np.save(tmp_path / "v.npy", values)
    kind = "vector" if values.ndim == 1 else "matrix"
    document = {
        "version": 1,
        "inputs": {"v": {"type": kind, "file": "v.npy"}},
        "nodes": [{"id": "s", "op": "scale", "inputs": {"x": "v", "a": 2.0}}],
        "outputs": ["s"],
    }
    if kind == "matrix":
        document["nodes"] = [{"id": "s", "op": "matmul", "inputs": {"A": "v", "B": "v"}}]
    path = write_graph(tmp_path, document)
    code, out, err = cli(capsys, "validate", str(path))
    assert (code, out) == (2, "")
    assert err.startswith(f"gpulab: {path}: inputs.v.file: v.npy: {found}; values must be finite")
    assert len(err.splitlines()) == 1


def test_finite_npy_values_of_other_types_are_cast_to_float32(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    np.save(tmp_path / "v.npy", np.array([1, 2, 3], dtype=np.int64))
    document = {
        "version": 1,
        "inputs": {"v": {"type": "vector", "file": "v.npy"}},
        "nodes": [{"id": "s", "op": "sum", "inputs": {"x": "v"}}],
        "outputs": ["s"],
    }
    code, out, err = cli(capsys, "run", str(write_graph(tmp_path, document)), "--backend", "cpu")
    assert code == 0, err
    assert json.loads(out)["outputs"]["s"]["value"] == 6.0


def test_random_low_above_high_fails_validate(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Was: accepted by validate, then failed only when run.
    document = small_graph()
    document["inputs"]["x"] = {"type": "vector", "random": {"n": 3, "low": 2.0, "high": 1.0}}
    path = write_graph(tmp_path, document)
    code, out, err = cli(capsys, "validate", str(path))
    assert (code, out) == (2, "")
    assert err == f"gpulab: {path}: inputs.x.random.high: must be at least low (2), got 1\n"


@pytest.mark.parametrize("backend", ["cpu", "native", "vulkan"])
def test_a_diverging_jacobi_is_exit_4_naming_the_node(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], backend: str
) -> None:
    # Was: nulls in the result with exit 0 (a zero-vector normalize was already exit 4).
    document = {
        "version": 1,
        "inputs": {
            "A": {"type": "matrix", "data": [[1.0, 1e30], [1e30, 1.0]]},
            "b": {"type": "vector", "data": [1.0, 1.0]},
        },
        "nodes": [
            {"id": "j", "op": "jacobi", "inputs": {"A": "A", "b": "b"}, "params": {"iterations": 50}}
        ],
        "outputs": ["j"],
    }
    path = write_graph(tmp_path, document)
    code, out, err = cli(capsys, "run", str(path), "--backend", backend)
    assert (code, out) == (4, "")
    assert err.startswith("gpulab: numerical failure: node 'j' (jacobi): ")
    assert len(err.splitlines()) == 1
