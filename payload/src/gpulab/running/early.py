"""Start the Vulkan driver early: `gpulab run` begins creating the Vulkan instance and
enumerating its devices on a second thread, while the first imports numpy and the backends
and loads the graph.

The driver's own work (vkCreateInstance and the device enumeration: about 0.1 s on the H200's
driver; vkCreateDevice: 55-70 ms on the H100's) runs with the GIL released, so it overlaps the
imports instead of following them. The thread reports nothing: what it made is the
process-wide instance the run would have made anyway (gpulab.vk.shared_instance, thread-safe)
and, when asked, the device the run will choose, held for its session; whatever failed fails
again, with its proper message, when the run asks for the device. Handed the graph's values
once the graph is loaded (EarlyStart.allocate_for), the thread then allocates the memory of
the large ones on that device (gpulab.memory.ahead), which the session's manager takes.
"""

from __future__ import annotations

import contextlib
import queue
import threading
from collections.abc import Iterable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from gpulab.graph import Graph
    from gpulab.vk.device import Device

VULKAN_BACKENDS = ("auto", "vulkan")
"""The backends whose run opens a Vulkan device (auto: when one exists)."""
MOST_VALUES = 256
"""Graphs of more inputs and nodes than this get no memory ahead: allocating ahead serves
short runs on large vectors, and finding a large graph's large values would cost the run more
than it saves."""
SMALLEST_VALUE = 1 << 20
"""Values below this never get a dedicated block (gpulab.memory.blocks.MIN_BLOCK)."""

Values = list[tuple[int, str]]
"""(bytes, memory kind) of the values a run may hold on the device."""


def values_ahead(graph: Graph) -> Values:
    """The graph's values of at least SMALLEST_VALUE bytes that a device may hold, with the
    memory kind of their buffers: a .npy input is read into device memory the host maps
    (gpulab.backends.vulkan); none for a graph of more than MOST_VALUES values."""
    from gpulab.graph.model import NpyFile, nbytes  # noqa: PLC0415 - loaded with the graph

    if len(graph.inputs) + len(graph.nodes) > MOST_VALUES:
        return []
    values = [
        (nbytes(value.shape), "device_mapped" if isinstance(value.source, NpyFile) else "device")
        for value in graph.inputs.values()
    ]
    values += [
        (nbytes(node.shape), "device")
        for node in graph.nodes.values()
        if node.backend in (None, "vulkan")  # a node run on the host has no device buffer
    ]
    return [(size, kind) for size, kind in values if size >= SMALLEST_VALUE]


def _open_driver(device: int | None, open_ahead: bool) -> Device | None:
    """The device opened ahead, if one was asked for and could be."""
    # Any failure here, the run meets again and reports in its own words.
    try:
        with contextlib.suppress(Exception):
            from gpulab.vk.instance import shared_instance  # noqa: PLC0415 - numpy-free, see vk

            physical_devices = shared_instance().physical_devices()
            if open_ahead and physical_devices:
                from gpulab.placement.device_choice import choose_device  # noqa: PLC0415
                from gpulab.vk.ahead import open_ahead as open_device_ahead  # noqa: PLC0415

                choice = choose_device(device)
                if choice.name is not None:
                    return open_device_ahead(physical_devices[choice.index])
    finally:
        if open_ahead:
            from gpulab.vk.ahead import ahead_settled  # noqa: PLC0415

            ahead_settled()
    return None


class EarlyStart:
    """The early thread of one run (see the module docstring); finish() ends it."""

    def __init__(self, device: int | None, open_ahead: bool) -> None:
        self._open_ahead = open_ahead
        self._values: queue.SimpleQueue[Values | None] = queue.SimpleQueue()
        self._handed = False
        if open_ahead:
            from gpulab.vk.ahead import opening_ahead  # noqa: PLC0415

            opening_ahead()
        self.thread = threading.Thread(
            target=self._work, args=(device,), name="gpulab-vulkan-early", daemon=True
        )
        self.thread.start()

    def _work(self, device: int | None) -> None:
        opened = _open_driver(device, self._open_ahead)
        if not self._open_ahead:
            return
        values = self._values.get()  # allocate_for's, or finish()'s None
        if values is None:
            return
        from gpulab.vk.ahead import memory_settled  # noqa: PLC0415

        try:
            with contextlib.suppress(Exception):  # the run's own allocations report it
                if opened is not None and values:
                    from gpulab.memory.ahead import allocate_ahead  # noqa: PLC0415

                    allocate_ahead(opened, values)
        finally:
            memory_settled()

    def allocate_for(self, values: Iterable[tuple[int, str]]) -> None:
        """Have the thread allocate the dedicated blocks of `values` ((bytes, memory kind))
        on the device it opens, once (a device opened ahead only)."""
        if not self._open_ahead or self._handed:
            return
        from gpulab.vk.ahead import allocating_ahead  # noqa: PLC0415

        self._handed = True
        allocating_ahead()
        self._values.put(list(values))

    def join(self) -> None:
        """Wait for the driver and the device (the thread ends once it has nothing left)."""
        self._values.put(None)
        self.thread.join()

    def finish(self, *, release: bool = True) -> None:
        """Wait for the thread; with `release`, close a device it opened and free memory it
        allocated that the run did not take (without: the process's end releases them)."""
        self.join()
        if release and self._open_ahead:
            from gpulab.vk.ahead import close_unused_ahead  # noqa: PLC0415

            close_unused_ahead()


def start_vulkan(
    backend: str, device: int | None = None, *, open_ahead: bool = False
) -> EarlyStart | None:
    """Start opening the Vulkan driver for a run on `backend` (None for cpu and native); with
    `open_ahead`, also the device the run will choose (`device`: its --device), which the
    run's DeviceSession then takes (gpulab.vk.ahead.open_device)."""
    if backend not in VULKAN_BACKENDS:
        return None
    return EarlyStart(device, open_ahead)
