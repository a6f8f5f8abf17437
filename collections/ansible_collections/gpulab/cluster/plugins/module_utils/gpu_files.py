# Copyright: gpulab contributors
# MIT License (see LICENSE)
"""Which device file belongs to which GPU: the one place gpulab decides it.

- /dev/nvidiaN: the driver's /proc/driver/nvidia/gpus/*/information with `Device Minor: N`
  gives the GPU UUID (NVIDIA's Vulkan deviceUUID, no extension needed) and the PCI address
  (VK_EXT_pci_bus_info), tried in that order.
- /dev/dri/renderDN: its device number against VK_EXT_physical_device_drm's render node, else
  /sys/class/drm/renderDN/device (a PCI address) against VK_EXT_pci_bus_info.
- Tegra's nodes (/dev/nvgpu/igpu0/..., /dev/nvhost-...): the one integrated NVIDIA device;
  the first of TEGRA_GPU_FILES present stands for it in gres.conf.

This file, the collection's module_utils, serves vulkan_facts (through vulkan_devices: each
GPU's files for gres.conf) and is also the payload's gpulab.placement.gpu_files (a link here,
resolved when the wheel is built: a job's gres.conf files matched to its Vulkan devices). So it
imports the standard library and, relatively, nvidia_driver (shared the same way) only.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from .nvidia_driver import NVIDIA_GPUS, gpu_uuid, nvidia_gpus

NVIDIA_VENDOR_ID = 0x10DE
DRM_MAJOR = 226
"""The device major of every DRM node: /dev/dri/renderDN is 226:N."""
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
# Tegra's memory manager, which a job on the GPU opens beside the GPU's own nodes.
TEGRA_SHARED_FILES = ("/dev/nvmap",)
# Where GPU device nodes lie, relative to /dev: NVIDIA's, DRM render nodes, Tegra's.
DEVICE_NODE_GLOBS = ("nvidia*", "dri/renderD*", "nvmap", "nvhost-*", "nvgpu/igpu0/*")

_NVIDIA_NODE = re.compile(r"^/dev/nvidia(\d+)$")
_RENDER_NODE = re.compile(r"^/dev/dri/renderD(\d+)$")
_TEGRA_NODE = re.compile(r"^/dev/(nvhost-[\w-]+|nvgpu/igpu0/[\w-]+)$")
_PCI_ADDRESS = re.compile(r"^[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$")


class Gpu(Protocol):
    """What tells one Vulkan device from another: the payload's gpulab.vk.DeviceInfo, or
    vulkan_devices.Identity of a device vulkaninfo printed."""

    @property
    def index(self) -> int: ...

    @property
    def type(self) -> str: ...

    @property
    def vendor_id(self) -> int: ...

    @property
    def uuid(self) -> str: ...

    @property
    def pci_bus(self) -> str | None: ...

    @property
    def drm_render(self) -> tuple[int, int] | None: ...


class DriverFiles(Protocol):
    """What the host's drivers tell about a device file: HostFiles reads them, ListedFiles
    answers from what was read before."""

    def nvidia_gpu(self, minor: int) -> Mapping[str, str] | None: ...

    def char_device(self, file: str) -> tuple[int, int] | None: ...

    def render_pci_address(self, name: str) -> str | None: ...


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
        own = tegra_gpu_file(node for node in TEGRA_GPU_FILES if self.path(node).exists())
        return render_nodes(render) + nvidia_nodes(nvidia) + own  # /dev/dri/ sorts first


class ListedFiles:
    """The device files as a listing of their names tells them, with the NVIDIA driver's
    information read before (by device minor): a render node's number is its name's, and no
    PCI address is known for it."""

    def __init__(self, nvidia: Mapping[int, Mapping[str, str]]) -> None:
        self.nvidia = nvidia

    def nvidia_gpu(self, minor: int) -> Mapping[str, str] | None:
        return self.nvidia.get(minor)

    def char_device(self, file: str) -> tuple[int, int] | None:
        render = _RENDER_NODE.match(file)
        return (DRM_MAJOR, int(render.group(1))) if render else None

    def render_pci_address(self, name: str) -> str | None:
        return None


def numbered(paths: Iterable[str], pattern: re.Pattern[str]) -> list[str]:
    """The paths that `pattern` matches, in the order of the number it captures."""
    found = []
    for path in paths:
        match = pattern.match(path)
        if match:
            found.append((int(match.group(1)), path))
    return [path for _number, path in sorted(found)]


def nvidia_nodes(paths: Iterable[str]) -> list[str]:
    """The /dev/nvidiaN among `paths`, in the order of N."""
    return numbered(paths, _NVIDIA_NODE)


def render_nodes(paths: Iterable[str]) -> list[str]:
    """The /dev/dri/renderDN among `paths`, in the order of N."""
    return numbered(paths, _RENDER_NODE)


def tegra_gpu_file(paths: Iterable[str]) -> list[str]:
    """The node that stands for Tegra's GPU in gres.conf, the first of TEGRA_GPU_FILES among
    `paths`, as a list of one; empty when there is none."""
    present = set(paths)
    return [node for node in TEGRA_GPU_FILES if node in present][:1]


def tegra_files(paths: Iterable[str]) -> list[str]:
    """The nodes a job on Tegra's GPU needs, the one gres.conf names first, then nvmap, then
    the GPU's other nodes by name; empty without the GPU's own node."""
    present = sorted(set(paths))
    own = tegra_gpu_file(present)
    if not own:
        return []
    shared = [p for p in present if (p in TEGRA_SHARED_FILES or _TEGRA_NODE.match(p))]
    rest = [p for p in shared if p != own[0]]
    return own + sorted(rest, key=lambda p: (p not in TEGRA_SHARED_FILES, p))


def node_kind(file: str) -> str:
    """`nvidia`, `render` or `tegra` for a per-GPU node gpulab knows, else ""."""
    if _NVIDIA_NODE.match(file):
        return "nvidia"
    if _RENDER_NODE.match(file):
        return "render"
    return "tegra" if _TEGRA_NODE.match(file) else ""


def _pair(number: tuple[int, int] | None) -> str:
    return "?" if number is None else f"{number[0]}:{number[1]}"


def _one(file: str, found: Sequence[Gpu], how: str, why_not: str) -> FileMatch:
    if len(found) == 1:
        return FileMatch(file, found[0].index, how)
    if found:
        indices = ", ".join(str(gpu.index) for gpu in found)
        return FileMatch(file, None, f"{how} fits several Vulkan devices ({indices})")
    return FileMatch(file, None, why_not)


def _nvidia(file: str, minor: int, gpus: Sequence[Gpu], host: DriverFiles) -> FileMatch:
    fields = host.nvidia_gpu(minor)
    if fields is None:
        return FileMatch(file, None, f"no {NVIDIA_GPUS}/*/information has Device Minor {minor}")
    uuid = gpu_uuid(dict(fields))
    by_uuid = [gpu for gpu in gpus if uuid and gpu.uuid == uuid]
    if by_uuid:
        return _one(file, by_uuid, f"GPU UUID {uuid}", "")
    address = fields.get("Bus Location", "").lower()
    return _by_pci_address(file, gpus, address, f"GPU UUID {uuid or '?'}")


def _render(file: str, gpus: Sequence[Gpu], host: DriverFiles) -> FileMatch:
    number = host.char_device(file)
    by_number = [gpu for gpu in gpus if number is not None and gpu.drm_render == number]
    if number is not None and by_number:
        return _one(file, by_number, f"DRM render node {_pair(number)}", "")
    address = host.render_pci_address(os.path.basename(file))
    return _by_pci_address(file, gpus, address, f"render node {_pair(number)}")


def _by_pci_address(
    file: str, gpus: Sequence[Gpu], address: str | None, first_tried: str
) -> FileMatch:
    """The fallback of both matches: the GPU at `address`, or why none (after `first_tried`)."""
    return _one(
        file,
        [gpu for gpu in gpus if address and gpu.pci_bus == address],
        f"PCI address {address}",
        f"no Vulkan device has {first_tried} or PCI address {address or '?'}",
    )


def match_file(file: str, gpus: Sequence[Gpu], host: DriverFiles) -> FileMatch:
    """The Vulkan device that `file` (a gres.conf File=) belongs to, and how; or why none."""
    kind = node_kind(file)
    if kind == "nvidia":
        return _nvidia(file, int(file[len("/dev/nvidia") :]), gpus, host)
    if kind == "render":
        return _render(file, gpus, host)
    if kind == "tegra":
        integrated = [
            gpu for gpu in gpus if gpu.vendor_id == NVIDIA_VENDOR_ID and gpu.type == "integrated"
        ]
        return _one(
            file, integrated, "Tegra's integrated GPU", "no integrated NVIDIA Vulkan device"
        )
    return FileMatch(
        file, None, "not a GPU node gpulab knows (/dev/nvidiaN, /dev/dri/renderDN, Tegra's)"
    )


def files_by_device(gpus: Sequence[Gpu], host: HostFiles) -> dict[int, list[str]]:
    """Each device's per-GPU nodes on this host (devices with none are left out)."""
    found: dict[int, list[str]] = {}
    for node in host.gpu_nodes():
        match = match_file(node, gpus, host)
        if match.device is not None:
            found.setdefault(match.device, []).append(node)
    return found
