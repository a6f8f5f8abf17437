"""What device memory costs a cold process: vkAllocateMemory per 256 MiB by memory type, and
freeing it, explicitly (vkFreeMemory, vkDestroyDevice, vkDestroyInstance, each timed) or by
the process's exit (which the caller times from outside, the process ending in os._exit).

    for cfg in "local 0 exit" "local 0.75 exit" "local 3 exit" "rebar 0.75 map"; do
        s=$(date +%s%N); python3 payload/benchmarks/memory_exit_cost.py $cfg
        echo "wall $(( ($(date +%s%N) - s) / 1000000 )) ms"
    done

Arguments: the memory type (`local`: DEVICE_LOCAL and not HOST_VISIBLE; `rebar`: DEVICE_LOCAL
and HOST_VISIBLE, a resizable BAR), GiB to allocate in 256 MiB allocations, and what to do
then: `exit`; `free` (free and destroy, timed); `map` (map every allocation and write all of
it from the host); `mapunmap` (then unmap, timed). Only the Vulkan binding, no gpulab, so that
what it times is the driver's. docs/benchmarks/memory-exit-cost-h100.txt has the H100's.
"""

from __future__ import annotations

import ctypes
import json
import os
import sys
import time

import vulkan as vk

CHUNK = 256 << 20
T0 = time.perf_counter()


def ms() -> float:
    return round((time.perf_counter() - T0) * 1000, 1)


def memory_type(physical: object, wanted: str) -> int:
    props = vk.vkGetPhysicalDeviceMemoryProperties(physical)
    local, visible = vk.VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT, vk.VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT
    for index in range(props.memoryTypeCount):
        flags = props.memoryTypes[index].propertyFlags
        if flags & local and bool(flags & visible) == (wanted == "rebar"):
            return index
    raise SystemExit(f"no {wanted} memory type on this device")


def main() -> None:
    wanted, gib, mode = sys.argv[1], float(sys.argv[2]), sys.argv[3]
    app = vk.VkApplicationInfo(pApplicationName="probe", apiVersion=vk.VK_MAKE_VERSION(1, 2, 0))
    instance = vk.vkCreateInstance(vk.VkInstanceCreateInfo(pApplicationInfo=app), None)
    physical = vk.vkEnumeratePhysicalDevices(instance)[0]
    queue = vk.VkDeviceQueueCreateInfo(queueFamilyIndex=0, queueCount=1, pQueuePriorities=[1.0])
    info = vk.VkDeviceCreateInfo(queueCreateInfoCount=1, pQueueCreateInfos=[queue])
    device = vk.vkCreateDevice(physical, info, None)
    marks = {"device": ms()}
    index = memory_type(physical, wanted)
    memories, each = [], []
    for _ in range(int(gib * 4)):
        start = time.perf_counter()
        request = vk.VkMemoryAllocateInfo(allocationSize=CHUNK, memoryTypeIndex=index)
        memories.append(vk.vkAllocateMemory(device, request, None))
        each.append(round((time.perf_counter() - start) * 1000, 2))
    marks["allocated"] = ms()
    if mode.startswith("map"):
        for memory in memories:
            pointer = vk.vkMapMemory(device, memory, 0, CHUNK, 0)
            ctypes.memset(int(vk.ffi.cast("uintptr_t", vk.ffi.from_buffer(pointer))), 1, CHUNK)
        marks["mapped_written"] = ms()
        if mode == "mapunmap":
            for memory in memories:
                vk.vkUnmapMemory(device, memory)
            marks["unmapped"] = ms()
    if mode == "free":
        for memory in memories:
            vk.vkFreeMemory(device, memory, None)
        marks["freed"] = ms()
        vk.vkDestroyDevice(device, None)
        marks["device_destroyed"] = ms()
        vk.vkDestroyInstance(instance, None)
        marks["instance_destroyed"] = ms()
    shown = {"type": wanted, "index": index, "gib": gib, "mode": mode, "marks": marks}
    print(json.dumps({**shown, "each_ms": each}), flush=True)
    os._exit(0)


if __name__ == "__main__":
    main()
