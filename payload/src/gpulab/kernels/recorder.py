"""Kernels: the contract's ops recorded into a command buffer, on device-resident arrays."""

from __future__ import annotations

import contextlib
import functools
import math
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, NamedTuple

import numpy as np

from gpulab.kernels import fused
from gpulab.kernels._recording import Input, Recording, Reduction, Scratch
from gpulab.kernels.array import FLOAT_BYTES, DeviceArray, OwnedArray
from gpulab.kernels.generate import Pattern, record_pattern, unsupported
from gpulab.kernels.op_recordings import (
    IN_PLACE,
    NO_EXTRAS,
    Extra,
    Extras,
    has_recording,
    recording_of,
)
from gpulab.kernels.pipelines import PUSH_CONSTANT_BYTES, Geometry, PipelineCatalog, geometry
from gpulab.ops.registry import entry, find, result_shape
from gpulab.vk import Closeable, CommandBuffer, Device, Submitter

EXTRA_OPS = ("copy", "fill")
"""Ops beyond the contract: copy (x -> out, a multiple of 4 elements: bench's bandwidth
ceiling) and fill (out[i] = value + step * (i % period); inputs {"value": v}, params step and
period)."""


class Recorded(NamedTuple):
    """What `Kernels.record` added to the command buffer (a NamedTuple: made per record())."""

    dispatches: int
    status: DeviceArray | None = None
    """The array of the `solver` extra (jacobi's 8-word status, uint32 bits; word 4 counts
    the steps that ran)."""
    extras: Extras = NO_EXTRAS
    """The op's extra outputs by name (normalize's norm, jacobi's solver status), to read
    back after the run and hand to the op's entry (OpEntry.checked)."""


class RecordedGroup(NamedTuple):
    """What `Kernels.record_fused` added: its dispatches, and the extra outputs of its steps
    by step id (the prepared scalars: normalize's norm)."""

    dispatches: int
    extras: Mapping[str, Extras]


def _scalar(value: Any, params: Mapping[str, Any]) -> float:
    return float(value)


