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

_ahead: Device | None = None
"""The device opened ahead, until a session takes it or close_unused_ahead closes it."""
_ahead_settled = threading.Event()
_ahead_settled.set()


def opening_ahead() -> None:
    """A device is being opened ahead (on another thread): open_device waits for it until
    ahead_settled() (call both, the second whatever happens)."""
    _ahead_settled.clear()


def ahead_settled() -> None:
    _ahead_settled.set()


def open_ahead(physical_device: PhysicalDevice) -> None:
    """Open a device of `physical_device` for open_device to take (between opening_ahead and
    ahead_settled, on the thread that opens it)."""
    from gpulab.vk.device import Device  # noqa: PLC0415 - the binding, on this thread only

    global _ahead  # noqa: PLW0603 - the one slot, handed over through _ahead_settled
    _ahead = Device(physical_device)


def _take() -> Device | None:
    global _ahead
    _ahead_settled.wait()
    device, _ahead = _ahead, None
    return device


def open_device(physical_device: PhysicalDevice) -> Device:
    """The device opened ahead for `physical_device` (waiting while one is being opened), else
    a new one; the caller owns it."""
    from gpulab.vk.device import Device  # noqa: PLC0415

    device = _take()
    if device is not None and device.physical_device is physical_device:
        return device
    if device is not None:
        device.close()  # opened for a device this process did not ask for after all
    return Device(physical_device)


def close_unused_ahead() -> None:
    """Close the device opened ahead if no one took it (the run chose cpu, or failed)."""
    device = _take()
    if device is not None:
        device.close()
