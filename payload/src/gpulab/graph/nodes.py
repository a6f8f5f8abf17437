"""Graph nodes: parse and check each entry of `nodes` against the op table."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any

from gpulab._shown import shown
from gpulab.graph._json import (
    expect_object,
    is_integer,
    is_number,
    number_problem,
    type_name,
    unknown_keys,
)
from gpulab.graph.model import BACKEND_NAMES, Argument, Arguments, Literal, Ref
from gpulab.graph.problems import Problem
from gpulab.ops import OPS, Kind, OpSpec, ParamSpec
from gpulab.ops.registry import entries, find

NODE_KEYS = ("id", "op", "inputs", "params", "backend", "description")
_NODE_KEY_SET = frozenset(NODE_KEYS)


@dataclass(slots=True)
class ParsedNode:
    """A node whose own fields are well formed; references and shapes are checked later."""

    id: str
    op: OpSpec
    inputs: Arguments
    params: Mapping[str, Any]
    backend: str | None
    index: int

    @property
    def path(self) -> str:
        """The node's JSON path."""
        return f"nodes[{self.index}]"


def _argument(
    spec: OpSpec, name: str, raw: Any, *, path: str, node: str, problems: list[Problem]
) -> Argument | None:
    if isinstance(raw, str) and raw:
        return Ref(raw)
    if is_number(raw):
        if spec.input_kind(name) is not Kind.SCALAR:
            problems.append(
                Problem(
                    path,
                    f"a number is a scalar but {spec.name}'s {name} must be a "
                    f"{spec.input_kind(name).value}",
                    node,
                )
            )
            return None
        return Literal(float(raw))
    if isinstance(raw, int | float) and not isinstance(raw, bool):
        problems.append(Problem(path, number_problem(raw), node))
        return None
    problems.append(
        Problem(path, f"must name an input or node, or be a number; got {type_name(raw)}", node)
    )
    return None


def _param(param: ParamSpec, raw: Any, path: str, node: str, problems: list[Problem]) -> Any:
    if param.type is int:
        if not is_integer(raw):
            problems.append(Problem(path, f"must be an integer, got {type_name(raw)}", node))
            return None
        value: float = int(raw)
        most = param.maximum
        if most is not None and value > most:
            problems.append(Problem(path, f"must be at most {most}, got {shown(int(raw))}", node))
            return None
    else:
        if not is_number(raw):
            problems.append(Problem(path, number_problem(raw), node))
            return None
        value = float(raw)
    if param.minimum is not None:
        too_small = value <= param.minimum if param.exclusive_minimum else value < param.minimum
        if too_small:
            bound = "greater than" if param.exclusive_minimum else "at least"
            problems.append(
                Problem(path, f"must be {bound} {param.minimum:g}, got {shown(raw)}", node)
            )
            return None
    return value


def _params(
    spec: OpSpec, raw: Any, path: str, node: str, problems: list[Problem]
) -> dict[str, Any] | None:
    if not expect_object(raw, path, problems, node):
        return None
    ok = True
    known = tuple(param.name for param in spec.params)
    for key in raw:
        if key not in known:
            allowed = ", ".join(known) or "no params"
            problems.append(
                Problem(f"{path}.{key}", f"unknown param ({spec.name} takes {allowed})", node)
            )
            ok = False
    params: dict[str, Any] = {}
    for param in spec.params:
        if param.name not in raw:
            if param.required:
                problems.append(Problem(path, f"{spec.name} needs param {param.name!r}", node))
                ok = False
            elif param.default is not None:
                params[param.name] = param.default
            continue
        value = _param(param, raw[param.name], f"{path}.{param.name}", node, problems)
        ok = ok and value is not None
        params[param.name] = value
    return params if ok else None


def _default_params(spec: OpSpec) -> Mapping[str, Any] | None:
    """The params of a node of `spec` that gives none, or None when some are required.
    Read-only and shared: a graph may have 10^6 nodes without params."""
    if any(param.required for param in spec.params):
        return None
    defaults = {p.name: p.default for p in spec.params if p.default is not None}
    return MappingProxyType(defaults)


_DEFAULT_PARAMS = {name: _default_params(spec) for name, spec in OPS.items()}


def _spec(op_name: Any) -> OpSpec | None:
    """The op's row: a built-in op's in one look-up, else another package's (loaded now)."""
    if not isinstance(op_name, str):
        return None
    spec = OPS.get(op_name)
    if spec is None:
        found = find(op_name)
        spec = found.spec if found is not None else None
    return spec


WellFormed = tuple[str, OpSpec, tuple[str | float, ...], Mapping[str, Any], str | None]
"""A node's id, op, inputs (in the op's order: a name to read, or a number), params and
backend."""
LITERALS_KEPT = 4096
"""Distinct numbers whose Literal is shared between nodes."""
_LITERALS: dict[float, Literal] = {}


def literal(value: float) -> Literal:
    """Literals are shared by value (a graph may give 10^6 nodes the same scale factor).
    Zero is made each time: 0.0 and -0.0 are equal as keys but not as numbers."""
    found = _LITERALS.get(value)
    if found is None:
        found = Literal(value)
        if value and len(_LITERALS) < LITERALS_KEPT:
            _LITERALS[value] = found
    return found


NodeHeader = tuple[str, OpSpec, dict[str, Any], str | None]
"""A node's id, op, `inputs` object and backend."""


