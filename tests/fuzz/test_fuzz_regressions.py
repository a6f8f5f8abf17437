"""One test per bug the fuzzer found: each input ran into a traceback, a hang, a multi-line
message or a silent misreading before it was fixed."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from gpulab.graph import MemoryLimit, load_graph, materialize, values
from gpulab.running import runner

from tests.fuzz.harness import Outcome, check_contract, in_process, result_of


def graph(**inputs: Any) -> dict[str, Any]:
    """x (a vector) scaled by a; inputs override x or a."""
    return {
        "version": 1,
        "inputs": {
            "x": {"type": "vector", "data": [1.0, 2.0]},
            "a": {"type": "scalar", "value": 2.0},
            **inputs,
        },
        "nodes": [{"id": "s", "op": "scale", "inputs": {"x": "x", "a": "a"}}],
        "outputs": ["s"],
    }


def run(folder: Path, document: Any, *args: str, command: str = "validate") -> Outcome:
    path = folder / "graph.json"
    if isinstance(document, bytes):
        path.write_bytes(document)
    else:
        path.write_text(json.dumps(document), encoding="utf-8")
    outcome = in_process([command, str(path), *args])
    check_contract(outcome)
    return outcome


def refused(outcome: Outcome, *fragments: str) -> None:
    """Exit 2, each problem on one `gpulab:` line, the fragments in the message."""
    assert outcome.code == 2, outcome.describe()
    assert outcome.out == ""
    for fragment in fragments:
        assert fragment in outcome.err, outcome.describe()


@pytest.mark.parametrize("depth", [1000, 100_000])
def test_json_nested_deeper_than_the_parser_is_refused(tmp_path: Path, depth: int) -> None:
    # Was: RecursionError out of json.loads, a traceback.
    document = b"[" * depth + b"]" * depth
    outcome = run(tmp_path, document)
    if depth > 1000:
        refused(outcome, "malformed JSON: nested too deeply")
    else:
        refused(outcome)


def test_a_number_with_more_digits_than_int_takes_is_refused(tmp_path: Path) -> None:
    # Was: ValueError (int max str digits) reported without saying it was the graph file.
    document = b'{"version": 1' + b"0" * 5000 + b"}"
    refused(run(tmp_path, document), "graph.json: malformed JSON: Exceeds the limit")


def test_a_named_pipe_as_input_file_is_refused_without_blocking(tmp_path: Path) -> None:
    # Was: np.load opened the FIFO and waited for a writer forever.
    os.mkfifo(tmp_path / "pipe.npy")
    outcome = run(tmp_path, graph(x={"type": "vector", "file": "pipe.npy"}))
    refused(outcome, "inputs.x.file: pipe.npy: not a regular file")


def test_a_directory_as_input_file_is_refused(tmp_path: Path) -> None:
    (tmp_path / "d.npy").mkdir()
    outcome = run(tmp_path, graph(x={"type": "vector", "file": "d.npy"}))
    refused(outcome, "inputs.x.file: d.npy: not a regular file")


def test_an_absolute_input_path_is_refused(tmp_path: Path) -> None:
    np.save(tmp_path / "v.npy", np.ones(2, np.float32))
    outcome = run(tmp_path, graph(x={"type": "vector", "file": str(tmp_path / "v.npy")}))
    refused(outcome, "must be relative to the graph file's folder, not absolute")


def test_a_relative_path_out_of_the_graph_folder_is_read(tmp_path: Path) -> None:
    # The decision (docs/reliability.md): `..` is allowed; files are only read, with the
    # user's own permissions, and `gpulab submit` copies them into the job directory.
    np.save(tmp_path / "shared.npy", np.array([1.0, 2.0], np.float32))
    (tmp_path / "graphs").mkdir()
    outcome = run(
        tmp_path / "graphs",
        graph(x={"type": "vector", "file": "../shared.npy"}),
        "--backend",
        "cpu",
        command="run",
    )
    assert outcome.code == 0, outcome.describe()
    assert result_of(outcome)["outputs"]["s"]["data"] == [2.0, 4.0]


def test_a_symlink_to_a_regular_file_is_read(tmp_path: Path) -> None:
    np.save(tmp_path / "v.npy", np.array([3.0, 4.0], np.float32))
    (tmp_path / "link.npy").symlink_to("v.npy")
    outcome = run(
        tmp_path, graph(x={"type": "vector", "file": "link.npy"}), "--backend", "cpu", command="run"
    )
    assert result_of(outcome)["outputs"]["s"]["data"] == [6.0, 8.0]


@pytest.mark.parametrize("iterations", [100_001, 2**40, 10**30])
def test_runaway_jacobi_iterations_are_refused(tmp_path: Path, iterations: int) -> None:
    # Was: accepted, then a run that never ended (10**30 steps).
    document = graph(A={"type": "matrix", "data": [[4.0, 1.0], [1.0, 3.0]]})
    document["nodes"] = [
        {
            "id": "j",
            "op": "jacobi",
            "inputs": {"A": "A", "b": "x"},
            "params": {"iterations": iterations},
        }
    ]
    document["outputs"] = ["j"]
    outcome = run(tmp_path, document, "--backend", "cpu", command="run")
    refused(outcome, "nodes[0].params.iterations (node 'j'): must be at most 100000")


@pytest.mark.parametrize("backend", ["cpu", "native", "vulkan"])
def test_a_literal_beyond_float32_is_refused(tmp_path: Path, backend: str) -> None:
    # Was: OverflowError (struct.pack of the push constant) on vulkan, inf on cpu.
    document = graph()
    document["nodes"][0]["inputs"]["a"] = 1e300
    del document["inputs"]["a"]
    outcome = run(tmp_path, document, "--backend", backend, command="run")
    refused(outcome, "nodes[0].inputs.a (node 's'): must be a finite float32 number")


def test_random_bounds_beyond_float32_are_refused(tmp_path: Path) -> None:
    # Was: OverflowError from numpy ("high - low range exceeds valid bounds").
    source = {"type": "vector", "random": {"n": 4, "low": -1e308, "high": 1e308}}
    outcome = run(tmp_path, graph(x=source), "--backend", "cpu", command="run")
    refused(outcome, "inputs.x.random.low: must be a finite float32", "inputs.x.random.high")


def test_a_tolerance_beyond_float32_is_refused(tmp_path: Path) -> None:
    document = graph(A={"type": "matrix", "data": [[4.0, 1.0], [1.0, 3.0]]})
    document["nodes"] = [
        {
            "id": "j",
            "op": "jacobi",
            "inputs": {"A": "A", "b": "x"},
            "params": {"iterations": 3, "tolerance": 1e300},
        }
    ]
    document["outputs"] = ["j"]
    refused(run(tmp_path, document), "params.tolerance (node 'j'): must be a finite float32")


def test_a_line_break_in_a_key_stays_on_one_line(tmp_path: Path) -> None:
    # Was: the key's newline split the message, the second line without `gpulab:`.
    document = graph()
    document["nodes"][0]["evil\nkey\x1b[2J"] = 1
    outcome = run(tmp_path, document)
    refused(outcome, "nodes[0].evil\\nkey\\x1b[2J (node 's'): unknown key")
    assert len(outcome.err.splitlines()) == 1


def test_a_key_given_twice_is_refused_with_its_path(tmp_path: Path) -> None:
    # Was: the last one silently won, so a reader and the run could see different graphs.
    text = json.dumps(graph()).replace('"a": {', '"a": {"value": 9, ', 1)
    outcome = run(tmp_path, text.encode())
    refused(outcome, "graph.json: inputs.a.value: this key is given more than once")


@pytest.mark.parametrize("backend", ["cpu", "native", "vulkan"])
def test_overflow_while_running_is_exit_4_naming_the_node_without_numpy_warnings(
    tmp_path: Path, backend: str
) -> None:
    # Was: numpy's RuntimeWarning lines on stderr (the harness fails on any warning); then
    # nulls with exit 0, while a zero-vector normalize was exit 4.
    document = graph(x={"type": "vector", "data": [3e38, 1.0]}, a={"type": "scalar", "value": 10})
    outcome = run(tmp_path, document, "--backend", backend, command="run")
    assert outcome.code == 4, outcome.describe()
    assert outcome.err == (
        "gpulab: numerical failure: node 's' (scale): 1 of 2 values are not finite "
        "(an overflow, or a singular or diverging system)\n"
    )


def test_run_refuses_a_graph_larger_than_the_available_memory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Was: checked against physical memory only, so a graph between the free and the total
    # memory was attempted (and met the OOM killer). `validate` keeps the physical limit.
    monkeypatch.setattr(runner, "available_memory", lambda: MemoryLimit(64, "available memory"))
    document = graph(x={"type": "vector", "fill": {"n": 100, "value": 1.0}})
    refused(
        run(tmp_path, document, "--backend", "cpu", command="run"),
        "inputs.x: [100] float32 values need 400 bytes, only 64 bytes of available memory exist",
    )
    assert run(tmp_path, document).code == 0


def test_random_inputs_are_drawn_in_chunks_with_the_same_stream() -> None:
    # Was: one float64 draw of the whole input (three times its float32 size at the peak).
    document = graph(x={"type": "vector", "random": {"n": 2 * values.RANDOM_CHUNK + 3, "seed": 5}})
    got = materialize(load_graph(document).inputs["x"])
    want = np.random.default_rng(5).uniform(0.0, 1.0, 2 * values.RANDOM_CHUNK + 3)
    assert np.array_equal(got, want.astype(np.float32))
