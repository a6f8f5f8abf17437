"""Typed errors of the Vulkan layer: one exception per VkResult family, each naming its call."""

from __future__ import annotations

NO_DEVICE_REMEDY = "install mesa-vulkan-drivers for a software device, or the GPU vendor's driver"


class VulkanError(RuntimeError):
    """A Vulkan call failed. `call` names the call, `result` is the VkResult code (or None)."""

    def __init__(self, call: str, message: str = "", result: int | None = None) -> None:
        self.call = call
        self.result = result
        text = f"{call} failed"
        if result is not None:
            text += f" with {RESULT_NAMES.get(result, 'VkResult')} ({result})"
        if message:
            text += f": {message}"
        super().__init__(text)


class OutOfHostMemory(VulkanError, MemoryError):
    """VK_ERROR_OUT_OF_HOST_MEMORY."""


class OutOfDeviceMemory(VulkanError, MemoryError):
    """VK_ERROR_OUT_OF_DEVICE_MEMORY."""


class OutOfPoolMemory(VulkanError, MemoryError):
    """VK_ERROR_OUT_OF_POOL_MEMORY or VK_ERROR_FRAGMENTED_POOL: a descriptor pool is exhausted."""


class DeviceLost(VulkanError):
    """VK_ERROR_DEVICE_LOST: the device is unusable; every object on it must be recreated."""


class InitializationFailed(VulkanError):
    """VK_ERROR_INITIALIZATION_FAILED."""


class MemoryMapFailed(VulkanError):
    """VK_ERROR_MEMORY_MAP_FAILED, or mapping memory that is not host-visible."""


class MissingFeature(VulkanError):
    """A layer, extension, feature or format the call needs is not present."""


class TooManyObjects(VulkanError):
    """VK_ERROR_TOO_MANY_OBJECTS."""


class NotReady(VulkanError):
    """VK_NOT_READY or VK_TIMEOUT: the work has not finished in time."""


class UnknownVulkanError(VulkanError):
    """Any other failing VkResult."""


class NoVulkanDevice(VulkanError):
    """No Vulkan loader, no driver, or no device: the message says how to get one."""

    def __init__(self, call: str, reason: str, remedy: str = NO_DEVICE_REMEDY) -> None:
        super().__init__(call, f"{reason}; {remedy}" if remedy else reason)
        self.reason = reason


class NoSuitableMemoryType(VulkanError):
    """No memory type of the device has the required property flags."""


class ObjectClosedError(RuntimeError):
    """A Vulkan object was used after close(); the message names the object."""


RESULT_NAMES = {
    1: "VK_NOT_READY",
    2: "VK_TIMEOUT",
    -1: "VK_ERROR_OUT_OF_HOST_MEMORY",
    -2: "VK_ERROR_OUT_OF_DEVICE_MEMORY",
    -3: "VK_ERROR_INITIALIZATION_FAILED",
    -4: "VK_ERROR_DEVICE_LOST",
    -5: "VK_ERROR_MEMORY_MAP_FAILED",
    -6: "VK_ERROR_LAYER_NOT_PRESENT",
    -7: "VK_ERROR_EXTENSION_NOT_PRESENT",
    -8: "VK_ERROR_FEATURE_NOT_PRESENT",
    -9: "VK_ERROR_INCOMPATIBLE_DRIVER",
    -10: "VK_ERROR_TOO_MANY_OBJECTS",
    -11: "VK_ERROR_FORMAT_NOT_SUPPORTED",
    -12: "VK_ERROR_FRAGMENTED_POOL",
    -13: "VK_ERROR_UNKNOWN",
    -1000069000: "VK_ERROR_OUT_OF_POOL_MEMORY",
}

# VkResult codes by family; anything unlisted becomes UnknownVulkanError.
RESULT_ERRORS: dict[int, type[VulkanError]] = {
    1: NotReady,  # VK_NOT_READY
    2: NotReady,  # VK_TIMEOUT
    -1: OutOfHostMemory,
    -2: OutOfDeviceMemory,
    -3: InitializationFailed,
    -4: DeviceLost,
    -5: MemoryMapFailed,
    -6: MissingFeature,  # layer not present
    -7: MissingFeature,  # extension not present
    -8: MissingFeature,  # feature not present
    -9: NoVulkanDevice,  # incompatible driver: what the loader says when there is no driver
    -10: TooManyObjects,
    -11: MissingFeature,  # format not supported
    -12: OutOfPoolMemory,  # fragmented pool
    -1000069000: OutOfPoolMemory,
}


def error_for_result(call: str, result: int, message: str = "") -> VulkanError:
    """The typed exception for a failing VkResult of `call`."""
    cls = RESULT_ERRORS.get(result, UnknownVulkanError)
    if cls is NoVulkanDevice:
        return NoVulkanDevice(call, "the Vulkan loader found no compatible driver")
    return cls(call, message, result)
