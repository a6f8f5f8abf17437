"""Command pools and command buffers: record once, submit many times."""

from __future__ import annotations

import functools
import struct
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from gpulab.vk._binding import raw_lib, vk
from gpulab.vk._handle import VkObject

if TYPE_CHECKING:
    from gpulab.vk.buffer import Buffer
    from gpulab.vk.descriptors import DescriptorSet
    from gpulab.vk.device import Device
    from gpulab.vk.pipeline import ComputePipeline, PipelineLayout
    from gpulab.vk.query import TimestampQueryPool

_COMPUTE_BIND_POINT = 1  # VK_PIPELINE_BIND_POINT_COMPUTE
_COMPUTE_STAGE_BIT = 0x20  # VK_SHADER_STAGE_COMPUTE_BIT
_STAGE_COMPUTE = 0x800  # VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT
_STAGE_TRANSFER = 0x1000  # VK_PIPELINE_STAGE_TRANSFER_BIT
_STAGE_HOST = 0x4000  # VK_PIPELINE_STAGE_HOST_BIT
_STAGE_BOTTOM = 0x2000  # VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT
_ACCESS_SHADER_READ = 0x20
_ACCESS_SHADER_WRITE = 0x40
_ACCESS_TRANSFER_READ = 0x800
_ACCESS_TRANSFER_WRITE = 0x1000
_ACCESS_HOST_READ = 0x2000
_ACCESS_HOST_WRITE = 0x4000
_RESET_COMMAND_BUFFER = 0x2  # VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT
_PRIMARY = 0  # VK_COMMAND_BUFFER_LEVEL_PRIMARY
UPDATE_LIMIT = 65536
"""The most bytes one vkCmdUpdateBuffer writes (the Vulkan limit)."""

STAGES = {"compute": _STAGE_COMPUTE, "transfer": _STAGE_TRANSFER, "host": _STAGE_HOST}
"""Barrier endpoints by name, with the accesses each side makes."""
_ACCESS_AFTER = {
    "compute": _ACCESS_SHADER_WRITE,
    "transfer": _ACCESS_TRANSFER_WRITE,
    "host": _ACCESS_HOST_WRITE,
}
_ACCESS_BEFORE = {
    "compute": _ACCESS_SHADER_READ | _ACCESS_SHADER_WRITE,
    "transfer": _ACCESS_TRANSFER_READ | _ACCESS_TRANSFER_WRITE,
    "host": _ACCESS_HOST_READ,
}
_barriers: dict[tuple[str, str], tuple[int, int, Any]] = {}
"""(source stage, target stage, VkMemoryBarrier) of each (after, before) pair, built on first
use: recording only points at the struct (vkCmdPipelineBarrier copies what it needs)."""


def _memory_barrier(after: str, before: str) -> tuple[int, int, Any]:
    memory_barrier = vk.ffi.new(
        "VkMemoryBarrier*",
        {
            "sType": vk.VK_STRUCTURE_TYPE_MEMORY_BARRIER,
            "srcAccessMask": _ACCESS_AFTER[after],
            "dstAccessMask": _ACCESS_BEFORE[before],
        },
    )
    found = _barriers[(after, before)] = (STAGES[after], STAGES[before], memory_barrier)
    return found


class CommandPool(VkObject):
    """A command pool on the device's queue family; its buffers can be reset one by one."""

    def __init__(self, device: Device) -> None:
        info = vk.VkCommandPoolCreateInfo(
            flags=_RESET_COMMAND_BUFFER, queueFamilyIndex=device.queue_family
        )
        raw = vk.vkCreateCommandPool(device.raw, info, None)
        self._own(raw, functools.partial(vk.vkDestroyCommandPool, device.raw, raw, None), device)
        self.device = device

    def allocate(self) -> CommandBuffer:
        """One primary command buffer from this pool."""
        return CommandBuffer(self)


