"""Every example runs as is on every backend here, with results matching the numpy reference."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest
from gpulab import Result, Runner, load_graph, run_graph
from gpulab.graph import GraphInvalid
from graph_helpers import EXAMPLES, cli, needs_vulkan, subprocess_cli

# Float32 results from differently ordered float32/float64 accumulations: agreement to 1e-5 of
# the largest magnitude of each output (`--compare` uses the same normwise measure).
RTOL = 1e-5
EXAMPLE_FILES = sorted(EXAMPLES.glob("*.json"))


def assert_same_outputs(got: Result, expected: Result) -> None:
    assert got.outputs.keys() == expected.outputs.keys()
    for name, value in got.outputs.items():
        reference = expected.outputs[name]
        assert value.shape == reference.shape, name
        scale = max(float(np.max(np.abs(reference))), 1e-30)
        np.testing.assert_allclose(value, reference, rtol=0, atol=RTOL * scale, err_msg=name)


def test_there_are_examples() -> None:
    names = {path.stem for path in EXAMPLE_FILES}
    assert {"saxpy_norm", "branching_normalize", "jacobi", "matrix_ops", "user_kernels"} <= names


@pytest.mark.parametrize("path", EXAMPLE_FILES, ids=lambda p: p.stem)
@pytest.mark.parametrize("backend", ["native", pytest.param("vulkan", marks=needs_vulkan)])
def test_example_matches_cpu(path: Path, backend: str) -> None:
    graph = load_graph(path)
    assert graph.warnings == ()
    expected = run_graph(graph, "cpu")
    got = run_graph(graph, backend)
    assert got.backend == backend
    assert_same_outputs(got, expected)


def test_jacobi_example_solves_its_system() -> None:
    result = run_graph(load_graph(EXAMPLES / "jacobi.json"), "cpu")
    b = np.array([6.0, 25.0, -11.0, 15.0], dtype=np.float32)
    np.testing.assert_allclose(result.outputs["Ax"], b, rtol=1e-5)
    np.testing.assert_allclose(result.outputs["x"], [1.0, 2.0, -1.0, 1.0], rtol=1e-5)


def test_user_kernels_example_chains_two_kernels() -> None:
    """Leaky ReLU (alpha a push constant) then softplus, each through its numpy reference."""
    graph = load_graph(EXAMPLES / "user_kernels.json")
    assert [node.op for node in graph.nodes.values()] == ["kernel", "kernel", "sum", "max"]
    x = np.linspace(-4.0, 4.0, 4096, dtype=np.float32)
    leaky = np.where(x > 0, x, np.float32(0.1) * x)
    result = run_graph(graph, "cpu")
    np.testing.assert_allclose(result.outputs["leaky"], leaky, rtol=1e-6)
    np.testing.assert_allclose(result.outputs["soft"], np.log1p(np.exp(leaky)), rtol=1e-5)


def test_cli_native_agrees_with_cpu(tmp_path: Path) -> None:
    documents = {}
    for backend in ("cpu", "native"):
        out = tmp_path / f"{backend}.json"
        path = str(EXAMPLES / "saxpy_norm.json")
        done = subprocess_cli("run", path, "--backend", backend, "--output", str(out))
        assert done.returncode == 0, done.stderr
        documents[backend] = json.loads(out.read_text())
    cpu, native = documents["cpu"], documents["native"]
    assert native["backend"] == "native"
    assert [n["backend"] for n in native["nodes"]] == ["native", "native", "cpu"]
    assert native["transfers"] == [{"value": "s", "from": "native", "to": "cpu"}]
    assert native["outputs"]["s"]["summary"] == pytest.approx(cpu["outputs"]["s"]["summary"])
    assert "data" not in native["outputs"]["s"]  # 2^20 elements: summary only
    assert native["outputs"]["n"]["value"] == pytest.approx(cpu["outputs"]["n"]["value"], rel=RTOL)


def test_result_json_has_the_contract_keys(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("SLURM_JOB_ID", "42")
    monkeypatch.setenv("SLURM_JOB_NODELIST", "worker[1-2]")
    code, out, err = cli(
        capsys, "run", str(EXAMPLES / "matrix_ops.json"), "--backend", "cpu", "--compare", "native"
    )
    assert code == 0, err
    document = json.loads(out)
    assert document.keys() >= {
        "version",
        "graph",
        "backend",
        "device",
        "outputs",
        "nodes",
        "timing",
        "host",
    }
    assert document["version"] == 1
    assert document["graph"] == "matrix-ops"
    assert document["device"].keys() >= {"name", "type", "driver"}
    assert document["slurm"] == {"job_id": "42", "nodelist": "worker[1-2]"}
    assert document["outputs"]["total"]["type"] == "scalar"
    matrix = document["outputs"]["C"]
    assert matrix["shape"] == [64, 32]
    assert len(matrix["data"]) == 64 and len(matrix["data"][0]) == 32
    assert [n["id"] for n in document["nodes"]] == ["C", "Cv", "total", "largest", "halved"]
    assert all(n["time_ms"] >= 0 for n in document["nodes"])
    assert document["compare"]["ok"] is True
    assert document["gpulab_version"]


def test_full_includes_large_outputs(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = cli(
        capsys, "run", str(EXAMPLES / "saxpy_norm.json"), "--backend", "cpu", "--full"
    )
    assert code == 0
    assert len(json.loads(out)["outputs"]["s"]["data"]) == 1 << 20


def test_python_api_runs_a_dict_graph_twice() -> None:
    graph = load_graph(
        {
            "version": 1,
            "inputs": {"x": {"type": "vector", "data": [3.0, 4.0]}},
            "nodes": [{"id": "n", "op": "l2_norm", "inputs": {"x": "x"}}],
            "outputs": ["n"],
        }
    )
    with Runner("native") as runner:
        first, second = runner.run(graph), runner.run(graph)
    assert float(first.outputs["n"]) == float(second.outputs["n"]) == 5.0
    assert first.to_json()["outputs"]["n"] == {"type": "scalar", "value": 5.0}
    with pytest.raises(GraphInvalid):
        load_graph({"version": 1})


def test_zero_norm_is_a_runtime_failure(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    graph = {
        "version": 1,
        "inputs": {"z": {"type": "vector", "fill": {"n": 8, "value": 0.0}}},
        "nodes": [{"id": "u", "op": "normalize", "inputs": {"x": "z"}}],
        "outputs": ["u"],
    }
    path = tmp_path / "zero.json"
    path.write_text(json.dumps(graph))
    for backend in ("cpu", "native"):
        code, out, err = cli(capsys, "run", str(path), "--backend", backend)
        assert (code, out) == (4, "")
        assert err == "gpulab: numerical failure: normalize: x has norm 0\n"


def test_missing_native_library_is_exit_3(tmp_path: Path) -> None:
    env = dict(os.environ, GPULAB_NATIVE_LIB_DIR=str(tmp_path))
    done = subprocess_cli("run", str(EXAMPLES / "jacobi.json"), "--backend", "native", env=env)
    assert done.returncode == 3
    assert done.stderr.startswith("gpulab: the native backend is unavailable:")
    assert "Traceback" not in done.stderr
