"""Which Vulkan device a GPU's device file belongs to.

- /dev/nvidiaN: the driver's /proc/driver/nvidia/gpus/*/information with `Device Minor: N`
  gives the GPU UUID (NVIDIA's Vulkan deviceUUID, no extension needed) and the PCI address
  (VK_EXT_pci_bus_info), tried in that order.
- /dev/dri/renderDN: its device number against VK_EXT_physical_device_drm's render node, else
  /sys/class/drm/renderDN/device (a PCI address) against VK_EXT_pci_bus_info.
- Tegra's nodes (/dev/nvgpu/..., /dev/nvhost-...): the one integrated NVIDIA device.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from gpulab.backends.nvidia_driver import NVIDIA_GPUS, gpu_uuid, nvidia_gpus
from gpulab.vk import DeviceInfo

NVIDIA_VENDOR_ID = 0x10DE
TEGRA_GPU_NODES = ("/dev/nvgpu/igpu0/ctrl", "/dev/nvhost-ctrl-gpu")
"""A Tegra GPU's own node (L4T r36, then older releases), as gres.conf names it."""

_NVIDIA_NODE = re.compile(r"^/dev/nvidia(\d+)$")
_RENDER_NODE = re.compile(r"^/dev/dri/(renderD\d+)$")
_TEGRA_NODE = re.compile(r"^/dev/(nvgpu/|nvhost-)")
_PCI_ADDRESS = re.compile(r"^[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$")


@dataclass(frozen=True)
class FileMatch:
    """A device file and the Vulkan device it maps to (None), with how or why not."""

    file: str
    device: int | None
    how: str


class HostFiles:
    """The driver files of this host, read under `root` (tests point it at a recorded tree)."""

    def __init__(self, root: Path = Path("/")) -> None:
        self.root = root

    def path(self, absolute: str) -> Path:
        """Where an absolute path of the host lies under `root`."""
        return self.root / absolute.lstrip("/")

    def nvidia_gpu(self, minor: int) -> dict[str, str] | None:
        """The information file's fields of the NVIDIA GPU with this device minor."""
        return nvidia_gpus(self.path(NVIDIA_GPUS)).get(minor)

    def char_device(self, file: str) -> tuple[int, int] | None:
        """(major, minor) of a character device file, None when it is not one."""
        try:
            status = self.path(file).stat()
        except OSError:
            return None
        if not stat.S_ISCHR(status.st_mode):
            return None
        return os.major(status.st_rdev), os.minor(status.st_rdev)

    def render_pci_address(self, name: str) -> str | None:
        """The PCI address of a DRM render node's device, None for a platform device."""
        try:
            address = self.path(f"/sys/class/drm/{name}/device").resolve(strict=True).name
        except OSError:
            return None
        return address.lower() if _PCI_ADDRESS.match(address.lower()) else None

    def gpu_nodes(self) -> list[str]:
        """This host's per-GPU nodes: /dev/nvidiaN, /dev/dri/renderDN, Tegra's GPU node."""
        nvidia = [f"/dev/{p.name}" for p in self.path("/dev").glob("nvidia*")]
        render = [f"/dev/dri/{p.name}" for p in self.path("/dev/dri").glob("renderD*")]
        tegra = [node for node in TEGRA_GPU_NODES if self.path(node).exists()][:1]
        numbered = [n for n in nvidia if _NVIDIA_NODE.match(n)] + render
        return sorted(numbered, key=_number) + tegra


def _number(node: str) -> tuple[str, int]:
    prefix = node.rstrip("0123456789")
    return prefix, int(node[len(prefix) :])


def _pair(number: tuple[int, int] | None) -> str:
    return "?" if number is None else f"{number[0]}:{number[1]}"


def _one(file: str, found: list[DeviceInfo], how: str, why_not: str) -> FileMatch:
    if len(found) == 1:
        return FileMatch(file, found[0].index, how)
    if found:
        indices = ", ".join(str(info.index) for info in found)
        return FileMatch(file, None, f"{how} fits several Vulkan devices ({indices})")
    return FileMatch(file, None, why_not)


def _nvidia(file: str, minor: int, infos: Sequence[DeviceInfo], host: HostFiles) -> FileMatch:
    fields = host.nvidia_gpu(minor)
    if fields is None:
        return FileMatch(file, None, f"no {NVIDIA_GPUS}/*/information has Device Minor {minor}")
    uuid = gpu_uuid(fields)
    by_uuid = [info for info in infos if uuid and info.uuid == uuid]
    if by_uuid:
        return _one(file, by_uuid, f"GPU UUID {uuid}", "")
    address = fields.get("Bus Location", "").lower()
    return _one(
        file,
        [info for info in infos if address and info.pci_bus == address],
        f"PCI address {address}",
        f"no Vulkan device has GPU UUID {uuid or '?'} or PCI address {address or '?'}",
    )


def _render(file: str, name: str, infos: Sequence[DeviceInfo], host: HostFiles) -> FileMatch:
    number = host.char_device(file)
    by_number = [info for info in infos if number is not None and info.drm_render == number]
    if number is not None and by_number:
        return _one(file, by_number, f"DRM render node {number[0]}:{number[1]}", "")
    address = host.render_pci_address(name)
    return _one(
        file,
        [info for info in infos if address and info.pci_bus == address],
        f"PCI address {address}",
        f"no Vulkan device has render node {_pair(number)} or PCI address {address or '?'}",
    )


def match_file(file: str, infos: Sequence[DeviceInfo], host: HostFiles) -> FileMatch:
    """The Vulkan device that `file` (a gres.conf File=) belongs to, and how; or why none."""
    if nvidia := _NVIDIA_NODE.match(file):
        return _nvidia(file, int(nvidia[1]), infos, host)
    if render := _RENDER_NODE.match(file):
        return _render(file, render[1], infos, host)
    if _TEGRA_NODE.match(file):
        integrated = [
            info
            for info in infos
            if info.vendor_id == NVIDIA_VENDOR_ID and info.type == "integrated"
        ]
        return _one(
            file, integrated, "Tegra's integrated GPU", "no integrated NVIDIA Vulkan device"
        )
    return FileMatch(
        file, None, "not a GPU node gpulab knows (/dev/nvidiaN, /dev/dri/renderDN, Tegra's)"
    )


def files_by_device(infos: Sequence[DeviceInfo], host: HostFiles) -> dict[int, list[str]]:
    """Each device's per-GPU nodes on this host (devices with none are left out)."""
    found: dict[int, list[str]] = {}
    for node in host.gpu_nodes():
        match = match_file(node, infos, host)
        if match.device is not None:
            found.setdefault(match.device, []).append(node)
    return found
