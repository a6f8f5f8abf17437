"""gpulab.vk: the explicit Vulkan layer. One concept per module; every object has one owner.

Objects are closed explicitly (close() or `with`), children before parents; a finalizer is only
the safety net. Using a closed object raises ObjectClosedError.

Names are imported on first use (PEP 562): `gpulab run` opens the Vulkan instance on a second
thread (gpulab.running.early) through gpulab.vk.instance, which needs neither numpy nor the
modules that do, while the first thread imports them.
"""

from typing import TYPE_CHECKING

from gpulab._lazy import lazy_attributes

if TYPE_CHECKING:
    from gpulab._closeable import Closeable
    from gpulab.vk._handle import State, VkObject, live_handles
    from gpulab.vk.buffer import Buffer
    from gpulab.vk.commands import CommandBuffer, CommandPool, pack_push_constants
    from gpulab.vk.descriptors import DescriptorPool, DescriptorSet, DescriptorSetLayout
    from gpulab.vk.device import Device
    from gpulab.vk.errors import (
        DeviceLost,
        InitializationFailed,
        MemoryMapFailed,
        MissingFeature,
        NoSuitableMemoryType,
        NotReady,
        NoVulkanDevice,
        ObjectClosedError,
        OutOfDeviceMemory,
        OutOfHostMemory,
        OutOfPoolMemory,
        TooManyObjects,
        UnknownVulkanError,
        VulkanError,
    )
    from gpulab.vk.external_memory import HostMemoryImporter
    from gpulab.vk.instance import Instance, shared_instance
    from gpulab.vk.memory import DeviceMemory, select_memory_type
    from gpulab.vk.physical_device import (
        DeviceInfo,
        MemoryHeap,
        MemoryType,
        PhysicalDevice,
        QueueFamily,
    )
    from gpulab.vk.pipeline import ComputePipeline, PipelineCache, PipelineLayout
    from gpulab.vk.query import TimestampQueryPool
    from gpulab.vk.shader import ShaderModule, packaged_spirv
    from gpulab.vk.submitter import Submitter
    from gpulab.vk.sync import Fence

__all__ = [
    "Buffer",
    "Closeable",
    "CommandBuffer",
    "CommandPool",
    "ComputePipeline",
    "DescriptorPool",
    "DescriptorSet",
    "DescriptorSetLayout",
    "Device",
    "DeviceInfo",
    "DeviceLost",
    "DeviceMemory",
    "Fence",
    "HostMemoryImporter",
    "InitializationFailed",
    "Instance",
    "MemoryHeap",
    "MemoryMapFailed",
    "MemoryType",
    "MissingFeature",
    "NoSuitableMemoryType",
    "NoVulkanDevice",
    "NotReady",
    "ObjectClosedError",
    "OutOfDeviceMemory",
    "OutOfHostMemory",
    "OutOfPoolMemory",
    "PhysicalDevice",
    "PipelineCache",
    "PipelineLayout",
    "QueueFamily",
    "ShaderModule",
    "State",
    "Submitter",
    "TimestampQueryPool",
    "TooManyObjects",
    "UnknownVulkanError",
    "VkObject",
    "VulkanError",
    "live_handles",
    "pack_push_constants",
    "packaged_spirv",
    "select_memory_type",
    "shared_instance",
]

_MODULES = {
    "_handle": (
        "Closeable",
        "State",
        "VkObject",
        "live_handles",
    ),
    "buffer": ("Buffer",),
    "commands": (
        "CommandBuffer",
        "CommandPool",
        "pack_push_constants",
    ),
    "descriptors": (
        "DescriptorPool",
        "DescriptorSet",
        "DescriptorSetLayout",
    ),
    "device": ("Device",),
    "errors": (
        "DeviceLost",
        "InitializationFailed",
        "MemoryMapFailed",
        "MissingFeature",
        "NoSuitableMemoryType",
        "NotReady",
        "NoVulkanDevice",
        "ObjectClosedError",
        "OutOfDeviceMemory",
        "OutOfHostMemory",
        "OutOfPoolMemory",
        "TooManyObjects",
        "UnknownVulkanError",
        "VulkanError",
    ),
    "external_memory": ("HostMemoryImporter",),
    "instance": (
        "Instance",
        "shared_instance",
    ),
    "memory": (
        "DeviceMemory",
        "select_memory_type",
    ),
    "physical_device": (
        "DeviceInfo",
        "MemoryHeap",
        "MemoryType",
        "PhysicalDevice",
        "QueueFamily",
    ),
    "pipeline": (
        "ComputePipeline",
        "PipelineCache",
        "PipelineLayout",
    ),
    "query": ("TimestampQueryPool",),
    "shader": (
        "ShaderModule",
        "packaged_spirv",
    ),
    "submitter": ("Submitter",),
    "sync": ("Fence",),
}
__getattr__, __dir__ = lazy_attributes(
    __name__, {name: f"{__name__}.{module}" for module, names in _MODULES.items() for name in names}
)
