"""`gpulab devices`: a compute-focused vulkaninfo, as a table or the contract's JSON list."""

from __future__ import annotations

import json
from typing import Any

from gpulab.placement import HostFiles, files_by_device
from gpulab.vk import DeviceInfo, NoVulkanDevice, shared_instance

GIB = 1 << 30


CONTRACT_KEYS = (
    "index",
    "name",
    "type",
    "driver",
    "api_version",
    "subgroup_size",
    "max_workgroup_invocations",
    "device_local_bytes",
)


def device_summary(info: DeviceInfo, full: bool = True) -> dict[str, Any]:
    """The contract's device keys first, then (when `full`) everything else we know."""
    everything = info.to_dict()
    summary = {key: everything[key] for key in CONTRACT_KEYS}
    summary["driver_info"] = info.driver_info
    return summary | everything if full else summary


def list_devices() -> list[DeviceInfo]:
    """Every Vulkan device; NoVulkanDevice when there is none (or no loader, or no driver)."""
    infos = [device.info for device in shared_instance().physical_devices()]
    if not infos:
        raise NoVulkanDevice("vkEnumeratePhysicalDevices", "no Vulkan device was found")
    return infos


def table(infos: list[DeviceInfo]) -> str:
    """Every device's contract keys in a table, then its limits, heaps and memory types."""
    header = ("#", "name", "type", "driver", "api", "subgroup", "wg inv", "wg size x", "local GiB")
    rows = [header] + [
        (
            str(i.index),
            i.name,
            i.type,
            i.driver,
            i.api_version,
            str(i.subgroup_size),
            str(i.max_workgroup_invocations),
            str(i.max_workgroup_size[0]),
            f"{i.device_local_bytes / GIB:.1f}",
        )
        for i in infos
    ]
    widths = [max(len(row[c]) for row in rows) for c in range(len(header))]
    lines = [
        "  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip()
        for row in rows
    ]
    for i in infos:
        lines.append("")
        lines.append(f"device {i.index}: {i.name} ({i.driver_info or i.driver})")
        lines.append(f"  subgroup operations: {', '.join(i.subgroup_operations) or 'none'}")
        lines.append(
            f"  max workgroup count: {'x'.join(map(str, i.max_workgroup_count))}, "
            f"shared memory: {i.max_shared_memory_bytes} bytes, "
            f"max storage buffer range: {i.max_storage_buffer_range} bytes"
        )
        lines.append(
            f"  timestamps: period {i.timestamp_period_ns} ns, "
            f"{i.timestamp_valid_bits} valid bits; compute queue family: {i.compute_queue_family}"
        )
        for heap in i.memory_heaps:
            kind = "device-local" if heap.device_local else "host"
            lines.append(f"  heap {heap.index}: {heap.size / GIB:.1f} GiB {kind}")
        for memory_type in i.memory_types:
            flags = "|".join(memory_type.properties) or "-"
            lines.append(
                f"  memory type {memory_type.index} (heap {memory_type.heap_index}): {flags}"
            )
    return "\n".join(lines)


def listing(infos: list[DeviceInfo]) -> list[dict[str, Any]]:
    """The contract's JSON list: each device with its per-GPU device files on this host
    (/dev/nvidiaN, /dev/dri/renderDN, Tegra's node)."""
    files = files_by_device(infos, HostFiles())
    return [device_summary(i) | {"gpu_files": files.get(i.index, [])} for i in infos]


def describe(as_json: bool) -> str:
    """The devices as the contract's JSON list or as a table (NoVulkanDevice when none)."""
    infos = list_devices()
    return json.dumps(listing(infos), indent=2) if as_json else table(infos)
