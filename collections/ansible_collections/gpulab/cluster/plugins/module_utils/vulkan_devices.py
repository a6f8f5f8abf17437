# Copyright: gpulab contributors
# MIT License (see LICENSE)
"""Reading Vulkan devices from vulkaninfo and matching them to the device files jobs need."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any, NamedTuple

from ansible_collections.gpulab.cluster.plugins.module_utils.gpu_files import (
    DRM_MAJOR,
    NVIDIA_SHARED_FILES,
    NVIDIA_VENDOR_ID,
    ListedFiles,
    match_file,
    node_kind,
    nvidia_nodes,
    render_nodes,
    tegra_files,
    tegra_gpu_file,
)

# VkPhysicalDeviceType as vulkaninfo prints it -> the contract's short names.
DEVICE_TYPES = {
    "PHYSICAL_DEVICE_TYPE_DISCRETE_GPU": "discrete",
    "PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU": "integrated",
    "PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU": "virtual",
    "PHYSICAL_DEVICE_TYPE_CPU": "cpu",
}

_GPU_HEADER = re.compile(r"^GPU(\d+):\s*$")
_FIELD = re.compile(r"^\s+(\w+)\s*=\s*(.*?)\s*$")
_VERSION = re.compile(r"(\d+)\.(\d+)\.(\d+)")
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


class Identity(NamedTuple):
    """What gpu_files matches a device file by, as far as vulkaninfo tells it: vulkaninfo's
    text has no PCI address, and its DRM render node is the one details name."""

    index: int
    type: str
    vendor_id: int
    uuid: str
    pci_bus: str | None
    drm_render: tuple[int, int] | None


def identity(device: Mapping[str, Any], detail: Mapping[str, str]) -> Identity:
    """The identity of a device of parse_summary, with its details (parse_details)."""
    vendor = device.get("vendor_id", "")
    try:
        vendor_id = int(vendor, 16)
    except ValueError:  # not printed: NVIDIA's driver speaks for NVIDIA's GPUs
        vendor_id = NVIDIA_VENDOR_ID if _nvidia_driver(device) else 0
    render = None
    if detail.get("hasRender") == "true" and detail.get("renderMinor", "").isdigit():
        render = (DRM_MAJOR, int(detail["renderMinor"]))
    return Identity(device["index"], device["type"], vendor_id, device["uuid"], None, render)


def _nvidia_driver(device: Mapping[str, Any]) -> bool:
    return str(device.get("driver_id", "")).startswith("DRIVER_ID_NVIDIA")


def assign_device_files(
    devices: list[dict[str, Any]],
    dev_paths: Iterable[str],
    tegra: bool,
    details: dict[int, dict[str, str]],
    nvidia: Mapping[int, Mapping[str, str]] | None = None,
) -> None:
    """Give each GPU the device nodes a job needs (device_files) and the one that stands
    for it in gres.conf (gres_file, first of device_files).

    Which node is which GPU is gpu_files' match_file, as in the payload: NVIDIA's discrete
    GPUs take the /dev/nvidiaN whose GPU UUID (nvidia: the driver's information by device
    minor, see module_utils/nvidia_driver.py) is their deviceUUID, the integrated GPU of a Tegra
    host (L4T) the first of gpu_files.TEGRA_GPU_FILES, other GPUs the render node their
    VK_EXT_physical_device_drm names (renderMinor in details). A GPU that matches no node takes
    the next one left of its kind, in number order (the driver's information is not visible,
    or the driver does not name its render node). Jobs also need NVIDIA's shared nodes and
    Tegra's nvmap and other GPU nodes. CPU devices (lavapipe) have no device file, so they
    never become Slurm GRES. A GPU listed twice (the same deviceUUID through two ICD
    manifests) gets the same files both times.
    """
    paths = sorted(set(dev_paths))
    firsts: dict[str, int] = {}  # by deviceUUID: the first of a GPU the loader lists twice
    gpus = []
    for device in devices:
        if device["type"] == "cpu" or device["uuid"] in firsts:
            continue
        if device["uuid"]:
            firsts[device["uuid"]] = device["index"]
        gpus.append(identity(device, details.get(device["index"], {})))
    nodes = nvidia_nodes(paths) + render_nodes(paths) + (tegra_gpu_file(paths) if tegra else [])
    host = ListedFiles(nvidia or {})
    matched: dict[tuple[int, str], str] = {}  # (device index, node kind) -> its node
    spare: dict[str, list[str]] = {"nvidia": [], "render": [], "tegra": []}
    for node in nodes:
        device = match_file(node, gpus, host).device
        if device is None:
            spare[node_kind(node)].append(node)
        else:
            matched.setdefault((device, node_kind(node)), node)
    nvidia_driver = {d["index"]: _nvidia_driver(d) for d in devices}
    files_of: dict[int, list[str]] = {}
    for gpu in gpus:
        if nvidia_driver[gpu.index] and tegra and gpu.type == "integrated":
            files_of[gpu.index] = tegra_files(paths) if (gpu.index, "tegra") in matched else []
            continue
        kind = "nvidia" if nvidia_driver[gpu.index] else "render"
        own = matched.get((gpu.index, kind)) or (spare[kind].pop(0) if spare[kind] else None)
        shared = [p for p in NVIDIA_SHARED_FILES if kind == "nvidia" and p in paths]
        files_of[gpu.index] = [own, *shared] if own else []
    for device in devices:
        first = firsts.get(device["uuid"], device["index"])
        files = files_of.get(first, []) if device["type"] != "cpu" else []
        device["device_files"] = files
        device["gres_file"] = files[0] if files else None
