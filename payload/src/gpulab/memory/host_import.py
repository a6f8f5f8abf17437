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
from dataclasses import dataclass
from typing import Any

import numpy.typing as npt

from gpulab.vk import Buffer, Closeable, Device, DeviceMemory, HostMemoryImporter
from gpulab.vk.buffer import TRANSFER_DST, TRANSFER_SRC


@dataclass
class ImportedArray(Closeable):
    """A buffer over the pages of one numpy array; `offset` is where the array starts in it."""

    buffer: Buffer
    memory: DeviceMemory
    offset: int

    def close(self) -> None:
        """Destroy the buffer and release the import (the pages are unpinned)."""
        self.buffer.close()
        self.memory.close()


class HostImporter:
    """Imports arrays on one device (see the module docstring)."""

    def __init__(self, device: Device) -> None:
        self.device = device
        self._vulkan = HostMemoryImporter(device)
        self.alignment = self._vulkan.alignment
        self.usable = 0 < self.alignment <= mmap.PAGESIZE

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
        host_bits = self._vulkan.memory_type_bits(start)
        buffer = self._vulkan.buffer(size, TRANSFER_SRC | TRANSFER_DST)
        try:
            bits = buffer.memory_type_bits & host_bits
            if not bits or buffer.required_size > size:
                raise ValueError(
                    f"no memory type can import these {size} bytes "
                    f"(buffer types {buffer.memory_type_bits:#x}, host types {host_bits:#x})"
                )
            memory = self._vulkan.import_memory(start, size, bits)
        except BaseException:
            buffer.close()
            raise
        try:
            buffer.bind(memory)
        except BaseException:
            buffer.close()
            memory.close()
            raise
        return ImportedArray(buffer, memory, address - start)