class CommandBuffer(VkObject):
    """A primary command buffer, owned by its pool.

    Record between `begin()` and `end()`; the recording can be submitted again and again
    (Device.submit) until `begin()` starts a new one. Objects used by the recording are kept
    referenced until then.

    The recording methods call the loader directly with prebuilt cffi structs (the binding's
    per-call struct builders were most of the cost of recording), and skip binding a pipeline
    or a descriptor set that is bound already.
    """

    def __init__(self, pool: CommandPool) -> None:
        device = pool.device
        info = vk.VkCommandBufferAllocateInfo(
            commandPool=pool.raw, level=_PRIMARY, commandBufferCount=1
        )
        raw = vk.vkAllocateCommandBuffers(device.raw, info)[0]
        destroy = functools.partial(vk.vkFreeCommandBuffers, device.raw, pool.raw, 1, [raw])
        self._own(raw, destroy, pool)
        self.device = device
        self.recorded = False
        self._submit_info: Any = None
        self._array = vk.ffi.new("VkCommandBuffer[1]", [raw])
        self._lib = raw_lib()
        self._used: list[object] = []
        self._pipeline: ComputePipeline | None = None
        self._sets: tuple[PipelineLayout, tuple[DescriptorSet, ...]] | None = None

    def begin(self) -> None:
        """Start a new recording (replacing the previous one)."""
        self._used = []
        self._pipeline, self._sets = None, None
        self.recorded = False
        vk.vkBeginCommandBuffer(self.raw, vk.VkCommandBufferBeginInfo())

    def end(self) -> None:
        """Finish the recording; it can now be submitted."""
        vk.vkEndCommandBuffer(self.raw)
        # Built once per recording: resubmission then costs no struct building.
        self._submit_info = vk.ffi.new(
            "VkSubmitInfo*",
            {
                "sType": vk.VK_STRUCTURE_TYPE_SUBMIT_INFO,
                "commandBufferCount": 1,
                "pCommandBuffers": self._array,
            },
        )
        self.recorded = True

    def submit_info(self) -> Any:
        """The VkSubmitInfo of the finished recording."""
        _ = self.raw
        if not self.recorded:
            raise ValueError(f"{self!r} has no finished recording to submit")
        return self._submit_info

    def bind_pipeline(self, pipeline: ComputePipeline) -> None:
        """Bind a compute pipeline (nothing to record when it is bound already)."""
        raw = self.raw
        if pipeline is self._pipeline:
            return
        self._lib.vkCmdBindPipeline(raw, _COMPUTE_BIND_POINT, pipeline.raw)
        self._used.append(pipeline)
        self._pipeline = pipeline

    def bind_descriptor_sets(
        self, layout: PipelineLayout, sets: Sequence[DescriptorSet], first_set: int = 0
    ) -> None:
        """Bind descriptor sets for compute (nothing to record when these are bound already
        with this layout: binding a pipeline leaves bound sets alone)."""
        raw = self.raw
        bound = (layout, tuple(sets))
        if first_set == 0 and bound == self._sets:
            return
        if len(sets) == 1:
            raw_sets = sets[0].raw_array
        else:
            raw_sets = vk.ffi.new("VkDescriptorSet[]", [s.raw for s in sets])
        self._lib.vkCmdBindDescriptorSets(
            raw, _COMPUTE_BIND_POINT, layout.raw, first_set, len(sets), raw_sets, 0, vk.ffi.NULL
        )
        self._used.extend(sets)
        self._sets = bound if first_set == 0 else None

    def push_constants(self, layout: PipelineLayout, data: bytes, offset: int = 0) -> None:
        """Push constant bytes (see `pack_push_constants`); recorded by value."""
        # cffi passes bytes to a void* parameter as a pointer to their contents.
        self._lib.vkCmdPushConstants(
            self.raw, layout.raw, _COMPUTE_STAGE_BIT, offset, len(data), data
        )

    def dispatch(self, x: int, y: int = 1, z: int = 1) -> None:
        """Dispatch x*y*z workgroups of the bound pipeline."""
        self._lib.vkCmdDispatch(self.raw, x, y, z)

    def copy_buffer(
        self, source: Buffer, target: Buffer, size: int, src_offset: int = 0, dst_offset: int = 0
    ) -> None:
        """Copy `size` bytes between buffers."""
        self._used.extend((source, target))
        region = vk.VkBufferCopy(srcOffset=src_offset, dstOffset=dst_offset, size=size)
        vk.vkCmdCopyBuffer(self.raw, source.raw, target.raw, 1, [region])

    def update_buffer(self, target: Buffer, data: bytes, offset: int = 0) -> None:
        """Write `data` into `target` at `offset`, carried in the recording itself
        (vkCmdUpdateBuffer: at most UPDATE_LIMIT bytes, size and offset multiples of 4)."""
        if len(data) > UPDATE_LIMIT or len(data) % 4 or offset % 4 or not data:
            raise ValueError(
                f"vkCmdUpdateBuffer takes 4 to {UPDATE_LIMIT} bytes in multiples of 4 at an "
                f"offset that is one, got {len(data)} at {offset}"
            )
        self._used.append(target)
        self._lib.vkCmdUpdateBuffer(self.raw, target.raw, offset, len(data), data)

    def barrier(self, after: str, before: str) -> None:
        """A global memory barrier: writes by stage `after` are visible to stage `before`.

        Stages: "compute", "transfer", "host" (as in STAGES).
        """
        found = _barriers.get((after, before)) or _memory_barrier(after, before)
        source, target, memory_barrier = found
        null = vk.ffi.NULL
        self._lib.vkCmdPipelineBarrier(
            self.raw, source, target, 0, 1, memory_barrier, 0, null, 0, null
        )

    def reset_queries(
        self, pool: TimestampQueryPool, first: int = 0, count: int | None = None
    ) -> None:
        """Reset queries before writing them in this recording."""
        self._used.append(pool)
        count = pool.count - first if count is None else count
        vk.vkCmdResetQueryPool(self.raw, pool.raw, first, count)

    def write_timestamp(self, pool: TimestampQueryPool, query: int) -> None:
        """Write a timestamp once all earlier commands have completed."""
        self._lib.vkCmdWriteTimestamp(self.raw, _STAGE_BOTTOM, pool.raw, query)


def pack_push_constants(*values: int | float) -> bytes:
    """Push constant bytes: ints as uint32, floats as float32, in order."""
    return b"".join(
        struct.pack("<f", v) if isinstance(v, float) else struct.pack("<I", v & 0xFFFFFFFF)
        for v in values
    )
