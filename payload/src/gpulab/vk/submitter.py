"""Submitter: a command pool, a command buffer from it and a fence, the unit every caller that
records, submits and waits needs."""

from __future__ import annotations

from typing import TYPE_CHECKING

from gpulab._closeable import Closeable
from gpulab.vk.commands import CommandBuffer, CommandPool
from gpulab.vk.sync import Fence

if TYPE_CHECKING:
    from gpulab.vk.device import Device


class Submitter(Closeable):
    """Owns a command pool, one command buffer (`command`) and a fence on `device`.

    Record into `command` (or into more buffers from `allocate()`, which the pool owns), then
    `submit()` runs one on the device's queue and waits for it. close() destroys the fence,
    then the pool with its buffers; a second call does nothing.
    """

    def __init__(self, device: Device) -> None:
        self.device = device
        self.pool = CommandPool(device)
        try:
            self.command: CommandBuffer = self.pool.allocate()
            self.fence = Fence(device)
        except BaseException:
            self.pool.close()
            raise

    def allocate(self) -> CommandBuffer:
        """Another command buffer from the pool (closed with it, or on its own)."""
        return self.pool.allocate()

    def submit(self, command: CommandBuffer | None = None) -> None:
        """Submit `command` (default: the own buffer), wait until it ran, reset the fence."""
        self.device.submit(self.command if command is None else command, self.fence)
        self.fence.wait()
        self.fence.reset()

    @property
    def closed(self) -> bool:
        return self.pool.closed

    def close(self) -> None:
        self.fence.close()
        self.pool.close()
