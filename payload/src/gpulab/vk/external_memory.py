"""Device memory over pages that the host allocated (VK_EXT_external_memory_host).

The device's copy engine can then read and write those pages directly. `HostMemoryImporter`
says what the device allows (`alignment`, the memory types for an address) and makes the
buffer and the imported memory; choosing the range to import is up to the caller.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from gpulab.vk._binding import device_function, vk
from gpulab.vk.buffer import Buffer
from gpulab.vk.device import HOST_MEMORY_EXTENSION
from gpulab.vk.memory import DeviceMemory

if TYPE_CHECKING:
    from gpulab.vk.device import Device

HOST_ALLOCATION = 0x80  # VK_EXTERNAL_MEMORY_HANDLE_TYPE_HOST_ALLOCATION_BIT_EXT
_STRUCTURE_EXTERNAL_HOST_PROPERTIES = 1000178002
_STRUCTURE_HOST_POINTER_PROPERTIES = 1000178001  # VkMemoryHostPointerPropertiesEXT


def _import_alignment(device: Device) -> int:
    """minImportedHostPointerAlignment of the device (0 when the extension is not enabled)."""
    if HOST_MEMORY_EXTENSION not in device.extensions:
        return 0
    host = vk.ffi.new("VkPhysicalDeviceExternalMemoryHostPropertiesEXT*")
    host.sType = _STRUCTURE_EXTERNAL_HOST_PROPERTIES
    properties = vk.ffi.new("VkPhysicalDeviceProperties2*")
    properties.sType = vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2
    properties.pNext = host
    vk.lib.vkGetPhysicalDeviceProperties2(device.physical_device.raw, properties)
    return int(host.minImportedHostPointerAlignment)


class HostMemoryImporter:
    """Imports host pages on one device. `alignment` is minImportedHostPointerAlignment: the
    start and size of an imported range must be multiples of it (0: the device cannot import)."""

    def __init__(self, device: Device) -> None:
        self.device = device
        self.alignment = _import_alignment(device)
        self._properties: Any = None
        if self.alignment:
            self._properties = device_function(device.raw, "vkGetMemoryHostPointerPropertiesEXT")

    def memory_type_bits(self, address: int) -> int:
        """The memory types that can import the host pages at `address`."""
        pointer = vk.ffi.cast("void*", address)
        # Our own output struct: the binding's own has sType 0, which a driver may reject.
        properties = vk.ffi.new("VkMemoryHostPointerPropertiesEXT*")
        properties.sType = _STRUCTURE_HOST_POINTER_PROPERTIES
        self._properties(self.device.raw, HOST_ALLOCATION, pointer, properties)
        return int(properties.memoryTypeBits)

    def buffer(self, size: int, usage: int) -> Buffer:
        """A buffer that imported host memory can be bound to."""
        external = vk.VkExternalMemoryBufferCreateInfo(handleTypes=HOST_ALLOCATION)
        return Buffer(self.device, size, usage, next_info=external)

    def import_memory(self, address: int, size: int, type_bits: int) -> DeviceMemory:
        """The `size` host bytes at `address` as device memory (of the first type allowed by
        `type_bits`); closing it releases the import, the pages stay the host's."""
        imported = vk.VkImportMemoryHostPointerInfoEXT(
            handleType=HOST_ALLOCATION, pHostPointer=vk.ffi.cast("void*", address)
        )
        return DeviceMemory(self.device, size, type_bits, next_info=imported)
