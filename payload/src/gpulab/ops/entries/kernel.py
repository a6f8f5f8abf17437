"""`kernel`: a user's own compute shader as a node (gpulab.ops.user_kernel, docs/cli.md).

Unlike the other ops, each kernel node has its own inputs and result shape: the entry's
`node_form` reads them, with the shader, from the node's JSON. The node's params carry the
checked shader (`kernel`), which the Vulkan recording binds and the host backends use to find
the numpy reference the node names.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gpulab.ops.entry import Bench, NoHostRun, OpEntry, resolve
from gpulab.ops.spec import Kind, OpSpec, Shape, ShapeError

if TYPE_CHECKING:
    from gpulab.ops.user_kernel import UserKernel

NAME = "kernel"


def _no_shape(shapes: Mapping[str, Shape]) -> Shape:
    raise ShapeError("kernel", "a kernel node's output is declared by the node")


def _shape_rule(kernel: UserKernel) -> Callable[[Mapping[str, Shape]], Shape]:
    def rule(shapes: Mapping[str, Shape]) -> Shape:
        for name in kernel.arrays:
            if shapes[name] == ():
                raise ShapeError(
                    name,
                    f"a kernel binds {name} as a storage buffer, but it is a scalar "
                    "(give scalars to a kernel as numbers: they are push constants)",
                )
        if kernel.like is not None:
            return shapes[kernel.like]
        assert kernel.shape is not None
        return kernel.shape

    return rule


def node_form(raw: Mapping[str, Any], base_dir: Path) -> tuple[OpSpec, dict[str, Any]]:
    """The node's own spec (its inputs: names are arrays, numbers scalars) and params."""
    from gpulab.ops.user_kernel import load_kernel  # noqa: PLC0415 - only for kernel nodes

    kernel = load_kernel(raw, base_dir)
    inputs = tuple(
        (name, Kind.SCALAR if name in kernel.scalars else Kind.VECTOR) for name in raw["inputs"]
    )
    spec = OpSpec(NAME, inputs, Kind.VECTOR, _shape_rule(kernel), any_kind=True)
    return spec, {"kernel": kernel}


def _host(
    functions: Callable[[str], Callable[..., Any]], arguments: dict[str, Any]
) -> tuple[Any, None]:
    kernel: UserKernel = arguments.pop("kernel")
    if kernel.reference is None:
        raise NoHostRun(
            f"kernel {kernel.name} names no numpy reference (kernel.reference): "
            "it runs on vulkan only"
        )
    return resolve(kernel.reference)(**arguments), None


def no_reference(**arguments: Any) -> Any:
    """The entry's own reference: there is none (each node names its own, `host` runs it)."""
    raise NoHostRun("a kernel node's numpy reference is its own kernel.reference")


def _no_tolerance(b: Any, inputs: Any, ref: Any, params: Any) -> Any:
    raise NotImplementedError("a user kernel has no tolerance rule")


_NAME = {"type": "string", "minLength": 1}
_SCHEMA = {
    "required": ["kernel", "output"],
    "properties": {
        "inputs": {"additionalProperties": {"oneOf": [_NAME, {"type": "number"}]}},
        "kernel": {
            "type": "object",
            "properties": {
                "file": {
                    "type": "string",
                    "pattern": r"\.(comp|spv)$",
                    "description": "GLSL compute shader or SPIR-V, relative to the graph file",
                },
                "reference": {
                    "type": "string",
                    "pattern": "^[^:]+:[^:]+$",
                    "description": "module:function of a numpy reference (cpu, native)",
                },
            },
            "required": ["file"],
            "additionalProperties": False,
        },
        "output": {
            "oneOf": [
                {
                    "type": "object",
                    "properties": {"like": _NAME},
                    "required": ["like"],
                    "additionalProperties": False,
                },
                {
                    "type": "object",
                    "properties": {
                        "shape": {
                            "type": "array",
                            "items": {"type": "integer", "minimum": 0},
                            "maxItems": 2,
                        }
                    },
                    "required": ["shape"],
                    "additionalProperties": False,
                },
            ]
        },
        "params": {"type": "object", "additionalProperties": False},
    },
}

KERNEL = OpEntry(
    spec=OpSpec(NAME, (), Kind.VECTOR, _no_shape, description="a user's compute shader"),
    reference="gpulab.ops.entries.kernel:no_reference",
    tolerance=_no_tolerance,
    float32=lambda np, **arguments: None,
    cases=lambda d: [],
    bench=Bench(lambda n, dims: 0, lambda n, dims: 0, lambda n, dims: {}),
    host=_host,
    node_form=node_form,
    node_keys=("kernel", "output"),
    node_schema=_SCHEMA,
    node_files=(("kernel", "file"),),
)

ENTRIES = (KERNEL,)
