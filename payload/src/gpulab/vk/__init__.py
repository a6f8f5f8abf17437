"""gpulab.vk: the explicit Vulkan layer. One concept per module; every object has one owner.

Objects are closed explicitly (close() or `with`), children before parents; a finalizer is only
the safety net. Using a closed object raises ObjectClosedError.
"""

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
from gpulab.vk.sync import Fence

__all__ = [
    "Buffer",
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
