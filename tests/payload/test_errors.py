"""Failing Vulkan calls become typed errors that name the call."""

from __future__ import annotations

import pytest
from gpulab.vk import (
    Buffer,
    Device,
    DeviceInfo,
    DeviceMemory,
    MemoryMapFailed,
    NoSuitableMemoryType,
    NoVulkanDevice,
    OutOfDeviceMemory,
    ShaderModule,
    VulkanError,
    select_memory_type,
)
from gpulab.vk.errors import OutOfPoolMemory, error_for_result
from gpulab.vk.instance import Instance

ABSURD = 1 << 50


def test_an_absurd_allocation_is_out_of_device_memory(device: Device) -> None:
    with pytest.raises(OutOfDeviceMemory, match="vkAllocateMemory") as caught:
        DeviceMemory(device, ABSURD)
    assert caught.value.call == "vkAllocateMemory"
    assert caught.value.result == -2
    assert isinstance(caught.value, MemoryError)
    assert str(ABSURD) in str(caught.value)


def test_an_absurd_buffer_is_out_of_device_memory(device: Device) -> None:
    with pytest.raises(OutOfDeviceMemory, match="vkCreateBuffer"):
        Buffer(device, ABSURD)


def test_a_required_flag_no_type_has_is_reported(device: Device) -> None:
    protected = 0x20  # VK_MEMORY_PROPERTY_PROTECTED_BIT: lavapipe has no such type
    with pytest.raises(NoSuitableMemoryType, match="protected"):
        DeviceMemory(device, 64, required=protected)


def test_mapping_memory_that_is_not_host_visible_raises(device: Device) -> None:
    hidden = [t for t in device.info.memory_types if "host_visible" not in t.properties]
    if not hidden:
        pytest.skip(f"every memory type of {device.info.name} is host-visible")
    with (
        DeviceMemory(device, 64, type_bits=1 << hidden[0].index) as memory,
        pytest.raises(MemoryMapFailed, match="not host-visible"),
    ):
        memory.map()


def test_memory_type_selection_prefers_then_falls_back(device: Device) -> None:
    info: DeviceInfo = device.info
    host_visible = 0x2
    chosen = select_memory_type(info, 0xFFFFFFFF, host_visible, preferred=0x1)
    assert chosen.property_flags & host_visible
    fallback = select_memory_type(info, 0xFFFFFFFF, host_visible, preferred=0x20)
    assert fallback.property_flags & host_visible


def test_a_view_outside_the_memory_is_refused(device: Device) -> None:
    with DeviceMemory(device, 64) as memory, pytest.raises(ValueError, match="exceeds"):
        memory.view("float32", 17)


def test_invalid_spirv_is_refused_before_the_driver_sees_it(device: Device) -> None:
    with pytest.raises(VulkanError, match=r"vkCreateShaderModule.*SPIR-V"):
        ShaderModule(device, b"not spir-v at all!!!")


def test_invalid_sizes_are_refused(device: Device) -> None:
    with pytest.raises(ValueError, match="positive"):
        Buffer(device, 0)
    with pytest.raises(ValueError, match="positive"):
        DeviceMemory(device, -1)


def test_a_missing_device_index_is_no_vulkan_device(instance: Instance) -> None:
    with pytest.raises(NoVulkanDevice, match="device index 99 does not exist"):
        instance.physical_device(99)


def test_result_codes_map_to_families() -> None:
    assert isinstance(error_for_result("vkQueueSubmit", -4), VulkanError)
    assert type(error_for_result("vkQueueSubmit", -4)).__name__ == "DeviceLost"
    assert isinstance(error_for_result("vkAllocateDescriptorSets", -1000069000), OutOfPoolMemory)
    assert isinstance(error_for_result("vkCreateInstance", -9), NoVulkanDevice)
    unknown = error_for_result("vkCreateBuffer", -424242)
    assert type(unknown).__name__ == "UnknownVulkanError"
    assert "vkCreateBuffer" in str(unknown)
