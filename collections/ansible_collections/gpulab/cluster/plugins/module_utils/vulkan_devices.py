# Copyright: gpulab contributors
# MIT License (see LICENSE)
"""Reading Vulkan devices from vulkaninfo and matching them to the device files jobs need."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

# VkPhysicalDeviceType as vulkaninfo prints it -> the contract's short names.
DEVICE_TYPES = {
    "PHYSICAL_DEVICE_TYPE_DISCRETE_GPU": "discrete",
    "PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU": "integrated",
    "PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU": "virtual",
    "PHYSICAL_DEVICE_TYPE_CPU": "cpu",
}

# Nodes of NVIDIA's driver that every GPU of the host shares, in the order jobs open them.
NVIDIA_SHARED_FILES = (
    "/dev/nvidiactl",
    "/dev/nvidia-uvm",
    "/dev/nvidia-uvm-tools",
    "/dev/nvidia-modeset",
)
# The one node per Tegra GPU that gres.conf names: the GPU's control node, which every user
# of the GPU (libnvrm_gpu, under CUDA and Vulkan alike) opens first to find the GPU, so a job
# denied it (ConstrainDevices) cannot use the GPU at all. L4T r36 (JetPack 6) names it
# /dev/nvgpu/igpu0/ctrl; older releases have only the /dev/nvhost-*-gpu names. Orin has one
# integrated GPU, igpu0; one File per GPU is all that Slurm 21.08's gres.conf takes.
TEGRA_GPU_FILES = ("/dev/nvgpu/igpu0/ctrl", "/dev/nvhost-ctrl-gpu", "/dev/nvhost-gpu")

_GPU_HEADER = re.compile(r"^GPU(\d+):\s*$")
_FIELD = re.compile(r"^\s+(\w+)\s*=\s*(.*?)\s*$")
_VERSION = re.compile(r"(\d+)\.(\d+)\.(\d+)")
_NVIDIA_NODE = re.compile(r"^/dev/nvidia(\d+)$")
_RENDER_NODE = re.compile(r"^/dev/dri/renderD(\d+)$")
_TEGRA_NODE = re.compile(r"^/dev/(nvmap|nvhost-[\w-]+|nvgpu/igpu0/[\w-]+)$")
# Words of a device name that say nothing about the model: vendors, brands, form factors.
_NOT_MODEL = re.compile(r"^(nvidia|amd|ati|intel|r|tm|geforce|tegra|radeon|graphics|"
                        r"corporation|radv|pcie|sxm\d*|hbm\d*e?|\d+gb)$")  # fmt: skip
# The properties of vulkaninfo's full text output the features need, per GPU.
_DETAILS = ("apiVersion", "subgroupSize", "shaderFloat64", "hasRender", "renderMinor")


def parse_summary(text: str) -> list[dict[str, Any]]:
    """The devices of the Devices section of `vulkaninfo --summary`, in its order."""
    return [_describe(raw) for raw in _gpu_sections(text, "Devices:")]


def parse_details(text: str) -> dict[int, dict[str, str]]:
    """From vulkaninfo's full text output, per GPU index, the first value of each property
    in _DETAILS (subgroupSize appears twice, equal; --summary prints none of them)."""
    details: dict[int, dict[str, str]] = {}
    for raw in _gpu_sections(text, "Device Properties and Extensions:"):
        details[int(raw.pop("index"))] = {k: v for k, v in raw.items() if k in _DETAILS}
    return details


def _gpu_sections(text: str, title: str) -> list[dict[str, str]]:
    """Each GPUn: section after the line `title`, as {index, field: first value}."""
    sections: list[dict[str, str]] = []
    inside = False
    for line in text.splitlines():
        if line.strip() == title:
            inside = True
            continue
        if not inside:
            continue
        header = _GPU_HEADER.match(line)
        if header:
            sections.append({"index": header.group(1)})
            continue
        field = _FIELD.match(line)
        if field and sections:
            sections[-1].setdefault(field.group(1), field.group(2))
    return sections


def api_version(text: str) -> str:
    """The dotted version in vulkaninfo's apiVersion, which older releases print as
    `4206797 (1.3.205)` and newer ones as `1.3.230 (4206822)` or `1.3.230`."""
    found = _VERSION.search(text)
    return found.group(0) if found else text


def gres_type(name: str) -> str:
    """The model in a device name, for gres.conf's Type: `NVIDIA H200` -> h200,
    `NVIDIA Tegra Orin (nvgpu)` -> orin, `llvmpipe (LLVM 15.0.6, 256 bits)` -> llvmpipe;
    the words in brackets only when the rest names no model (Mesa's `AMD Radeon Graphics
    (RADV RAPHAEL_MENDOCINO)` -> raphael_mendocino)."""
    lowered = name.lower()
    outside = re.sub(r"\(.*?\)", " ", lowered)
    return _model(outside) or _model(" ".join(re.findall(r"\((.*?)\)", lowered))) or "gpu"


def _model(text: str) -> str:
    words = re.split(r"[^a-z0-9]+", text)
    return "_".join(word for word in words if word and not _NOT_MODEL.match(word))


def _describe(raw: dict[str, str]) -> dict[str, Any]:
    name = raw.get("deviceName", "")
    return {
        "index": int(raw["index"]),
        "name": name,
        "type": DEVICE_TYPES.get(raw.get("deviceType", ""), "other"),
        "driver": raw.get("driverName", ""),
        "driver_id": raw.get("driverID", ""),
        "driver_info": raw.get("driverInfo", ""),
        "api_version": api_version(raw.get("apiVersion", "")),
        "vendor_id": raw.get("vendorID", ""),
        "device_id": raw.get("deviceID", ""),
        "uuid": raw.get("deviceUUID", "").lower(),
        "device_files": [],
        "gres_file": None,
        "gres_type": gres_type(name),
        "features": [],
    }


def add_features(devices: list[dict[str, Any]], details: dict[int, dict[str, str]]) -> None:
    """Slurm node feature words of each device: its model, vulkanMAJOR.MINOR, subgroupN
    (the subgroup size) and fp64 (shaderFloat64), as far as details tell them."""
    for device in devices:
        detail = details.get(device["index"], {})
        words = {device["gres_type"]}
        version = _VERSION.match(device["api_version"])
        if version:
            words.add(f"vulkan{version.group(1)}.{version.group(2)}")
        if detail.get("subgroupSize", "").isdigit():
            words.add(f"subgroup{detail['subgroupSize']}")
        if detail.get("shaderFloat64") == "true":
            words.add("fp64")
        device["features"] = sorted(words)


def _numbered(paths: Iterable[str], pattern: re.Pattern[str]) -> list[str]:
    found = [(int(m.group(1)), p) for p in paths if (m := pattern.match(p))]
    return [path for _number, path in sorted(found)]


def assign_device_files(
    devices: list[dict[str, Any]],
    dev_paths: Iterable[str],
    tegra: bool,
    details: dict[int, dict[str, str]],
    nvidia_uuids: Mapping[str, str] | None = None,
) -> None:
    """Give each GPU the device nodes a job needs (device_files) and the one that stands
    for it in gres.conf (gres_file, first of device_files).

    NVIDIA's discrete GPUs take the /dev/nvidiaN whose GPU UUID (nvidia_uuids, from the
    driver's /proc information, see module_utils/nvidia_driver.py) is their deviceUUID, the
    way gpulab's payload matches them; where the driver's information is not visible, the
    remaining /dev/nvidiaN in enumeration order; plus the driver's shared nodes. The
    integrated GPU of a Tegra host (L4T) takes nvmap, nvhost-* and nvgpu/igpu0/*; other GPUs
    take the render node their VK_EXT_physical_device_drm names (renderMinor in details),
    else the next /dev/dri/renderD* in order. CPU devices (lavapipe) have no device file,
    so they never become Slurm GRES. A GPU listed twice (the same deviceUUID through two ICD
    manifests) gets the same files both times.
    """
    paths = sorted(set(dev_paths))
    by_uuid = {uuid: node for node, uuid in (nvidia_uuids or {}).items() if uuid and node in paths}
    own = {d["index"]: by_uuid[d["uuid"]] for d in devices if d.get("uuid") in by_uuid}
    nvidia = [node for node in _numbered(paths, _NVIDIA_NODE) if node not in own.values()]
    render = _numbered(paths, _RENDER_NODE)
    named = {index: _named_render_node(detail) for index, detail in details.items()}
    render = [node for node in render if node not in named.values()]
    seen: dict[str, list[str]] = {}  # by deviceUUID: a GPU the loader lists twice keeps its files
    for device in devices:
        if device["type"] == "cpu":
            continue
        if device.get("uuid") in seen:
            files = seen[device["uuid"]]
        elif device["driver_id"].startswith("DRIVER_ID_NVIDIA"):
            if tegra and device["type"] == "integrated":
                files = _tegra_files(paths)
            else:
                node = own.get(device["index"]) or (nvidia.pop(0) if nvidia else None)
                files = [node] if node else []
                files += [p for p in NVIDIA_SHARED_FILES if files and p in paths]
        elif named.get(device["index"]) in paths:
            files = [named[device["index"]]]
        else:
            files = [render.pop(0)] if render else []
        if device.get("uuid"):
            seen.setdefault(device["uuid"], files)
        device["device_files"] = files
        device["gres_file"] = files[0] if files else None


def _named_render_node(detail: dict[str, str]) -> str:
    """The render node VK_EXT_physical_device_drm names, or ""."""
    if detail.get("hasRender") == "true" and detail.get("renderMinor", "").isdigit():
        return f"/dev/dri/renderD{detail['renderMinor']}"
    return ""


def _tegra_files(paths: list[str]) -> list[str]:
    own = [p for p in TEGRA_GPU_FILES if p in paths][:1]
    if not own:
        return []
    shared = [p for p in paths if _TEGRA_NODE.match(p) and p != own[0]]
    return own + sorted(shared, key=lambda p: (p != "/dev/nvmap", p))
