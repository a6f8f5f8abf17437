# Copyright: gpulab contributors
# MIT License (see LICENSE)
"""What NVIDIA's kernel driver says about each GPU: /proc/driver/nvidia/gpus/<pci>/information.

The one reader of that file in gpulab: this file, the collection's module_utils, serves
vulkan_facts and gpu_files (which matches a /dev/nvidiaN to its Vulkan device, for gres.conf
and in a job) and is also the payload's gpulab.placement.nvidia_driver (a link here, resolved
when the wheel is built), beside the payload's gpu_files (a link too). So it uses the standard
library only. The GPU UUID there is the Vulkan deviceUUID of the same GPU.
"""

from __future__ import annotations

from pathlib import Path

NVIDIA_GPUS = "/proc/driver/nvidia/gpus"


def parse_nvidia_information(text: str) -> dict[str, str]:
    """`Key: value` lines of /proc/driver/nvidia/gpus/<pci>/information."""
    fields = {}
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep:
            fields[key.strip()] = value.strip()
    return fields


def nvidia_gpus(directory: str | Path = NVIDIA_GPUS) -> dict[int, dict[str, str]]:
    """Each GPU's information fields by its device minor (the N of /dev/nvidiaN); empty
    when the driver is not loaded or the directory is not visible (a container)."""
    found: dict[int, dict[str, str]] = {}
    for information in sorted(Path(directory).glob("*/information")):
        try:
            fields = parse_nvidia_information(information.read_text())
        except OSError:
            continue
        minor = fields.get("Device Minor", "")
        if minor.isdigit():
            found[int(minor)] = fields
    return found


def gpu_uuid(fields: dict[str, str]) -> str:
    """The GPU UUID of an information file, as Vulkan prints deviceUUID (lowercase, no
    `GPU-` prefix); "" when the file has none."""
    return fields.get("GPU UUID", "").lower().removeprefix("gpu-")
