"""Buffers: creation, memory requirements and binding to device memory."""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any

from gpulab.vk._binding import vk
from gpulab.vk._handle import VkObject
from gpulab.vk.memory import DeviceMemory

if TYPE_CHECKING:
    from gpulab.vk.device import Device

STORAGE = 0x20  # VK_BUFFER_USAGE_STORAGE_BUFFER_BIT
TRANSFER_SRC = 0x01
TRANSFER_DST = 0x02


def closed_buffers() -> int:
    """How many buffers this process has closed so far: a cache of things that point at
    buffers (descriptor sets) has to look at its entries again only when this changed."""
    return Buffer.closures


class Buffer(VkObject):
    """A VkBuffer. Bind it to memory with `bind()`; the buffer keeps that memory referenced.

    `next_info` is an extension struct for VkBufferCreateInfo.pNext (say, external memory).
    """

    closures = 0
    """Buffers closed in this process (see closed_buffers())."""

    def __init__(
        self, device: Device, size: int, usage: int = STORAGE, next_info: Any = None
    ) -> None:
        if size <= 0:
            raise ValueError(f"buffer size must be positive, got {size}")
        info = vk.VkBufferCreateInfo(
            pNext=next_info, size=size, usage=usage, sharingMode=vk.VK_SHARING_MODE_EXCLUSIVE
        )
        raw = vk.vkCreateBuffer(device.raw, info, None)
        self._own(raw, functools.partial(vk.vkDestroyBuffer, device.raw, raw, None), device)
        self.device = device
        self.size = size
        self.usage = usage
        requirements = vk.vkGetBufferMemoryRequirements(device.raw, raw)
        self.required_size: int = requirements.size
        self.alignment: int = requirements.alignment
        self.memory_type_bits: int = requirements.memoryTypeBits
        self.memory: DeviceMemory | None = None

    def bind(self, memory: DeviceMemory, offset: int = 0) -> None:
        """Bind to `memory` at `offset` (once, as Vulkan allows)."""
        if self.memory is not None:
            raise ValueError(f"{self!r} is already bound to memory")
        if offset % self.alignment or offset + self.required_size > memory.size:
            raise ValueError(
                f"cannot bind {self.required_size} bytes at offset {offset} "
                f"(alignment {self.alignment}) in {memory.size}-byte memory"
            )
        vk.vkBindBufferMemory(self.device.raw, self.raw, memory.raw, offset)
        self.memory = memory

    def close(self) -> None:
        """Destroy the buffer (counted by closed_buffers()). A second call does nothing."""
        if not self.closed:
            Buffer.closures += 1
        super().close()
