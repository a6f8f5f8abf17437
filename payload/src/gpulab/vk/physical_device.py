"""Physical devices: the properties that matter for compute, and queue family discovery."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from gpulab.vk._binding import decode_version, vk
from gpulab.vk._handle import VkObject
from gpulab.vk.bare_instance import make_version
from gpulab.vk.errors import NoVulkanDevice

if TYPE_CHECKING:
    from gpulab.vk.instance import Instance

DEVICE_TYPES = {0: "other", 1: "integrated", 2: "discrete", 3: "virtual", 4: "cpu"}
"""VkPhysicalDeviceType -> the contract's type strings."""

SUBGROUP_OPERATIONS = {
    0x01: "basic",
    0x02: "vote",
    0x04: "arithmetic",
    0x08: "ballot",
    0x10: "shuffle",
    0x20: "shuffle_relative",
    0x40: "clustered",
    0x80: "quad",
}
MEMORY_PROPERTIES = {
    0x01: "device_local",
    0x02: "host_visible",
    0x04: "host_coherent",
    0x08: "host_cached",
    0x10: "lazily_allocated",
    0x20: "protected",
}
QUEUE_FLAGS = {0x1: "graphics", 0x2: "compute", 0x4: "transfer", 0x8: "sparse_binding"}
PCI_BUS_INFO = "VK_EXT_pci_bus_info"
PHYSICAL_DEVICE_DRM = "VK_EXT_physical_device_drm"
_HEAP_DEVICE_LOCAL = 0x1


def _names(bits: int, table: dict[int, str]) -> tuple[str, ...]:
    return tuple(name for bit, name in table.items() if bits & bit)


@dataclass(frozen=True)
class MemoryHeap:
    """One memory heap."""

    index: int
    size: int
    device_local: bool


@dataclass(frozen=True)
class MemoryType:
    """One memory type: its heap and its property flags (raw bits and names)."""

    index: int
    heap_index: int
    property_flags: int
    properties: tuple[str, ...]


@dataclass(frozen=True)
class QueueFamily:
    """One queue family."""

    index: int
    queue_count: int
    flags: tuple[str, ...]
    timestamp_valid_bits: int

    @property
    def compute(self) -> bool:
        """Whether it can run compute work."""
        return "compute" in self.flags

    @property
    def dedicated_compute(self) -> bool:
        """Compute without graphics: usually the asynchronous compute engine."""
        return self.compute and "graphics" not in self.flags


