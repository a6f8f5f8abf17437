"""GpuComputePipeline: the high-level value * 2 kernel on a Vulkan device."""

from __future__ import annotations

import contextlib
import math
from typing import Any

import numpy as np
import numpy.typing as npt

from gpulab.kernels.session import DeviceSession
from gpulab.memory import allocate_dedicated
from gpulab.vk import (
    Closeable,
    DescriptorPool,
    DescriptorSet,
    DescriptorSetLayout,
    Device,
    DeviceInfo,
    Instance,
    pack_push_constants,
)

SHADER = "times_two"
WORKGROUP_SIZE = 256


class _IoBuffers:
    """Input and output buffers for up to `capacity` elements, bound in chunks, with a
    persistent float32 view of each.

    One descriptor set per chunk, from a pool of its own (released with the buffers): a
    binding may not exceed the device's max storage buffer range (128 MiB on lavapipe).
    """

    def __init__(
        self, device: Device, set_layout: DescriptorSetLayout, capacity: int, chunk: int
    ) -> None:
        self.capacity = capacity
        self.chunk = chunk
        chunks = math.ceil(capacity / chunk)
        self._owned = contextlib.ExitStack()
        try:
            # The host writes the input (device-local where the host can map such memory) and
            # reads the output back through cached memory where there is such (discrete GPUs).
            self.input = self._owned.enter_context(
                allocate_dedicated(device, 4 * capacity, "mapped", label="compute input")
            )
            self.output = self._owned.enter_context(
                allocate_dedicated(device, 4 * capacity, "readback", label="compute output")
            )
            pool = self._owned.enter_context(DescriptorPool(device, chunks, 2 * chunks))
            self.sets: list[DescriptorSet] = []
            for first in range(0, capacity, chunk):
                size = 4 * min(chunk, capacity - first)
                descriptor_set = pool.allocate(set_layout)
                descriptor_set.write_buffers(
                    [(self.input.buffer, 4 * first, size), (self.output.buffer, 4 * first, size)]
                )
                self.sets.append(descriptor_set)
            self.input_view: npt.NDArray[np.float32] = self.input.view(np.float32, capacity)
            self.output_view: npt.NDArray[np.float32] = self.output.view(np.float32, capacity)
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        # The views go first: freeing the memory unmaps it under them.
        for view in ("input_view", "output_view"):
            vars(self).pop(view, None)
        self._owned.close()


def _chunk_elements(info: DeviceInfo, max_binding_bytes: int | None) -> int:
    """Elements per binding: within the device's range, at an offset alignment it accepts."""
    limit = info.max_storage_buffer_range
    if max_binding_bytes is not None:
        limit = min(limit, max_binding_bytes)
    step = math.lcm(4, info.min_storage_buffer_offset_alignment)
    chunk_bytes = limit - limit % step
    if chunk_bytes <= 0:
        raise ValueError(f"a binding of {limit} bytes cannot hold one aligned chunk")
    return chunk_bytes // 4


class GpuComputePipeline(Closeable):
    """Doubles float32 arrays on a Vulkan device: `GpuComputePipeline().execute(x) == 2 * x`.

    The pipeline owns a DeviceSession (gpulab.kernels.session) on device `device_index` of
    `instance` (default: the process-wide shared instance; GPULAB_VK_VALIDATION=1 turns
    validation on): its kernels' catalog makes the shader's pipeline and layouts once, its
    submitter's command buffer is recorded once per input size and
    resubmitted. Input/output buffers are sized to the input and reused while large enough.
    Use as a context manager or call close().
    """

    def __init__(
        self,
        device_index: int = 0,
        *,
        instance: Instance | None = None,
        max_binding_bytes: int | None = None,
    ) -> None:
        session = DeviceSession(device_index, instance=instance)
        try:
            info = session.info
            self._workgroup_size = min(
                WORKGROUP_SIZE, info.max_workgroup_size[0], info.max_workgroup_invocations
            )
            self._max_groups = info.max_workgroup_count[0]
            self._chunk = _chunk_elements(info, max_binding_bytes)
            catalog = session.kernels.catalog
            self._set_layout, self._layout = catalog.layout(2)
            self._pipeline = catalog.pipeline(SHADER, 2, {0: self._workgroup_size})
        except BaseException:
            session.close()
            raise
        self.session = session
        self.device = session.device
        self._io: _IoBuffers | None = None
        self._recorded_n = 0

    @property
    def info(self) -> DeviceInfo:
        """The properties of the device the pipeline runs on."""
        return self.device.info

    def execute(self, values: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
        """2 * values, computed on the device, as a new array of the same shape."""
        array = self._checked_input(values)
        n = array.size
        io = self._buffers_for(n)
        if self._recorded_n != n:
            self._record(io, n)
        io.input_view[:n] = array.reshape(-1)
        self.session.submitter.submit()
        result: npt.NDArray[np.float32] = io.output_view[:n].copy().reshape(array.shape)
        return result

    def _checked_input(self, values: Any) -> npt.NDArray[np.float32]:
        _ = self.device.raw  # raises ObjectClosedError after close()
        if not isinstance(values, np.ndarray):
            raise TypeError(f"execute() expects a numpy float32 array, got {type(values).__name__}")
        if values.dtype != np.float32:
            raise TypeError(
                f"execute() expects dtype float32, got {values.dtype}; "
                "convert with values.astype(numpy.float32)"
            )
        if values.size == 0:
            raise ValueError("execute() got an empty array; it needs at least one element")
        return np.ascontiguousarray(values)

    def _buffers_for(self, n: int) -> _IoBuffers:
        if self._io is None or self._io.capacity < n:
            if self._io is not None:
                self._io.close()
                self._io = None
            self._recorded_n = 0
            self._io = _IoBuffers(self.device, self._set_layout, n, self._chunk)
        return self._io

    def _record(self, io: _IoBuffers, n: int) -> None:
        command = self.session.submitter.command
        command.begin()
        command.bind_pipeline(self._pipeline)
        for index, first in enumerate(range(0, n, self._chunk)):
            count = min(self._chunk, n - first)
            command.bind_descriptor_sets(self._layout, [io.sets[index]])
            command.push_constants(self._layout, pack_push_constants(count))
            command.dispatch(min(math.ceil(count / self._workgroup_size), self._max_groups))
        command.barrier("compute", "host")
        command.end()
        self._recorded_n = n

    def close(self) -> None:
        """Release the buffers, then the session: every Vulkan object of the pipeline (the
        instance is shared, and stays)."""
        if self._io is not None:
            self._io.close()
            self._io = None
        self.session.close()
