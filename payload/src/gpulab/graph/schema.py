"""The published JSON Schema of graph JSON version 1 (`gpulab schema` prints it).

Built from the op table so it cannot drift from what validation accepts. Validation itself
goes further than a schema can (references, cycles, shapes, memory), and names every problem.
"""

from __future__ import annotations

from typing import Any

from gpulab.graph._json import FLOAT32_MAX
from gpulab.graph.model import BACKEND_NAMES, GRAPH_VERSION
from gpulab.ops import Kind, OpSpec, ParamSpec
from gpulab.ops.entry import OpEntry
from gpulab.ops.registry import NODE_FORMS, entries

_NUMBER = {"type": "number", "minimum": -FLOAT32_MAX, "maximum": FLOAT32_MAX}
_COUNT = {"type": "integer", "minimum": 1}
_NAME = {"type": "string", "minLength": 1}


def _object(properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": False,
    }


def _random(extent: dict[str, Any]) -> dict[str, Any]:
    return _object(
        {
            **extent,
            "seed": {"type": "integer", "minimum": 0, "default": 0},
            "low": {**_NUMBER, "default": 0.0},
            "high": {**_NUMBER, "default": 1.0},
        },
        list(extent),
    )


def _input(kind: Kind, sources: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {"type": {"const": kind.value}, "description": {"type": "string"}},
        "required": ["type"],
        "oneOf": [
            {"required": [name], "properties": {name: schema}} for name, schema in sources.items()
        ],
        "additionalProperties": False,
        "patternProperties": {f"^({'|'.join(sources)})$": {}},
    }


def _inputs() -> dict[str, Any]:
    vector, matrix = {"n": _COUNT}, {"rows": _COUNT, "cols": _COUNT}
    npy = {"type": "string", "pattern": r"\.npy$", "description": "relative to the graph file"}
    return {
        "oneOf": [
            _input(Kind.SCALAR, {"value": _NUMBER}),
            _input(
                Kind.VECTOR,
                {
                    "data": {"type": "array", "items": _NUMBER, "minItems": 1},
                    "random": _random(vector),
                    "fill": _object({**vector, "value": _NUMBER}, ["n", "value"]),
                    "linspace": _object(
                        {**vector, "start": _NUMBER, "stop": _NUMBER}, ["n", "start", "stop"]
                    ),
                    "file": npy,
                },
            ),
            _input(
                Kind.MATRIX,
                {
                    "data": {
                        "type": "array",
                        "minItems": 1,
                        "items": {"type": "array", "items": _NUMBER, "minItems": 1},
                        "description": "rows of equal length",
                    },
                    "random": _random(matrix),
                    "fill": _object({**matrix, "value": _NUMBER}, ["rows", "cols", "value"]),
                    "file": npy,
                },
            ),
        ]
    }


def _param(param: ParamSpec) -> dict[str, Any]:
    schema: dict[str, Any] = {
        "type": "integer" if param.type is int else "number",
        "description": param.description,
    }
    if param.minimum is not None:
        key = "exclusiveMinimum" if param.exclusive_minimum else "minimum"
        schema[key] = param.minimum
    if param.maximum is not None:
        schema["maximum"] = param.maximum
    return schema


def _op(spec: OpSpec, own_keys: list[str]) -> dict[str, Any]:
    argument = {"oneOf": [_NAME, _NUMBER]}
    then: dict[str, Any] = {
        "properties": {
            "inputs": _object(
                {name: (argument if kind is Kind.SCALAR else _NAME) for name, kind in spec.inputs},
                list(spec.input_names),
            ),
            "params": _object(
                {param.name: _param(param) for param in spec.params},
                [param.name for param in spec.params if param.required],
            ),
            **{key: False for key in own_keys},  # keys only nodes of another form have
        }
    }
    if any(param.required for param in spec.params):
        then["required"] = ["params"]
    return {"if": {"properties": {"op": {"const": spec.name}}}, "then": then}


def _node_form(entry: OpEntry) -> dict[str, Any]:
    """The branch of an op whose nodes have a form of their own (a user kernel)."""
    return {"if": {"properties": {"op": {"const": entry.name}}}, "then": entry.node_schema}


def graph_schema() -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) of a version-1 graph."""
    forms = [each for each in NODE_FORMS.values() if each.node_schema is not None]
    own_keys = sorted({key for each in forms for key in each.node_keys})
    node = {
        "type": "object",
        "properties": {
            "id": _NAME,
            "op": {"enum": [*entries(), *(each.name for each in forms)]},
            "inputs": {"type": "object"},
            "params": {"type": "object"},
            "backend": {"enum": list(BACKEND_NAMES)},
            "description": {"type": "string"},
            **{key: {} for key in own_keys},
        },
        "required": ["id", "op", "inputs"],
        "additionalProperties": False,
        "allOf": [
            *(_op(each.spec, own_keys) for each in entries().values()),
            *(_node_form(each) for each in forms),
        ],
    }
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": "https://gpulab.invalid/schemas/graph-v1.json",
        "title": "gpulab compute graph, version 1",
        "type": "object",
        "properties": {
            "version": {"const": GRAPH_VERSION},
            "name": {"type": "string"},
            "description": {"type": "string"},
            "inputs": {"type": "object", "additionalProperties": _inputs()},
            "nodes": {"type": "array", "items": node, "minItems": 1},
            "outputs": {"type": "array", "items": _NAME, "minItems": 1, "uniqueItems": True},
        },
        "required": ["version", "nodes", "outputs"],
        "additionalProperties": False,
    }
