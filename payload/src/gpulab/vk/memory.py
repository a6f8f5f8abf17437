"""Device memory: memory-type selection by required/preferred flags, and host mapping."""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from gpulab.vk._binding import vk
from gpulab.vk._handle import VkObject
from gpulab.vk.errors import MemoryMapFailed, NoSuitableMemoryType, VulkanError, error_for_result
from gpulab.vk.physical_device import MEMORY_PROPERTIES, DeviceInfo, MemoryType

if TYPE_CHECKING:
    from gpulab.vk.device import Device

DEVICE_LOCAL = 0x01
HOST_VISIBLE = 0x02
HOST_COHERENT = 0x04
HOST_CACHED = 0x08


def _flag_names(flags: int) -> str:
    return "|".join(name for bit, name in MEMORY_PROPERTIES.items() if flags & bit) or "none"


def select_memory_type(
    info: DeviceInfo, type_bits: int, required: int, preferred: int = 0
) -> MemoryType:
    """The first allowed type with required and preferred flags, else the first with required."""
    allowed = [t for t in info.memory_types if type_bits & (1 << t.index)]
    usable = [t for t in allowed if t.property_flags & required == required]
    for memory_type in usable:
        if memory_type.property_flags & preferred == preferred:
            return memory_type
    if usable:
        return usable[0]
    raise NoSuitableMemoryType(
        "select_memory_type",
        f"no memory type of {info.name} has {_flag_names(required)} "
        f"(allowed types: {[t.index for t in allowed]})",
    )


class DeviceMemory(VkObject):
    """One VkDeviceMemory allocation. Host-visible memory is mapped whole, at most once.

    Views from `view()` share the mapped memory: they must be dropped before `unmap()` or
    `close()`, which invalidate them. `write()` and `read()` copy and are always safe.
    `next_info` is an extension struct for VkMemoryAllocateInfo.pNext (say, imported memory).
    """

    def __init__(
        self,
        device: Device,
        size: int,
        type_bits: int = 0xFFFFFFFF,
        required: int = 0,
        preferred: int = 0,
        *,
        next_info: Any = None,
    ) -> None:
        if size <= 0:
            raise ValueError(f"device memory size must be positive, got {size}")
        self.memory_type = select_memory_type(device.info, type_bits, required, preferred)
        info = vk.VkMemoryAllocateInfo(
            pNext=next_info, allocationSize=size, memoryTypeIndex=self.memory_type.index
        )
        try:
            raw = vk.vkAllocateMemory(device.raw, info, None)
        except VulkanError as exc:
            heap = device.info.memory_heaps[self.memory_type.heap_index]
            detail = (
                f"{size} bytes from memory type {self.memory_type.index} "
                f"(heap {heap.index} of {heap.size} bytes)"
            )
            raise error_for_result("vkAllocateMemory", exc.result or 0, detail) from None
        self._own(raw, functools.partial(vk.vkFreeMemory, device.raw, raw, None), device)
        self.device = device
        self.size = size
        self._mapped: Any = None

    @property
    def host_visible(self) -> bool:
        """Whether the memory can be mapped."""
        return bool(self.memory_type.property_flags & HOST_VISIBLE)

    @property
    def mapped(self) -> bool:
        """Whether the memory is currently mapped."""
        return self._mapped is not None

    def map(self) -> Any:
        """Map the whole allocation (once) and return the binding's buffer object."""
        raw = self.raw
        if self._mapped is None:
            if not self.host_visible:
                raise MemoryMapFailed(
                    "vkMapMemory",
                    f"memory type {self.memory_type.index} "
                    f"({_flag_names(self.memory_type.property_flags)}) is not host-visible",
                )
            # An explicit size: the binding's VK_WHOLE_SIZE (-1) overflows, and the returned
            # buffer object needs a length.
            self._mapped = vk.vkMapMemory(self.device.raw, raw, 0, self.size, 0)
        return self._mapped

    def unmap(self) -> None:
        """Unmap; every view from `view()` must already be dropped."""
        if self._mapped is not None:
            self._mapped = None
            vk.vkUnmapMemory(self.device.raw, self.raw)

    def view(self, dtype: npt.DTypeLike, count: int, offset: int = 0) -> npt.NDArray[Any]:
        """A zero-copy numpy view of mapped memory, valid until unmap() or close()."""
        dt = np.dtype(dtype)
        if offset < 0 or count < 0 or offset + count * dt.itemsize > self.size:
            raise ValueError(
                f"view of {count} x {dt} at offset {offset} exceeds the {self.size}-byte memory"
            )
        return np.frombuffer(self.map(), dtype=dt, count=count, offset=offset)

    def write(self, data: npt.NDArray[Any], offset: int = 0) -> None:
        """Copy an array into the memory at a byte offset."""
        flat = np.ascontiguousarray(data).reshape(-1)
        target = self.view(flat.dtype, flat.size, offset)
        target[:] = flat
        del target

    def read(self, dtype: npt.DTypeLike, count: int, offset: int = 0) -> npt.NDArray[Any]:
        """A copy of `count` elements at a byte offset."""
        source = self.view(dtype, count, offset)
        result: npt.NDArray[Any] = source.copy()
        del source
        return result

    def close(self) -> None:
        """Unmap if mapped, then free."""
        if not self.closed and self._mapped is not None:
            self.unmap()
        super().close()
