"""The published JSON Schema: valid itself, accepts every example, rejects what validation
rejects structurally; `gpulab schema` prints it."""

from __future__ import annotations

import json
from typing import Any

import jsonschema  # type: ignore[import-untyped]  # installed with ansible-lint
import pytest
from gpulab.graph import graph_schema
from graph_helpers import EXAMPLES, cli, small_graph


def test_schema_is_a_valid_draft_2020_12_schema() -> None:
    jsonschema.Draft202012Validator.check_schema(graph_schema())


@pytest.mark.parametrize("path", sorted(EXAMPLES.glob("*.json")), ids=lambda p: p.stem)
def test_examples_follow_the_schema(path: Any) -> None:
    jsonschema.validate(json.loads(path.read_text()), graph_schema())


@pytest.mark.parametrize(
    "change",
    [
        {"version": 2},
        {"outputs": []},
        {"extra": 1},
        {"nodes": [{"id": "s", "op": "fft", "inputs": {}}]},
        {"nodes": [{"id": "s", "op": "sum", "inputs": {}}]},
        {"nodes": [{"id": "s", "op": "add", "inputs": {"x": "x", "y": 1.0}}]},
        {"nodes": [{"id": "j", "op": "jacobi", "inputs": {"A": "A", "b": "x"}}]},
        {"inputs": {"x": {"type": "vector", "linspace": {"n": 0, "start": 0, "stop": 1}}}},
        {"inputs": {"x": {"type": "matrix", "linspace": {"n": 3, "start": 0, "stop": 1}}}},
        {"inputs": {"x": {"type": "vector", "data": [1.0], "fill": {"n": 1, "value": 0}}}},
    ],
)
def test_schema_rejects_structural_errors(change: dict[str, Any]) -> None:
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(small_graph(**change), graph_schema())


def test_schema_command_prints_it(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = cli(capsys, "schema")
    assert code == 0
    assert json.loads(out) == graph_schema()