def node_header(raw: Any) -> NodeHeader | None:
    """A node's id, op, `inputs` object and backend when its keys, id, op, backend and input
    names are as they should be, else None. This and the two below are the common case,
    checked in few steps and recording nothing (a graph may have millions of nodes):
    parse_node words whatever is wrong."""
    if not isinstance(raw, dict) or not raw.keys() <= _NODE_KEY_SET:
        return None
    node_id, op_name, raw_inputs = raw.get("id"), raw.get("op"), raw.get("inputs")
    spec = _spec(op_name)
    if not isinstance(node_id, str) or not node_id or spec is None:
        return None
    backend = raw.get("backend")
    if backend is not None and backend not in BACKEND_NAMES:
        return None
    if not isinstance(raw_inputs, dict) or raw_inputs.keys() != spec.input_kinds.keys():
        return None
    return node_id, spec, raw_inputs, backend


def argument_value(kind: Kind, raw: Any) -> str | float | None:
    """An input's value when well formed: the name it reads, or for a scalar a number."""
    if isinstance(raw, str):
        return raw or None
    if kind is Kind.SCALAR and is_number(raw):
        return float(raw)
    return None


def node_params(index: int, raw: dict[str, Any], spec: OpSpec) -> Mapping[str, Any] | None:
    """The node's params when given right, or the defaults when it gives none and none is
    required; else None."""
    if "params" not in raw:
        if spec.name not in _DEFAULT_PARAMS:  # an op another package adds
            _DEFAULT_PARAMS[spec.name] = _default_params(spec)
        return _DEFAULT_PARAMS[spec.name]
    problems: list[Problem] = []
    params = _params(spec, raw["params"], f"nodes[{index}].params", "", problems)
    return None if problems else params


def well_formed(index: int, raw: Any) -> WellFormed | None:
    """The node's fields when they are all as they should be, else None."""
    header = node_header(raw)
    if header is None:
        return None
    node_id, spec, raw_inputs, backend = header
    values: list[str | float] = []
    for name, kind in spec.inputs:
        value = argument_value(kind, raw_inputs[name])
        if value is None:
            return None
        values.append(value)
    params = node_params(index, raw, spec)
    if params is None:
        return None
    return node_id, spec, tuple(values), params, backend


def _arguments(spec: OpSpec, given: Mapping[str, Argument]) -> Arguments:
    return Arguments(spec.input_names, tuple(given[name] for name in spec.input_names))


def _parsed(index: int, fields: WellFormed) -> ParsedNode:
    node_id, spec, values, params, backend = fields
    given = tuple(Ref(v) if isinstance(v, str) else literal(v) for v in values)
    return ParsedNode(node_id, spec, Arguments(spec.input_names, given), params, backend, index)


def parse_node(
    index: int, raw: Any, problems: list[Problem], base_dir: Path | None = None
) -> ParsedNode | None:
    """One entry of `nodes` (None when its op or inputs are unusable); problems recorded.
    `base_dir`: the graph file's folder, against which a kernel node's file is found."""
    fields = well_formed(index, raw)
    if fields is not None:
        return _parsed(index, fields)
    path = f"nodes[{index}]"
    if not expect_object(raw, path, problems):
        return None
    node_id = raw.get("id")
    if not isinstance(node_id, str) or not node_id:
        problems.append(Problem(f"{path}.id", f"must be a non-empty string, got {shown(node_id)}"))
        return None
    op_name = raw.get("op")
    spec = _spec(op_name)
    found = find(op_name) if spec is not None and isinstance(op_name, str) else None
    form = found.node_form if found is not None else None
    unknown_keys(raw, NODE_KEYS + (found.node_keys if found else ()), path, problems, node_id)
    own_params: dict[str, Any] | None = None
    if form is not None and isinstance(raw.get("inputs"), dict):
        try:
            spec, own_params = form(raw, base_dir or Path("."))
        except ValueError as exc:
            problems.append(Problem(path, str(exc), node_id))
            return None
    if spec is None:
        known = ", ".join(entries())
        problems.append(
            Problem(f"{path}.op", f"unknown op {shown(op_name)} (known: {known})", node_id)
        )
    backend = raw.get("backend")
    if backend is not None and backend not in BACKEND_NAMES:
        problems.append(
            Problem(
                f"{path}.backend",
                f"must be one of {', '.join(BACKEND_NAMES)}, got {shown(backend)}",
                node_id,
            )
        )
    raw_inputs = raw.get("inputs")
    if not expect_object(raw_inputs, f"{path}.inputs", problems, node_id) or spec is None:
        return None
    inputs: dict[str, Argument] = {}
    for name in spec.input_names:
        if name not in raw_inputs:
            problems.append(Problem(f"{path}.inputs", f"{spec.name} needs input {name!r}", node_id))
            continue
        argument = _argument(
            spec,
            name,
            raw_inputs[name],
            path=f"{path}.inputs.{name}",
            node=node_id,
            problems=problems,
        )
        if argument is not None:
            inputs[name] = argument
    for name in raw_inputs:
        if name not in spec.input_names:
            problems.append(
                Problem(
                    f"{path}.inputs.{name}",
                    f"unknown input ({spec.name} takes {', '.join(spec.input_names)})",
                    node_id,
                )
            )
    params = _params(spec, raw.get("params", {}), f"{path}.params", node_id, problems)
    if own_params is not None and params is not None:
        params = {**params, **own_params}
    if len(inputs) != len(spec.inputs):
        return None
    # Kept with bad params or keys (already reported) so that its shapes are checked too.
    return ParsedNode(node_id, spec, _arguments(spec, inputs), params or {}, backend, index)
