"""Graph nodes: parse and check each entry of `nodes` against the op table."""

from __future__ import annotations

from dataclasses import dataclass
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
from gpulab.graph.model import BACKEND_NAMES, Argument, Literal, Ref
from gpulab.graph.problems import Problem
from gpulab.ops import OPS, Kind, OpSpec, ParamSpec

NODE_KEYS = ("id", "op", "inputs", "params", "backend", "description")
PARAM_MAXIMUM: dict[str, int] = {"iterations": 100_000}
"""Upper bounds of integer params. Jacobi records one dispatch per step on Vulkan: a count
beyond this is a runaway loop (or a denial of service), not a setting; use `tolerance`."""


@dataclass(frozen=True)
class ParsedNode:
    """A node whose own fields are well formed; references and shapes are checked later."""

    id: str
    op: OpSpec
    inputs: dict[str, Argument]
    params: dict[str, Any]
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
        most = PARAM_MAXIMUM.get(param.name)
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


def parse_node(index: int, raw: Any, problems: list[Problem]) -> ParsedNode | None:
    """One entry of `nodes` (None when its op or inputs are unusable); problems recorded."""
    path = f"nodes[{index}]"
    if not expect_object(raw, path, problems):
        return None
    node_id = raw.get("id")
    if not isinstance(node_id, str) or not node_id:
        problems.append(Problem(f"{path}.id", f"must be a non-empty string, got {shown(node_id)}"))
        return None
    unknown_keys(raw, NODE_KEYS, path, problems, node_id)
    op_name = raw.get("op")
    spec = OPS.get(op_name) if isinstance(op_name, str) else None
    if spec is None:
        problems.append(
            Problem(f"{path}.op", f"unknown op {shown(op_name)} (known: {', '.join(OPS)})", node_id)
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
    if len(inputs) != len(spec.inputs):
        return None
    # Kept with bad params or keys (already reported) so that its shapes are checked too.
    return ParsedNode(node_id, spec, inputs, params or {}, backend, index)
