"""Import a numpy array's own pages as device-visible memory (VK_EXT_external_memory_host).

The device's copy engine can then read or write the array directly: no staging ring and no
host copy. The price is the import itself (the driver pins and maps every page), paid on
each transfer since numpy may reuse the memory afterwards; the Stager only takes this path
when measured faster (see Stager.import_above).

The imported range is the array's bytes widened to minImportedHostPointerAlignment. Only
when that alignment is at most the page size is the widened range certain to be mapped; on
other devices `HostImporter.usable` is False.
"""

from __future__ import annotations

import mmap
from typing import Any

import numpy.typing as npt

from gpulab.vk import Buffer, Device
from gpulab.vk._binding import vk
from gpulab.vk.buffer import TRANSFER_DST, TRANSFER_SRC

EXTENSION = "VK_EXT_external_memory_host"
HOST_ALLOCATION = 0x80  # VK_EXTERNAL_MEMORY_HANDLE_TYPE_HOST_ALLOCATION_BIT_EXT
_STRUCTURE_EXTERNAL_HOST_PROPERTIES = 1000178002


def import_alignment(device: Device) -> int:
    """minImportedHostPointerAlignment of the device (0 when the extension is not enabled)."""
    if EXTENSION not in device.extensions:
        return 0
    host = vk.ffi.new("VkPhysicalDeviceExternalMemoryHostPropertiesEXT*")
    host.sType = _STRUCTURE_EXTERNAL_HOST_PROPERTIES
    properties = vk.ffi.new("VkPhysicalDeviceProperties2*")
    properties.sType = vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2
    properties.pNext = host
    vk.lib.vkGetPhysicalDeviceProperties2(device.physical_device.raw, properties)
    return int(host.minImportedHostPointerAlignment)


class ImportedArray:
    """A buffer over the pages of one numpy array; `offset` is where the array starts in it."""

    def __init__(self, buffer: Any, memory: Any, offset: int, device: Device) -> None:
        self.buffer = buffer
        self.offset = offset
        self._memory = memory
        self._device = device

    def close(self) -> None:
        """Destroy the buffer and release the import (the pages are unpinned)."""
        if self._memory is not None:
            self.buffer.close()
            vk.vkFreeMemory(self._device.raw, self._memory, None)
            self._memory = None

    def __enter__(self) -> ImportedArray:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


class HostImporter:
    """Imports arrays on one device (see the module docstring)."""

    def __init__(self, device: Device) -> None:
        self.device = device
        self.alignment = import_alignment(device)
        self.usable = 0 < self.alignment <= mmap.PAGESIZE
        self._properties: Any = None
        if self.usable:
            self._properties = vk.vkGetDeviceProcAddr(
                device.raw, "vkGetMemoryHostPointerPropertiesEXT"
            )

    def import_array(self, array: npt.NDArray[Any]) -> ImportedArray:
        """Import the pages under a C-contiguous array; close the result when done."""
        if not self.usable:
            raise ValueError(f"{self.device.info.name} cannot import host memory")
        if not array.flags.c_contiguous or array.nbytes == 0:
            raise ValueError("only a non-empty C-contiguous array can be imported")
        address = int(array.ctypes.data)
        start = address - address % self.alignment
        end = -(-(address + array.nbytes) // self.alignment) * self.alignment
        size = end - start
        pointer = vk.ffi.cast("void*", start)
        host_bits = self._properties(self.device.raw, HOST_ALLOCATION, pointer).memoryTypeBits
        external = vk.VkExternalMemoryBufferCreateInfo(handleTypes=HOST_ALLOCATION)
        buffer = Buffer(self.device, size, TRANSFER_SRC | TRANSFER_DST, next_info=external)
        try:
            bits = buffer.memory_type_bits & host_bits
            if not bits or buffer.required_size > size:
                raise ValueError(
                    f"no memory type can import these {size} bytes "
                    f"(buffer types {buffer.memory_type_bits:#x}, host types {host_bits:#x})"
                )
            index = (bits & -bits).bit_length() - 1
            imported = vk.VkImportMemoryHostPointerInfoEXT(
                handleType=HOST_ALLOCATION, pHostPointer=pointer
            )
            info = vk.VkMemoryAllocateInfo(
                pNext=imported, allocationSize=size, memoryTypeIndex=index
            )
            memory = vk.vkAllocateMemory(self.device.raw, info, None)
        except BaseException:
            buffer.close()
            raise
        try:
            vk.vkBindBufferMemory(self.device.raw, buffer.raw, memory, 0)
        except BaseException:
            buffer.close()
            vk.vkFreeMemory(self.device.raw, memory, None)
            raise
        return ImportedArray(buffer, memory, address - start, self.device)
