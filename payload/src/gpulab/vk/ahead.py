"""Devices opened ahead of their use, on another thread.

`gpulab run` opens its device on a second thread while the first imports numpy and the
kernels (gpulab.running.early): vkCreateDevice takes 55-70 ms on the H100's driver, with the
GIL released. The device waits here until the run's session asks for its physical device
(open_device). This module loads the Vulkan binding only when a device is opened, so the
thread that starts the early work never does.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from gpulab.vk.device import Device
    from gpulab.vk.physical_device import PhysicalDevice

_ahead: dict[int, Device] = {}
_ahead_lock = threading.Lock()
_ahead_settled = threading.Event()
_ahead_settled.set()


def opening_ahead() -> None:
    """A device is being opened ahead (on another thread): open_device waits for it until
    ahead_settled() (call both, the second whatever happens)."""
    _ahead_settled.clear()


def ahead_settled() -> None:
    _ahead_settled.set()


def open_ahead(physical_device: PhysicalDevice) -> None:
    """Open a device of `physical_device` for the next open_device to take."""
    from gpulab.vk.device import Device  # noqa: PLC0415 - the binding, on this thread only

    device = Device(physical_device)
    with _ahead_lock:
        earlier = _ahead.pop(id(physical_device), None)
        _ahead[id(physical_device)] = device
    if earlier is not None:
        earlier.close()


def open_device(physical_device: PhysicalDevice) -> Device:
    """The device opened ahead for `physical_device` (waiting while one is being opened), else
    a new one; the caller owns it."""
    from gpulab.vk.device import Device  # noqa: PLC0415

    _ahead_settled.wait()
    with _ahead_lock:
        device = _ahead.pop(id(physical_device), None)
    return device if device is not None and not device.closed else Device(physical_device)


def close_unused_ahead() -> None:
    """Close the devices opened ahead that no one took (the run chose another, or failed)."""
    _ahead_settled.wait()
    with _ahead_lock:
        left = list(_ahead.values())
        _ahead.clear()
    for device in left:
        device.close()
