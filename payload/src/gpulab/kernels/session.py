"""DeviceSession: one Vulkan device and everything that works on it, each with one owner.

The session opens the device and owns, in this order, the memory manager, the stager (made on
first use), the kernels (their pipeline catalog) and a submitter (a command pool, a command
buffer and a fence); close() releases them in reverse order, the device last. Everything that
runs on a device starts from one: the Vulkan executor, the health check, the benchmarks, the
memory report and GpuComputePipeline. It lives in gpulab.kernels, the lowest layer that owns
all it holds (the memory layer's manager and stager, the kernels, vk's objects).
"""

from __future__ import annotations

from typing import Any

from gpulab._closeable import Closeable
from gpulab.kernels.recorder import Kernels
from gpulab.memory import MemoryManager, Stager
from gpulab.vk import DeviceInfo, Instance, PhysicalDevice, Submitter, shared_instance
from gpulab.vk.ahead import open_device


class DeviceSession(Closeable):
    """Opens device `device` (an index into `instance`'s devices, default the process-wide
    shared instance, or a PhysicalDevice) with its memory manager, stager, kernels and
    submitter. `memory_budget` caps every memory heap at that many bytes (None: the heaps'
    sizes); `max_binding_bytes` and `subgroups` are the Kernels' options. Use as a context
    manager or call close(); a second close() does nothing.
    """

    def __init__(
        self,
        device: int | PhysicalDevice = 0,
        *,
        instance: Instance | None = None,
        memory_budget: int | None = None,
        max_binding_bytes: int | None = None,
        subgroups: bool | None = None,
    ) -> None:
        if isinstance(device, PhysicalDevice):
            physical = device
        else:
            physical = (shared_instance() if instance is None else instance).physical_device(device)
        self.device = open_device(physical)
        self._stager: Stager | None = None
        try:
            heaps = self.device.info.memory_heaps
            self.heap_limits = {
                heap.index: heap.size if memory_budget is None else min(heap.size, memory_budget)
                for heap in heaps
            }
            """The bytes each memory heap may hold (the heap's size, or the budget)."""
            self.manager = MemoryManager(self.device, heap_limits=self.heap_limits)
            self.kernels = Kernels(
                self.device, max_binding_bytes=max_binding_bytes, subgroups=subgroups
            )
            self.submitter = Submitter(self.device)
        except BaseException:
            self.close()
            raise

    @property
    def info(self) -> DeviceInfo:
        """The properties of the session's device."""
        return self.device.info

    @property
    def closed(self) -> bool:
        return self.device.closed

    @property
    def stager(self) -> Stager:
        """The session's host <-> device transfers, made on first use (so a session that
        moves nothing holds no staging memory)."""
        if self._stager is None:
            self._stager = Stager(self.manager)
        return self._stager

    def open_stager(self, **options: Any) -> Stager:
        """Another Stager on the session's manager with `options` (Stager's keywords), for
        whoever compares configurations; the caller closes it, else the manager does."""
        return Stager(self.manager, **options)

    def close(self) -> None:
        """Release the submitter, kernels, stager and manager, then the device."""
        if self.device.closed:
            return
        for part in ("submitter", "kernels", "_stager", "manager"):
            held = vars(self).get(part)
            if held is not None:
                held.close()
        self.device.close()
