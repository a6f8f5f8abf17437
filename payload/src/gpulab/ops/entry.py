"""One op's entry: everything gpulab knows about an op, in one value (docs/ops.md).

An entry holds the op's table row (`spec`: inputs, params, result kind and shape rule), its
numpy reference and native function (as "module:function" paths, imported on first use),
its tolerance rule, its float32 check, its selftest cases, what it moves for `gpulab bench`,
and the hooks through which executors learn its extra outputs (a solver's report, a norm that
must not be zero). Executors, selftest, bench, the tolerance policy and the JSON Schema read
entries; no code outside an op's own entry module branches on its name.

Importing an entry module loads no numpy: `gpulab validate` reads the specs alone. The
callables that compute get what they compute with as arguments (numpy, gpulab.ops.bounds,
a selftest Draw).
"""

from __future__ import annotations

import enum
import importlib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

from gpulab.ops.solver import SolverReport
from gpulab.ops.spec import OpSpec

if TYPE_CHECKING:
    from gpulab.ops.cases import Draw

Arguments = Mapping[str, Any]
CaseData = tuple[dict[str, Any], dict[str, Any]]
"""One selftest case of an op: its inputs and params."""
ToleranceRule = Callable[[ModuleType, Arguments, Any, Mapping[str, Any]], Any]
"""(gpulab.ops.bounds, inputs, reference result as float64, params) -> the allowed |error| of
each element."""
Float32Check = Callable[..., Any]
"""(numpy, **inputs and params) -> the op in plain float32 numpy (the cpu selftest's side)."""
HostCall = Callable[[Callable[[str], Callable[..., Any]], dict[str, Any]], tuple[Any, Any]]
"""(the host backend's function by name, arguments) -> (value, SolverReport or None)."""


class NoHostRun(LookupError):
    """A node of this op cannot run on a host backend (a user kernel without a reference)."""


NodeForm = Callable[[Mapping[str, Any], Path], tuple[OpSpec, dict[str, Any]]]
"""(the node's JSON, the graph file's folder) -> the node's own spec and params; raises
ValueError with a one-line message when the node's own fields are wrong."""


def resolve(path: str) -> Any:
    """The object a "module:attribute" path names (imported now)."""
    module, _, attribute = path.partition(":")
    return getattr(importlib.import_module(module), attribute)


@dataclass(frozen=True)
class Bench:
    """What `gpulab bench` needs of an op at size n (n elements, or an n x n matrix side;
    matmul's `dims` an m x k by k x n product)."""

    bytes_moved: Callable[[int, tuple[int, int, int]], int]
    """(n, (m, k, n)) -> bytes read plus written, each array once."""
    flops: Callable[[int, tuple[int, int, int]], int]
    """(n, (m, k, n)) -> floating-point operations (multiply-adds count two)."""
    inputs: Callable[[int, tuple[int, int, int]], dict[str, tuple[tuple[int, ...], float] | float]]
    """(n, (m, k, n)) -> each input: (shape, fill value) of an array, or a scalar literal."""
    matrix: bool = False
    """Whether n is a matrix side."""
    params: Mapping[str, Any] = field(default_factory=dict)
    fields: Callable[[int, tuple[int, int, int], float], dict[str, Any]] | None = None
    """(n, (m, k, n), seconds) -> what a matrix op's row adds besides GFLOP/s."""
    compare: Callable[[Any, bool, Mapping[str, Any]], Callable[[], Any]] | None = None
    """(torch or cupy, whether torch, the arrays made from `inputs` and "out") -> a callable
    that runs the op in that library (bench --compare)."""
    shapes: bool = False
    """Whether bench also runs it at the products of `--shapes MxKxN` (matmul)."""
    sizes: tuple[int, int, int] = (10, 28, 2)
    """bench's default sizes: powers of two from 2**first to 2**last in steps (exponents)."""
    device_bytes: Callable[[int, tuple[int, int, int]], int] | None = None
    """(n, (m, k, n)) -> device bytes of the inputs and output; default 3 vectors of n
    elements, or 3 n x n matrices and 2 vectors for a matrix op."""


