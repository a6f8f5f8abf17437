"""Each op's dispatches on Vulkan, registered by op name: the kernels' side of the op entries
(gpulab.ops.entries; kernels sit beside ops, so they register here and Kernels.record reads
this table). A recording returns its extra outputs by name (`Extra`: the array the dispatches
leave them in, and how to read it back), which the op's entry checks after the run.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any, NamedTuple

import numpy as np
import numpy.typing as npt

from gpulab.kernels._recording import Input, Recording, Reduction
from gpulab.kernels.array import FLOAT_BYTES, DeviceArray
from gpulab.kernels.jacobi_status import solver_report
from gpulab.ops.entry import resolve
from gpulab.ops.registry import entry


class Extra(NamedTuple):
    """An extra output of a recorded op: where the dispatches leave it, and how to read it."""

    array: DeviceArray
    read: Callable[[npt.NDArray[np.float32], Mapping[str, Any]], Any]
    """(the array as read back, the node's params) -> the value the op's entry checks."""


Extras = Mapping[str, Extra]
NO_EXTRAS: Extras = MappingProxyType({})
Array = Callable[[str], DeviceArray]
"""An input by name, which must be a device array."""
OpRecording = Callable[
    [Recording, Array, Mapping[str, Input], DeviceArray, Mapping[str, Any]], Extras
]
"""(recording, array input by name, inputs, out, params) -> the extra outputs."""

_REDUCTIONS = {
    "sum": Reduction(0, 0),
    "min": Reduction(1, 1, needs_elements=True),
    "max": Reduction(2, 2, needs_elements=True),
    "dot": Reduction(3, 0),
    "l2_norm": Reduction(4, 0, root=True),
}
REDUCTIONS = {name: reduction.first for name, reduction in _REDUCTIONS.items()}
"""reduce.glsl's OP codes of the first pass, by op."""


def _elementwise(y: bool, a: bool) -> OpRecording:
    def record(
        r: Recording,
        array: Array,
        inputs: Mapping[str, Input],
        out: DeviceArray,
        params: Mapping[str, Any],
    ) -> Extras:
        r.elementwise(
            array("x"), array("y") if y else None, inputs["a"] if a else 1.0, out, divide=False
        )
        return NO_EXTRAS

    return record


def _reduction(name: str, y: bool) -> OpRecording:
    def record(
        r: Recording,
        array: Array,
        inputs: Mapping[str, Input],
        out: DeviceArray,
        params: Mapping[str, Any],
    ) -> Extras:
        r.reduce(name, _REDUCTIONS[name], array("x"), array("y") if y else None, out)
        return NO_EXTRAS

    return record


def _normalize(
    r: Recording,
    array: Array,
    inputs: Mapping[str, Input],
    out: DeviceArray,
    params: Mapping[str, Any],
) -> Extras:
    """The norm into scratch, then x divided by it; the norm is returned (zero is an error)."""
    x = array("x")
    area = r.scratch(FLOAT_BYTES, "normalize")
    norm = DeviceArray(area.buffer, (), area.offset)
    r.reduce("l2_norm", _REDUCTIONS["l2_norm"], x, None, norm)
    r.elementwise(x, None, norm, out, divide=True)
    return {"norm": Extra(norm, lambda value, params: float(value))}


def _jacobi(
    r: Recording,
    array: Array,
    inputs: Mapping[str, Input],
    out: DeviceArray,
    params: Mapping[str, Any],
) -> Extras:
    """The steps; the status words are returned, read as the solver's report."""
    status = r.jacobi(array("A"), array("b"), out, params)
    return {
        "solver": Extra(status, lambda value, params: solver_report(value, params.get("tolerance")))
    }


def _matvec(
    r: Recording,
    array: Array,
    inputs: Mapping[str, Input],
    out: DeviceArray,
    params: Mapping[str, Any],
) -> Extras:
    r.matvec(array("A"), array("x"), out)
    return NO_EXTRAS


def _matmul(
    r: Recording,
    array: Array,
    inputs: Mapping[str, Input],
    out: DeviceArray,
    params: Mapping[str, Any],
) -> Extras:
    r.matmul(array("A"), array("B"), out)
    return NO_EXTRAS


def _copy(
    r: Recording,
    array: Array,
    inputs: Mapping[str, Input],
    out: DeviceArray,
    params: Mapping[str, Any],
) -> Extras:
    r.copy(array("x"), out)
    return NO_EXTRAS


def _fill(
    r: Recording,
    array: Array,
    inputs: Mapping[str, Input],
    out: DeviceArray,
    params: Mapping[str, Any],
) -> Extras:
    value = inputs.get("value", 0.0)
    if isinstance(value, DeviceArray):
        raise ValueError("fill: value must be a number")
    step, period = float(params.get("step", 0.0)), int(params.get("period", 1))
    r.fill(out, float(value), step, max(period, 1))
    return NO_EXTRAS


def _user_kernel(
    r: Recording,
    array: Array,
    inputs: Mapping[str, Input],
    out: DeviceArray,
    params: Mapping[str, Any],
) -> Extras:
    """A user's shader (gpulab.ops.user_kernel): its arrays, then the output, as bindings;
    its numbers as push constants; one invocation per output element."""
    kernel = params["kernel"]
    scalars = []
    for name in kernel.scalars:
        value = inputs[name]
        if isinstance(value, DeviceArray):
            raise ValueError(f"kernel {kernel.name}: scalar input {name!r} must be a number")
        scalars.append(float(value))
    bindings = [array(name).binding() for name in kernel.arrays] + [out.binding()]
    reflection = kernel.reflection
    r.user_kernel(
        kernel.key,
        kernel.spirv,
        bindings,
        local_x=reflection.local_size[0],
        scalars=scalars,
        out=out,
        per_invocation=reflection.floats_per_invocation(len(kernel.arrays)),
        grid=reflection.reads_workgroup_count,
    )
    return NO_EXTRAS


RECORDINGS: Mapping[str, OpRecording] = {
    "add": _elementwise(y=True, a=False),
    "scale": _elementwise(y=False, a=True),
    "saxpy": _elementwise(y=True, a=True),
    **{name: _reduction(name, y=name == "dot") for name in _REDUCTIONS},
    "normalize": _normalize,
    "matvec": _matvec,
    "matmul": _matmul,
    "jacobi": _jacobi,
    "copy": _copy,
    "fill": _fill,
    "kernel": _user_kernel,
}
"""Each op's recording on Vulkan, by name (the contract's ops and copy and fill)."""

IN_PLACE = frozenset({"add", "scale", "saxpy", "normalize"})
"""The ops whose recording may write its result over one of its inputs: each is
Recording.elementwise (shaders/elementwise.comp), which reads element i (or vec4 i) of every
input before it writes element i of the result, in the same invocation (normalize's norm is a
pass of its own before). Every other recording writes apart: matvec reads all of x for each
element, a user's or a package's kernel could read anything."""


def has_recording(op: str) -> bool:
    """Whether `op` can be recorded."""
    return op in RECORDINGS or entry(op).vulkan is not None


def recording_of(op: str) -> OpRecording:
    """The recording of `op`: gpulab's, or the one its entry names (an op another package
    adds: OpEntry.vulkan); ValueError when it has none."""
    found = RECORDINGS.get(op)
    if found is not None:
        return found
    path = entry(op).vulkan
    if path is None:
        raise ValueError(f"{op} has no Vulkan recording (run it on cpu or native)")
    recording: OpRecording = resolve(path)
    return recording
