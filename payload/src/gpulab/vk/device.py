"""The logical device and its compute queue. The device owns every object created on it."""

from __future__ import annotations

import contextlib
import functools
from typing import TYPE_CHECKING

from gpulab.vk._binding import check, raw_lib, vk
from gpulab.vk._handle import VkObject
from gpulab.vk.errors import VulkanError
from gpulab.vk.physical_device import DeviceInfo, PhysicalDevice, device_extensions

if TYPE_CHECKING:
    from gpulab.vk.commands import CommandBuffer
    from gpulab.vk.sync import Fence


HOST_MEMORY_EXTENSION = "VK_EXT_external_memory_host"
OPTIONAL_EXTENSIONS = (HOST_MEMORY_EXTENSION,)
"""Enabled whenever the device offers them (the Stager can then import host arrays)."""
OPTIONAL_FEATURES = ("shaderInt64", "shaderFloat64")
"""Core features enabled whenever the device offers them (inputs generated on the device)."""


class Device(VkObject):
    """A VkDevice with one queue of the physical device's compute family.

    `extensions` lists the OPTIONAL_EXTENSIONS that were found and enabled, `features` the
    OPTIONAL_FEATURES. Closing the device waits for it to go idle, then closes every object
    made on it.
    """

    def __init__(self, physical_device: PhysicalDevice, queue_family: int | None = None) -> None:
        family = physical_device.compute_queue_family() if queue_family is None else queue_family
        priorities = [1.0]
        queue_info = vk.VkDeviceQueueCreateInfo(
            queueFamilyIndex=family, queueCount=1, pQueuePriorities=priorities
        )
        offered = device_extensions(physical_device.raw)
        self.extensions = tuple(name for name in OPTIONAL_EXTENSIONS if name in offered)
        supported = vk.vkGetPhysicalDeviceFeatures(physical_device.raw)
        self.features = tuple(name for name in OPTIONAL_FEATURES if getattr(supported, name))
        """The OPTIONAL_FEATURES that were found and enabled."""
        features = vk.VkPhysicalDeviceFeatures(**dict.fromkeys(self.features, 1))
        create_info = vk.VkDeviceCreateInfo(
            queueCreateInfoCount=1,
            pQueueCreateInfos=[queue_info],
            enabledExtensionCount=len(self.extensions),
            ppEnabledExtensionNames=list(self.extensions) or None,
            pEnabledFeatures=features,
        )
        raw = vk.vkCreateDevice(physical_device.raw, create_info, None)
        self._own(raw, functools.partial(vk.vkDestroyDevice, raw, None), physical_device)
        self.physical_device = physical_device
        self.queue_family = family
        self._queue = vk.vkGetDeviceQueue(raw, family, 0)
        self._lib = raw_lib()

    @property
    def info(self) -> DeviceInfo:
        """The physical device's properties."""
        return self.physical_device.info

    def submit(self, command_buffer: CommandBuffer, fence: Fence | None = None) -> None:
        """Submit one recorded command buffer to the queue, signalling `fence` when done."""
        submit_info = command_buffer.submit_info()
        raw_fence = vk.ffi.NULL if fence is None else fence.raw  # raw call: NULL, not the int 0
        check("vkQueueSubmit", self._lib.vkQueueSubmit(self._queue, 1, submit_info, raw_fence))

    def wait_idle(self) -> None:
        """Wait until the device has finished all submitted work."""
        vk.vkDeviceWaitIdle(self.raw)

    def close(self) -> None:
        """Wait for idle, close every child (buffers, memory, pipelines, ...), then the device."""
        if not self.closed:
            # A lost device fails the wait but still has to be destroyed.
            with contextlib.suppress(VulkanError):
                vk.vkDeviceWaitIdle(self._raw)
        super().close()