class Combine(enum.IntEnum):
    """How a fusable reduction combines its terms (the values are shaders/reduce.glsl's OP
    codes of the combining pass)."""

    SUM = 0
    MIN = 1
    MAX = 2


@dataclass(frozen=True)
class Fusion:
    """How the fuser (gpulab.graph.fusion plans, gpulab.kernels.fused generates the shader)
    inlines an op into one dispatch with the elementwise ops that feed it (docs/ops.md).

    `expression` is GLSL over the op's inputs written `{name}`: an array input stands for one
    element (a float, or a vec4 of four neighbours), a scalar input for a float. For an
    elementwise op it is the element of the result; for a reduction (`combine` set) it is the
    term of one element, which `combine` folds into one number, its square root taken last
    when `root`. An op with a Fusion is either kind; any other op is never fused.

    `prepared` names scalars an elementwise op needs of its whole input first (normalize's
    norm): each is a reduction (a Fusion with `combine`) over the op's own inputs, run as its
    own pass before the group's, read by `expression` as `{name}` and handed to the op's
    `check` as the extra output of that name. The inputs of such an op are read from memory, so
    their producers never join its group."""

    expression: str
    combine: Combine | None = None
    root: bool = False
    prepared: tuple[tuple[str, Fusion], ...] = ()

    @property
    def reduces(self) -> bool:
        return self.combine is not None


@dataclass(frozen=True)
class OpEntry:
    """One op (see the module docstring)."""

    spec: OpSpec
    reference: str
    """"module:function" of the numpy reference (float64 accumulation, float32 result)."""
    tolerance: ToleranceRule
    float32: Float32Check
    cases: Callable[[Draw], Iterable[CaseData]]
    bench: Bench
    native: str | None = None
    """"module:function" of the native (C) function, where one exists."""
    host: HostCall | None = None
    """How a host backend (cpu, native) runs the op; default: its function of the op's name."""
    host_errors_are_numerical: bool = False
    """A ValueError from the native function is a NumericalError (not a runtime failure)."""
    check: Callable[[str, Mapping[str, Any]], SolverReport | None] | None = None
    """(node id, the extra outputs a device recording returned, read back) -> the solver's
    report, if any; raises NumericalError when they show the result undefined."""
    vulkan: str | None = None
    """"module:function" of the Vulkan recording of an op another package adds (gpulab's own
    are in gpulab.kernels.op_recordings): (Recording, array input by name, inputs, out,
    params) -> its extra outputs by name."""
    one_binding: bool = False
    """Each input must fit one storage binding on Vulkan (the vector ops split beyond it)."""
    node_form: NodeForm | None = None
    """A node form of its own (`"op": "kernel"`): each node gets its own spec (inputs and
    shape rule) and params from its JSON, which may have the keys `node_keys` besides the
    common ones. Such an op is not listed among the ops (schema enum, selftest, bench)."""
    fusion: Fusion | None = None
    """How the op fuses with its neighbours on Vulkan, or None: it runs as its own dispatches."""
    node_keys: tuple[str, ...] = ()
    node_schema: Mapping[str, Any] | None = None
    node_files: tuple[tuple[str, str], ...] = ()
    """The files such a node names, relative to the graph file, as (key, key within it):
    `gpulab submit` copies them into the job directory with the graph."""
    """The JSON Schema of such a node's own keys and inputs (the `then` of its op's branch)."""

    @property
    def name(self) -> str:
        return self.spec.name

    @cached_property
    def reference_function(self) -> Callable[..., Any]:
        """The numpy reference, imported on first use."""
        function: Callable[..., Any] = resolve(self.reference)
        return function

    def host_call(
        self, functions: Callable[[str], Callable[..., Any]], arguments: dict[str, Any]
    ) -> tuple[Any, SolverReport | None]:
        """Run the op on a host backend whose functions are `functions(name)`."""
        if self.host is None:
            return functions(self.name)(**arguments), None
        value, report = self.host(functions, arguments)
        return value, report

    def checked(self, node: str, extras: Mapping[str, Any]) -> SolverReport | None:
        """The solver report of a device run from its extra outputs (NumericalError when they
        show the result undefined)."""
        return self.check(node, extras) if self.check is not None else None
