"""How much of each memory heap is in use on the whole device, through VK_EXT_memory_budget.

Every process's allocations count (not only this one's), which is what a monitor wants. Drivers
without the extension (lavapipe, a CPU device whose "heap" is system memory) report nothing.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpulab.vk._binding import vk
from gpulab.vk.physical_device import PhysicalDevice

MEMORY_BUDGET = "VK_EXT_memory_budget"


@dataclass(frozen=True)
class HeapUsage:
    """One heap: its index, size, whether it is device-local, bytes in use and the budget."""

    index: int
    size: int
    device_local: bool
    used: int
    budget: int


def heap_usage(physical: PhysicalDevice) -> tuple[HeapUsage, ...] | None:
    """Each heap's usage now; None when the driver lacks VK_EXT_memory_budget."""
    extensions = {
        e.extensionName for e in vk.vkEnumerateDeviceExtensionProperties(physical.raw, None)
    }
    if MEMORY_BUDGET not in extensions:
        return None
    budget = vk.VkPhysicalDeviceMemoryBudgetPropertiesEXT()
    properties = vk.VkPhysicalDeviceMemoryProperties2(pNext=budget)
    vk.vkGetPhysicalDeviceMemoryProperties2(physical.raw, properties)
    return tuple(
        HeapUsage(
            heap.index, heap.size, heap.device_local, budget.heapUsage[i], budget.heapBudget[i]
        )
        for i, heap in enumerate(physical.info.memory_heaps)
    )