@dataclass(frozen=True)
class DeviceInfo:
    """What a physical device offers for compute."""

    index: int
    name: str
    type: str
    driver: str
    driver_info: str
    vendor_id: int
    device_id: int
    api_version: str
    max_workgroup_size: tuple[int, int, int]
    max_workgroup_count: tuple[int, int, int]
    max_workgroup_invocations: int
    max_shared_memory_bytes: int
    subgroup_size: int
    subgroup_operations: tuple[str, ...]
    max_storage_buffer_range: int
    min_storage_buffer_offset_alignment: int
    max_push_constants_size: int
    timestamp_period_ns: float
    timestamp_valid_bits: int
    memory_heaps: tuple[MemoryHeap, ...]
    memory_types: tuple[MemoryType, ...]
    device_local_bytes: int
    queue_families: tuple[QueueFamily, ...]
    compute_queue_family: int | None
    non_coherent_atom_size: int = 1
    uuid: str = ""
    """deviceUUID as 8-4-4-4-12 hex digits; NVIDIA's driver reports the GPU's own UUID."""
    pci_bus: str | None = None
    """The PCI address, e.g. 0000:00:06.0 (None without VK_EXT_pci_bus_info)."""
    drm_render: tuple[int, int] | None = None
    """The DRM render node's (major, minor) (None without VK_EXT_physical_device_drm)."""
    pipeline_cache_uuid: str = ""
    """pipelineCacheUUID in hex: which saved pipeline cache data the driver takes."""

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (the contract's keys first)."""
        return dataclasses.asdict(self)


def format_uuid(raw: bytes) -> str:
    """16 bytes as 8-4-4-4-12 lowercase hex digits, the way vulkaninfo and nvidia-smi write it."""
    digits = raw.hex()
    return "-".join(digits[a:b] for a, b in ((0, 8), (8, 12), (12, 16), (16, 20), (20, 32)))


def _text(chars: Any) -> str:
    return str(vk.ffi.string(chars).decode(errors="replace"))


def _pci_address(pci: Any) -> str:
    """domain:bus:device.function the way lspci -D and /proc/driver/nvidia write it."""
    return f"{pci.pciDomain:04x}:{pci.pciBus:02x}:{pci.pciDevice:02x}.{pci.pciFunction:x}"


def device_extensions(raw: Any) -> set[str]:
    """The names of the extensions a physical device (its raw handle) offers."""
    return {ext.extensionName for ext in vk.vkEnumerateDeviceExtensionProperties(raw, None)}


def _properties2(raw: Any, api_version: int) -> dict[str, Any]:
    """The DeviceInfo fields of driver, subgroup and identity, through one properties2 chain."""
    extensions = device_extensions(raw)
    # Keep every chained struct in a local until the call has filled them.
    drm = vk.VkPhysicalDeviceDrmPropertiesEXT() if PHYSICAL_DEVICE_DRM in extensions else None
    pci = (
        vk.VkPhysicalDevicePCIBusInfoPropertiesEXT(pNext=drm)
        if PCI_BUS_INFO in extensions
        else None
    )
    ids = vk.VkPhysicalDeviceIDProperties(pNext=drm if pci is None else pci)
    driver = (
        vk.VkPhysicalDeviceDriverProperties(pNext=ids)
        if api_version >= make_version(1, 2)
        else None
    )
    subgroup = vk.VkPhysicalDeviceSubgroupProperties(pNext=ids if driver is None else driver)
    properties2 = vk.VkPhysicalDeviceProperties2(pNext=subgroup)
    vk.vkGetPhysicalDeviceProperties2(raw, properties2)
    return {
        "driver": "unknown" if driver is None else _text(driver.driverName),
        "driver_info": "" if driver is None else _text(driver.driverInfo),
        "subgroup_size": subgroup.subgroupSize,
        "subgroup_operations": _names(subgroup.supportedOperations, SUBGROUP_OPERATIONS),
        "uuid": format_uuid(bytes(ids.deviceUUID)),
        "pci_bus": None if pci is None else _pci_address(pci),
        "drm_render": (drm.renderMajor, drm.renderMinor) if drm and drm.hasRender else None,
    }


def _queue_families(raw: Any) -> tuple[QueueFamily, ...]:
    return tuple(
        QueueFamily(i, f.queueCount, _names(f.queueFlags, QUEUE_FLAGS), f.timestampValidBits)
        for i, f in enumerate(vk.vkGetPhysicalDeviceQueueFamilyProperties(raw))
    )


def pick_compute_family(families: tuple[QueueFamily, ...]) -> int | None:
    """A dedicated compute family if there is one, else the first compute-capable one."""
    compute = [f for f in families if f.compute]
    dedicated = [f for f in compute if f.dedicated_compute]
    chosen = dedicated or compute
    return chosen[0].index if chosen else None


def query_info(raw: Any, index: int) -> DeviceInfo:
    """Read every compute-relevant property of one physical device."""
    props = vk.vkGetPhysicalDeviceProperties(raw)
    limits = props.limits
    extended = _properties2(raw, props.apiVersion)
    memory = vk.vkGetPhysicalDeviceMemoryProperties(raw)
    heaps = tuple(
        MemoryHeap(
            i, memory.memoryHeaps[i].size, bool(memory.memoryHeaps[i].flags & _HEAP_DEVICE_LOCAL)
        )
        for i in range(memory.memoryHeapCount)
    )
    types = tuple(
        MemoryType(
            i,
            memory.memoryTypes[i].heapIndex,
            memory.memoryTypes[i].propertyFlags,
            _names(memory.memoryTypes[i].propertyFlags, MEMORY_PROPERTIES),
        )
        for i in range(memory.memoryTypeCount)
    )
    families = _queue_families(raw)
    compute_family = pick_compute_family(families)
    return DeviceInfo(
        **extended,
        index=index,
        name=props.deviceName,
        type=DEVICE_TYPES.get(props.deviceType, "other"),
        vendor_id=props.vendorID,
        device_id=props.deviceID,
        api_version=decode_version(props.apiVersion),
        max_workgroup_size=tuple(limits.maxComputeWorkGroupSize),
        max_workgroup_count=tuple(limits.maxComputeWorkGroupCount),
        max_workgroup_invocations=limits.maxComputeWorkGroupInvocations,
        max_shared_memory_bytes=limits.maxComputeSharedMemorySize,
        max_storage_buffer_range=limits.maxStorageBufferRange,
        min_storage_buffer_offset_alignment=limits.minStorageBufferOffsetAlignment,
        max_push_constants_size=limits.maxPushConstantsSize,
        timestamp_period_ns=float(limits.timestampPeriod),
        timestamp_valid_bits=(
            0 if compute_family is None else families[compute_family].timestamp_valid_bits
        ),
        memory_heaps=heaps,
        memory_types=types,
        device_local_bytes=sum(h.size for h in heaps if h.device_local),
        queue_families=families,
        compute_queue_family=compute_family,
        non_coherent_atom_size=limits.nonCoherentAtomSize,
        pipeline_cache_uuid=bytes(props.pipelineCacheUUID).hex(),
    )


class PhysicalDevice(VkObject):
    """A physical device of an instance, with its `info`; the instance owns it."""

    def __init__(self, instance: Instance, raw: Any, index: int) -> None:
        self.info = query_info(raw, index)
        self.instance = instance
        self._own(raw, None, instance)

    def compute_queue_family(self) -> int:
        """The queue family for compute work; NoVulkanDevice when the device has none."""
        family = self.info.compute_queue_family
        if family is None:
            raise NoVulkanDevice(
                "vkGetPhysicalDeviceQueueFamilyProperties",
                f"device {self.info.index} ({self.info.name}) has no compute queue",
            )
        return family

    def __repr__(self) -> str:
        return f"<PhysicalDevice {self.info.index} {self.info.name!r} {self._state.value}>"
