"""A jacobi node's `solver` entry (steps, convergence, last update) and its warning, the same
on every backend; a singular system is exit 4 on every backend."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from gpulab import Runner, load_graph
from gpulab.ops import reference
from gpulab.ops.solver import SolverReport
from graph_helpers import cli, has_vulkan, write_graph

BACKENDS = [
    "cpu",
    "native",
    pytest.param("vulkan", marks=pytest.mark.skipif(not has_vulkan(), reason="no Vulkan device")),
]
SYSTEM = [[4.0, 1.0, 0.5, 0.1], [1.0, 5.0, 1.0, 0.2], [0.5, 1.0, 6.0, 1.0], [0.3, 0.2, 1.0, 3.0]]
RIGHT = [1.0, 2.0, 3.0, 4.0]


def jacobi_graph(matrix: list[list[float]], nodes: dict[str, dict[str, Any]]) -> dict[str, Any]:
    return {
        "version": 1,
        "inputs": {
            "A": {"type": "matrix", "data": matrix},
            "b": {"type": "vector", "data": RIGHT[: len(matrix)]},
        },
        "nodes": [
            {"id": name, "op": "jacobi", "inputs": {"A": "A", "b": "b"}, "params": params}
            for name, params in nodes.items()
        ],
        "outputs": list(nodes),
    }


@pytest.mark.parametrize("backend", BACKENDS)
def test_every_backend_reports_steps_convergence_and_the_last_update(backend: str) -> None:
    nodes = {
        "converges": {"iterations": 100, "tolerance": 1e-5},
        "short": {"iterations": 3, "tolerance": 1e-5},
        "fixed": {"iterations": 3},
    }
    with Runner(backend) as runner:
        document = runner.run(load_graph(jacobi_graph(SYSTEM, nodes))).to_json()
    solvers = {node["id"]: node["solver"] for node in document["nodes"]}
    expected = {}
    for name, params in nodes.items():
        _, report = reference.jacobi_solve(np.array(SYSTEM), np.array(RIGHT), **params)
        expected[name] = report.to_json()
    assert {name: s["iterations"] for name, s in solvers.items()} == {
        name: e["iterations"] for name, e in expected.items()
    }
    assert {name: s["converged"] for name, s in solvers.items()} == {
        "converges": True,
        "short": False,
        "fixed": False,
    }
    for name, solver in solvers.items():
        assert solver["residual"] == pytest.approx(expected[name]["residual"], rel=1e-3, abs=1e-6)
    assert document["warnings"] == [
        f"node 'short' (jacobi): stopped at the iteration limit (3) without converging: "
        f"last update {expected['short']['residual']:.3g}, tolerance 1e-05"
    ]


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_singular_system_is_exit_4_naming_the_node(
    backend: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # The result is not an output: the solver's own check names the node.
    graph = jacobi_graph([[0.0, 1.0], [1.0, 0.0]], {"j": {"iterations": 5}})
    graph["nodes"].append({"id": "total", "op": "sum", "inputs": {"x": "j"}})
    graph["outputs"] = ["total"]
    code, out, err = cli(capsys, "run", str(write_graph(tmp_path, graph)), "--backend", backend)
    assert (code, out) == (4, "")
    assert err == (
        "gpulab: numerical failure: node 'j' (jacobi): the update of step 5 is not finite "
        "(a singular or diverging system)\n"
    )


def test_run_says_the_warning_on_stderr(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    graph = jacobi_graph(SYSTEM, {"j": {"iterations": 2, "tolerance": 1e-6}})
    path = write_graph(tmp_path, graph)
    code, _, err = cli(capsys, "run", str(path), "--backend", "cpu", "-o", str(tmp_path / "r.json"))
    assert code == 0
    assert err.startswith(f"gpulab: {path}: warning: node 'j' (jacobi): stopped at the iteration")


def test_no_step_no_convergence() -> None:
    assert SolverReport(0, 0.0, 1e-3).to_json() == {
        "iterations": 0,
        "converged": False,
        "residual": 0.0,
    }
    assert SolverReport(0, 0.0, 1e-3).warning("j") is not None
    assert SolverReport(4, 0.5, None).warning("j") is None
