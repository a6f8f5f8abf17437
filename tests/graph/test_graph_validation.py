"""Each validation error through `gpulab validate`: exit 2, one line naming where, no traceback."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from gpulab.graph import GraphInvalid, MemoryLimit, load_graph
from graph_helpers import cli, small_graph, subprocess_cli, write_graph


def _with_nodes(*nodes: dict[str, Any], outputs: list[str] | None = None) -> dict[str, Any]:
    graph = small_graph()
    graph["nodes"] = [*graph["nodes"], *nodes]
    if outputs is not None:
        graph["outputs"] = outputs
    return graph


def _matrix_graph(data: list[list[float]], b: list[float]) -> dict[str, Any]:
    return small_graph(
        inputs={
            "A": {"type": "matrix", "data": data},
            "b": {"type": "vector", "data": b},
        },
        nodes=[
            {"id": "j", "op": "jacobi", "inputs": {"A": "A", "b": "b"}, "params": {"iterations": 5}}
        ],
        outputs=["j"],
    )


CASES: dict[str, tuple[Any, str]] = {
    "malformed JSON": (
        '{"version": 1, "nodes": [',
        "line 1 column 26: malformed JSON: Expecting value",
    ),
    "not an object": ("[1, 2]", "$: a graph must be a JSON object, got array"),
    "schema: version": (small_graph(version=2), "version: must be 1, got 2"),
    "schema: unknown key": (
        _with_nodes({"id": "t", "op": "sum", "inputs": {"x": "x"}, "param": {}}, outputs=["t"]),
        "nodes[2].param (node 't'): unknown key",
    ),
    "schema: input type": (
        small_graph(inputs={"x": {"type": "tensor", "data": [1]}}),
        "inputs.x.type: must be one of scalar, vector, matrix, got 'tensor'",
    ),
    "schema: random size": (
        small_graph(inputs={"x": {"type": "vector", "random": {"n": 0}}}),
        "inputs.x.random.n: must be at least 1, got 0",
    ),
    "unknown op": (
        _with_nodes({"id": "t", "op": "fft", "inputs": {"x": "x"}}),
        "nodes[2].op (node 't'): unknown op 'fft'",
    ),
    "missing reference": (
        _with_nodes({"id": "t", "op": "sum", "inputs": {"x": "nowhere"}}),
        "nodes[2].inputs.x (node 't'): unknown reference 'nowhere'",
    ),
    "duplicate id": (
        _with_nodes({"id": "s", "op": "sum", "inputs": {"x": "x"}}),
        "nodes[2].id (node 's'): duplicate id (also nodes[0].id)",
    ),
    "id shadows an input": (
        _with_nodes({"id": "x", "op": "sum", "inputs": {"x": "y"}}),
        "nodes[2].id (node 'x'): an input has the same name",
    ),
    "cycle": (
        _with_nodes(
            {"id": "p", "op": "add", "inputs": {"x": "x", "y": "q"}},
            {"id": "q", "op": "scale", "inputs": {"x": "p", "a": 2.0}},
        ),
        "nodes[2] (node 'p'): cycle: p -> q -> p",
    ),
    "vector where a scalar goes": (
        _with_nodes({"id": "t", "op": "scale", "inputs": {"x": "x", "a": "y"}}),
        "nodes[2].inputs.a (node 't'): scale's a must be a scalar, but 'y' is a vector",
    ),
    "number where a vector goes": (
        _with_nodes({"id": "t", "op": "add", "inputs": {"x": "x", "y": 1.0}}),
        "nodes[2].inputs.y (node 't'): a number is a scalar but add's y must be a vector",
    ),
    "lengths differ": (
        small_graph(
            inputs={
                "x": {"type": "vector", "data": [1.0, 2.0]},
                "y": {"type": "vector", "linspace": {"n": 3, "start": 0, "stop": 1}},
            },
            nodes=[{"id": "d", "op": "dot", "inputs": {"x": "x", "y": "y"}}],
            outputs=["d"],
        ),
        "nodes[0].inputs.y (node 'd'): x has 2 elements but y has 3",
    ),
    "matrix dimensions": (
        small_graph(
            inputs={
                "A": {"type": "matrix", "fill": {"rows": 2, "cols": 3, "value": 1}},
                "B": {"type": "matrix", "fill": {"rows": 2, "cols": 3, "value": 1}},
            },
            nodes=[{"id": "C", "op": "matmul", "inputs": {"A": "A", "B": "B"}}],
            outputs=["C"],
        ),
        "nodes[0].inputs.B (node 'C'): A is 2x3 so B needs 3 rows, got 2x3",
    ),
    "ragged matrix": (
        _matrix_graph([[4.0, 1.0], [1.0]], [1.0, 2.0]),
        "inputs.A.data[1]: ragged matrix: row 1 has 1 values but row 0 has 2",
    ),
    "non-square jacobi": (
        _matrix_graph([[4.0, 1.0, 0.0], [1.0, 3.0, 0.0]], [1.0, 2.0]),
        "nodes[0].inputs.A (node 'j'): jacobi needs a square matrix A, got 2x3",
    ),
    "jacobi without iterations": (
        small_graph(
            inputs={
                "A": {"type": "matrix", "data": [[2.0]]},
                "b": {"type": "vector", "data": [1.0]},
            },
            nodes=[{"id": "j", "op": "jacobi", "inputs": {"A": "A", "b": "b"}}],
            outputs=["j"],
        ),
        "nodes[0].params (node 'j'): jacobi needs param 'iterations'",
    ),
    "unknown output": (small_graph(outputs=["s", "t"]), "outputs[1]: unknown output 't'"),
    "too big for memory": (
        small_graph(
            inputs={
                "x": {"type": "vector", "random": {"n": 1 << 42}},
                "a": {"type": "scalar", "value": 1.0},
            },
            nodes=[{"id": "n", "op": "scale", "inputs": {"x": "x", "a": "a"}}],
            outputs=["n"],
        ),
        "inputs.x: [4398046511104] float32 values need 16384.00 GiB, only",
    ),
}


@pytest.mark.parametrize("case", list(CASES))
def test_validation_error_is_one_line_with_exit_2(
    case: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    graph, expected = CASES[case]
    path = write_graph(tmp_path, graph)
    code, out, err = cli(capsys, "validate", str(path))
    assert code == 2
    assert out == ""
    assert f"gpulab: {path}: {expected}" in err, err
    assert "Traceback" not in err


def test_every_error_is_reported_at_once(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    graph = _with_nodes(
        {"id": "t", "op": "fft", "inputs": {}},
        {"id": "u", "op": "sum", "inputs": {"x": "nowhere"}},
        {"id": "s", "op": "sum", "inputs": {"x": "x"}},
        outputs=["s", "ghost"],
    )
    graph["version"] = 3
    code, _, err = cli(capsys, "validate", str(write_graph(tmp_path, graph)))
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 5, err
    for where in ("version", "nodes[2].op", "nodes[3].inputs.x", "nodes[4].id", "outputs[1]"):
        assert any(f": {where}" in line for line in lines), (where, err)


def test_warnings_for_unused_inputs_and_nodes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    graph = small_graph(outputs=["s"])
    graph["inputs"]["spare"] = {"type": "scalar", "value": 1.0}
    code, out, err = cli(capsys, "validate", str(write_graph(tmp_path, graph)))
    assert (code, out) == (0, "ok\n")
    assert "warning: inputs.spare: unused input" in err
    assert "warning: nodes[1] (node 'n'): result is not read by any node or output" in err


def test_file_inputs_resolve_against_the_graph_folder(tmp_path: Path) -> None:
    np.save(tmp_path / "v.npy", np.arange(3, dtype=np.float64))
    graph = small_graph()
    graph["inputs"]["x"] = {"type": "vector", "file": "v.npy"}
    loaded = load_graph(write_graph(tmp_path, graph))
    assert loaded.shape("x") == (3,)
    graph["inputs"]["x"] = {"type": "matrix", "file": "v.npy"}
    with pytest.raises(
        GraphInvalid, match=r"inputs.x.file: v.npy: has shape \[3\], expected a matrix"
    ):
        load_graph(write_graph(tmp_path, graph))
    graph["inputs"]["x"] = {"type": "vector", "file": "missing.npy"}
    with pytest.raises(GraphInvalid, match=r"missing\.npy: no such file"):
        load_graph(write_graph(tmp_path, graph))


def test_peak_memory_names_the_node() -> None:
    # x, y, a and s (12 + 12 + 4 + 12 bytes) are all alive while s is computed.
    with pytest.raises(GraphInvalid) as raised:
        load_graph(small_graph(), limit=MemoryLimit(39, "test memory"))
    assert str(raised.value.errors[0]) == (
        "nodes[0] (node 's'): the graph holds 40 bytes at once when this node runs, "
        "only 39 bytes of test memory exist"
    )
    assert load_graph(small_graph(), limit=MemoryLimit(40, "test memory")).outputs == ("s", "n")


def test_user_errors_print_no_traceback_in_a_subprocess(tmp_path: Path) -> None:
    bad = write_graph(tmp_path, '{"version": 1,, }')
    done = subprocess_cli("run", str(bad), "--backend", "cpu")
    assert done.returncode == 2
    assert done.stderr.startswith(f"gpulab: {bad}: line 1 column 15: malformed JSON")
    assert "Traceback" not in done.stderr
    missing = subprocess_cli("validate", str(tmp_path / "absent.json"))
    assert missing.returncode == 2
    assert "cannot read the graph: No such file or directory" in missing.stderr
    assert "Traceback" not in missing.stderr


@pytest.mark.parametrize("kind", ["device", "fifo", "directory", "huge"])
def test_a_graph_path_that_is_no_sane_file_is_refused_before_reading(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], kind: str
) -> None:
    # Was: /dev/zero was read until memory ran out (exit 4, empty message); a FIFO blocked.
    path = tmp_path / "graph.json"
    if kind == "device":
        path = Path("/dev/zero")
    elif kind == "fifo":
        os.mkfifo(path)
    elif kind == "directory":
        path.mkdir()
    else:
        with path.open("wb") as sparse:
            sparse.truncate(2 << 30)  # 2 GiB, no blocks written
    code, out, err = cli(capsys, "validate", str(path))
    assert (code, out) == (2, "")
    assert len(err.splitlines()) == 1
    assert err.startswith(f"gpulab: {path}: cannot read the graph: ")
