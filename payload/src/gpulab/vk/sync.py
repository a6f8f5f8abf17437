"""Fences: the host waits on them for submitted work."""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING

from gpulab.vk._binding import check, raw_lib, vk
from gpulab.vk._handle import VkObject

if TYPE_CHECKING:
    from gpulab.vk.device import Device

FOREVER = 0xFFFFFFFFFFFFFFFF


class Fence(VkObject):
    """A VkFence. `wait()` raises NotReady naming vkWaitForFences when the timeout passes."""

    def __init__(self, device: Device, signaled: bool = False) -> None:
        info = vk.VkFenceCreateInfo(flags=vk.VK_FENCE_CREATE_SIGNALED_BIT if signaled else 0)
        raw = vk.vkCreateFence(device.raw, info, None)
        self._own(raw, functools.partial(vk.vkDestroyFence, device.raw, raw, None), device)
        self.device = device
        # Prebuilt argument for the raw calls of the hot path (wait, reset).
        self._array = vk.ffi.new("VkFence[1]", [raw])
        self._lib = raw_lib()

    def wait(self, timeout_ns: int = FOREVER) -> None:
        """Block until signaled."""
        device = self.device.raw
        _ = self.raw
        check("vkWaitForFences", self._lib.vkWaitForFences(device, 1, self._array, 1, timeout_ns))

    def reset(self) -> None:
        """Back to unsignaled."""
        device = self.device.raw
        _ = self.raw
        check("vkResetFences", self._lib.vkResetFences(device, 1, self._array))

    @property
    def signaled(self) -> bool:
        """Whether the fence is signaled now."""
        return bool(self._lib.vkGetFenceStatus(self.device.raw, self.raw) == 0)
