# Copyright: gpulab contributors
# MIT License (see galaxy.yml)
"""Reading Vulkan devices from `vulkaninfo --summary` and matching them to device files."""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

# VkPhysicalDeviceType as vulkaninfo prints it -> the contract's short names.
DEVICE_TYPES = {
    "PHYSICAL_DEVICE_TYPE_DISCRETE_GPU": "discrete",
    "PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU": "integrated",
    "PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU": "virtual",
    "PHYSICAL_DEVICE_TYPE_CPU": "cpu",
}

_GPU_HEADER = re.compile(r"^GPU(\d+):\s*$")
_FIELD = re.compile(r"^\s+(\w+)\s*=\s*(.*?)\s*$")
_NVIDIA_NODE = re.compile(r"^/dev/nvidia(\d+)$")
_RENDER_NODE = re.compile(r"^/dev/dri/renderD(\d+)$")


def parse_summary(text: str) -> list[dict[str, Any]]:
    """The devices of the Devices section of `vulkaninfo --summary`, in its order."""
    devices: list[dict[str, str]] = []
    in_devices = False
    for line in text.splitlines():
        if line.strip() == "Devices:":
            in_devices = True
            continue
        if not in_devices:
            continue
        header = _GPU_HEADER.match(line)
        if header:
            devices.append({"index": header.group(1)})
            continue
        field = _FIELD.match(line)
        if field and devices:
            devices[-1][field.group(1)] = field.group(2)
    return [_describe(raw) for raw in devices]


def _describe(raw: dict[str, str]) -> dict[str, Any]:
    return {
        "index": int(raw["index"]),
        "name": raw.get("deviceName", ""),
        "type": DEVICE_TYPES.get(raw.get("deviceType", ""), "other"),
        "driver": raw.get("driverName", ""),
        "driver_id": raw.get("driverID", ""),
        "driver_info": raw.get("driverInfo", ""),
        "api_version": raw.get("apiVersion", ""),
        "vendor_id": raw.get("vendorID", ""),
        "device_id": raw.get("deviceID", ""),
        "device_files": [],
    }


def _numbered(paths: Iterable[str], pattern: re.Pattern[str]) -> list[str]:
    found = [(int(m.group(1)), p) for p in paths if (m := pattern.match(p))]
    return [p for _, p in sorted(found)]


def assign_device_files(devices: list[dict[str, Any]], dev_paths: Iterable[str]) -> None:
    """Give each GPU the device node a job needs to use it, in enumeration order.

    NVIDIA's proprietary driver devices take /dev/nvidiaN; other GPUs take the DRM
    render nodes /dev/dri/renderD*. CPU devices (lavapipe) have no device file, so
    they never become Slurm GRES. vulkaninfo --summary prints no PCI address: the
    order is the loader's, which follows the kernel's on single-vendor nodes.
    """
    paths = list(dev_paths)
    pools = {
        "nvidia": _numbered(paths, _NVIDIA_NODE),
        "render": _numbered(paths, _RENDER_NODE),
    }
    for device in devices:
        if device["type"] == "cpu":
            continue
        pool = pools["nvidia" if device["driver_id"].startswith("DRIVER_ID_NVIDIA") else "render"]
        if pool:
            device["device_files"] = [pool.pop(0)]