class Kernels(Closeable):
    """Records the contract's ops on one device; pipelines are made on first use and cached.

    `record()` appends an op's dispatches to a command buffer, reading and writing DeviceArrays
    (so intermediates stay on the device); `run()` is the convenience that uploads numpy
    inputs, records, submits and reads the result back. Close with close() or `with`.
    """

    def __init__(
        self,
        device: Device,
        *,
        max_binding_bytes: int | None = None,
        subgroups: bool | None = None,
    ) -> None:
        """`max_binding_bytes` (below the device's range) and `subgroups=False` (the
        shared-memory builds even where subgroup arithmetic exists) exercise the other paths
        of the kernels in tests."""
        self.device = device
        self.geometry: Geometry = geometry(device, max_binding_bytes, subgroups)
        self._catalog = PipelineCatalog(device, self.geometry)
        self._offset_alignment = device.info.min_storage_buffer_offset_alignment
        self._alignment = math.lcm(16, self._offset_alignment)
        self._gathered: list[str] | None = None

    @property
    def catalog(self) -> PipelineCatalog:
        """The pipelines, layouts and descriptor sets made for these kernels (owned here)."""
        return self._catalog

    # --- the recording API -------------------------------------------------------------

    def record(
        self,
        cmd: CommandBuffer,
        op: str,
        inputs: Mapping[str, Input],
        out: DeviceArray,
        *,
        params: Mapping[str, Any] | None = None,
        scratch: Scratch | None = None,
    ) -> Recorded:
        """Append `op` on `inputs` into `out` to `cmd` (between begin() and end()).

        Ends with a compute->compute barrier, so that the next record() can read `out`.
        """
        options = dict(params) if params else {}
        self._check(op, inputs, out)
        recording = Recording(self._catalog, cmd, scratch, self._alignment)

        def array(name: str) -> DeviceArray:
            value = inputs[name]
            if not isinstance(value, DeviceArray):
                raise ValueError(f"{op}: input {name!r} must be a device array, got a number")
            return value

        extras = recording_of(op)(recording, array, inputs, out, options)
        solver = extras.get("solver")
        return Recorded(recording.dispatches, solver.array if solver else None, extras)

    def cannot_fuse(self, count: int, numbers: int, reduces: bool) -> str | None:
        """Why this device cannot record a fused group (gpulab.kernels.fused) over `count`
        elements taking `numbers` numbers as one shader, or None: no GLSL compiler, empty
        vectors, vectors beyond one storage binding, more numbers than push constants hold."""
        why = fused.unavailable()
        if why is not None:
            return why
        if count == 0:
            return "empty vectors"
        if count > self.geometry.binding_elements:
            return "vectors larger than one storage binding"
        if fused.push_bytes(numbers, reduces) > PUSH_CONSTANT_BYTES:
            return "more numbers than the push constants hold"
        return None

    def record_fused(
        self,
        cmd: CommandBuffer,
        steps: Sequence[fused.Step],
        *,
        scratch: Scratch | None = None,
        given: Mapping[tuple[str, str], DeviceArray] | None = None,
    ) -> RecordedGroup:
        """Append a fused group (`cannot_fuse` first): each step's prepared scalars (a pass of
        their own each), then the group's shader (and a reduction's combining passes), then a
        compute->compute barrier. The last step is the anchor, whose `out` receives its value;
        the other steps with an `out` are written too. The prepared scalars are returned as
        the extra outputs of their steps (normalize's norm, which its entry checks); those in
        `given` (by step id and name) are read from there instead of computed again."""
        recording = Recording(self._catalog, cmd, scratch, self._alignment)
        extras: dict[str, Extras] = {}
        ready = []
        for step in steps:
            inputs = dict(step.inputs)
            kept: dict[str, Extra] = {}
            for name, prepared in step.fusion.prepared:
                known = (given or {}).get((step.id, name))
                if known is not None:  # computed before, by a node of the same reduction
                    inputs[name] = known
                    kept[name] = Extra(known, _scalar)
                    continue
                area = recording.scratch(FLOAT_BYTES, "a fused group")
                value = DeviceArray(area.buffer, (), area.offset)
                own = {
                    key: v for key, v in step.inputs.items() if f"{{{key}}}" in prepared.expression
                }
                if any(isinstance(v, str) for v in own.values()):
                    raise ValueError(f"{step.id}: a prepared scalar's inputs must be in memory")
                self._record_shader(
                    recording, [fused.Step(f"{step.id}.{name}", prepared, own, value)]
                )
                inputs[name] = value
                kept[name] = Extra(value, _scalar)
            if kept:
                extras[step.id] = kept
            ready.append(step._replace(inputs=inputs))
        self._record_shader(recording, ready)
        return RecordedGroup(recording.dispatches, extras)

    @contextlib.contextmanager
    def gathering(self) -> Iterator[list[str]]:
        """Within, a fused group's shader that was never compiled is not recorded: its source
        goes into the list instead, and the commands recorded meanwhile are incomplete. The
        caller compiles the list at once (fused.compile_ahead), then records again."""
        self._gathered = []
        try:
            yield self._gathered
        finally:
            self._gathered = None

    def _record_shader(self, recording: Recording, steps: Sequence[fused.Step]) -> None:
        made = fused.shader(steps, self.geometry.subgroup_arithmetic)
        if self._gathered is not None and not fused.is_compiled(made.source):
            self._gathered.append(made.source)
            return
        spirv = fused.spirv_of(made.source)
        for array in (*made.reads, *made.writes, *(step.out for step in steps if step.out)):
            if array.offset % self._offset_alignment:
                raise ValueError("a fused group's array is not aligned for a storage binding")
        reductions = []
        for index in made.reductions:
            step = steps[index]
            combine, out = step.fusion.combine, step.out
            assert combine is not None and out is not None, "a reduction step is written"
            reductions.append((Reduction(combine, combine, step.fusion.root), out))
        recording.fused(
            fused.pipeline_key(spirv),
            spirv,
            [array.binding() for array in (*made.reads, *made.writes)],
            numbers=made.numbers,
            count=_elements(steps),
            reductions=reductions,
        )

    def records(self, op: str) -> bool:
        """Whether this device can record `op` (an op another package adds may have no
        Vulkan recording)."""
        return has_recording(op)

    def writes_in_place(self, op: str) -> bool:
        """Whether `op`'s recording may write its result over one of its inputs
        (op_recordings.IN_PLACE)."""
        return op in IN_PLACE

    def generate(self, cmd: CommandBuffer, pattern: Pattern, out: DeviceArray) -> None:
        """Append the dispatches that fill `out` with `pattern` (see gpulab.kernels.generate),
        then a compute->compute barrier. Check `cannot_generate` first."""
        problem = self.cannot_generate(pattern, out.size)
        if problem is not None:
            raise ValueError(f"cannot generate {pattern!r} here: {problem}")
        record_pattern(Recording(self._catalog, cmd, None, self._alignment), pattern, out)

    def first_nonfinite(self, cmd: CommandBuffer, x: DeviceArray, first: DeviceArray) -> None:
        """Append the dispatches that set first[0] to the index of x's first NaN or infinity
        (NO_ELEMENT when there is none: the check of a .npy input's values on the device
        that read it), then a compute->compute barrier."""
        Recording(self._catalog, cmd, None, self._alignment).first_nonfinite(x, first)

    def cannot_generate(self, pattern: Pattern, count: int) -> str | None:
        """Why this device cannot make `pattern` over `count` elements bit for bit, or None."""
        return unsupported(pattern, self.device.features, count)

    def run(self, op: str, **arguments: Any) -> Any:
        """`op` on numpy inputs (and params, by name): the result as numpy (np.float32 for
        scalars). Uploads, records, submits, waits and reads back: for tests and selftest."""
        found = find(op)
        if found is None:
            raise ValueError(f"unknown op {op!r}")
        spec = found.spec
        names = spec.input_names
        missing = [name for name in names if name not in arguments]
        if missing:
            raise ValueError(f"{op}: missing input {missing[0]!r}")
        params = {key: value for key, value in arguments.items() if key not in names}
        owned: list[OwnedArray] = []

        def own(shape: tuple[int, ...], mappable: bool = True) -> OwnedArray:
            array = OwnedArray(self.device, shape, mappable=mappable)
            owned.append(array)
            return array

        def scratch(nbytes: int) -> DeviceArray:
            return own((max(1, math.ceil(nbytes / FLOAT_BYTES)),), mappable=False).array

        submitter = Submitter(self.device)
        try:
            inputs: dict[str, Input] = {}
            for name in names:
                value = arguments[name]
                if spec.input_kind(name).ndim == 0 and np.ndim(value) == 0:
                    inputs[name] = float(value)
                    continue
                host = np.asarray(value, dtype=np.float32)
                uploaded = own(host.shape)
                uploaded.write(host)
                inputs[name] = uploaded.array
            out = own(_result_shape(op, inputs))
            cmd = submitter.command
            cmd.begin()
            self.record(cmd, op, inputs, out.array, params=params, scratch=scratch)
            cmd.barrier("compute", "host")
            cmd.end()
            submitter.submit()
            result = out.read()
        finally:
            submitter.close()
            for array in owned:
                array.close()
        if result.shape == ():
            scalar: np.float32 = np.float32(result)
            return scalar
        return result

    def close(self) -> None:
        """Destroy the pipelines, layouts and descriptor pools (the device stays open)."""
        self._catalog.close()

    # --- checks ------------------------------------------------------------------------

    def _check(self, op: str, inputs: Mapping[str, Input], out: DeviceArray) -> None:
        alignment = self._offset_alignment
        for name, value in (*inputs.items(), ("out", out)):
            if isinstance(value, DeviceArray) and value.offset % alignment:
                raise ValueError(
                    f"{op}: {name!r} starts at byte {value.offset}, not a multiple of the "
                    f"device's storage buffer offset alignment ({alignment})"
                )
        if op in EXTRA_OPS:
            return
        found = find(op)
        if found is None:
            raise ValueError(f"unknown op {op!r}")
        if found.node_form is not None:
            return  # each node has its own inputs and shape, checked when its graph was validated
        names = found.spec.input_names
        shapes = []
        for name in names:
            if name not in inputs:
                raise ValueError(f"{op}: missing input {name!r}")
            value = inputs[name]
            shapes.append(value.shape if isinstance(value, DeviceArray) else ())
        expected = _shape_rule(op, tuple(shapes))
        if out.shape != expected:
            raise ValueError(f"{op}: out has shape {out.shape}, the result has {expected}")
        limit = FLOAT_BYTES * self.geometry.binding_elements
        if entry(op).one_binding:
            for name in names:
                value = inputs[name]
                if isinstance(value, DeviceArray) and value.nbytes > limit:
                    raise ValueError(
                        f"{op}: input {name!r} takes {value.nbytes} bytes, more than one storage "
                        f"binding of this device holds ({limit})"
                    )

    def elements_per_binding(self) -> int:
        """How many floats one storage binding holds (vector ops split beyond it)."""
        return self.geometry.binding_elements


def _elements(steps: Sequence[fused.Step]) -> int:
    """How many elements a fused group runs over: its vectors' length."""
    for step in steps:
        for value in (*step.inputs.values(), step.out):
            if isinstance(value, DeviceArray) and value.shape != ():
                return value.size
    return 0


def _shape(value: Input) -> tuple[int, ...]:
    return value.shape if isinstance(value, DeviceArray) else ()


def _result_shape(op: str, inputs: Mapping[str, Input]) -> tuple[int, ...]:
    """The op table's shape rule (which also checks the inputs); () for scalar results."""
    return _shape_rule(op, tuple(_shape(inputs[name]) for name in entry(op).spec.input_names))


@functools.lru_cache(maxsize=1024)
def _shape_rule(op: str, shapes: tuple[tuple[int, ...], ...]) -> tuple[int, ...]:
    """_result_shape for the input shapes in the op's order, remembered: recording checks
    the same shapes again and again (a ShapeError is raised, not remembered)."""
    shape = result_shape(op, dict(zip(entry(op).spec.input_names, shapes, strict=True)))
    return () if entry(op).spec.result.ndim == 0 else shape
