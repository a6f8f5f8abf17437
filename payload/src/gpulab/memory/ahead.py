"""A graph's large buffers, allocated ahead of their requests.

`gpulab run` knows the sizes of a graph's values once it has loaded the graph, while it still
imports numpy, the backends and the kernels (about 0.1 s on the H100's host). A buffer above
half a block gets a dedicated block (gpulab.memory.blocks), and allocating one is the driver's
work with the GIL released: about 23 ms per GiB of VRAM on the H100, 69 ms of a 2^28 run's
record phase. So the early thread (gpulab.running.early) allocates those blocks here, as the
session's MemoryManager would, and leaves them in gpulab.vk.ahead; the manager takes them
when it opens and uses each for a request of its memory type and size, and frees the rest
after the first recording. A guess that is wrong costs the early thread's time, never the
run's: a block no request matches is freed unused.

Like gpulab.vk.ahead, this module imports neither numpy nor the modules that do.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from gpulab.memory.blocks import block_size_for, takes_dedicated_block
from gpulab.memory.memory_types import candidate_types
from gpulab.memory.size_classes import size_class
from gpulab.vk.ahead import hold_memory
from gpulab.vk.buffer import DEFAULT_USAGE, Buffer
from gpulab.vk.memory import DeviceMemory

if TYPE_CHECKING:
    from gpulab.vk.device import Device
    from gpulab.vk.physical_device import MemoryType

HEAP_SHARE = 2
"""At most 1/HEAP_SHARE of a heap is allocated ahead: a guess never crowds out the run."""


def dedicated_blocks(
    device: Device, values: Iterable[tuple[int, str]]
) -> list[tuple[MemoryType, int]]:
    """The memory type and size of the dedicated block that a MemoryManager without heap
    limits on `device` would allocate for each value of `values` ((bytes, memory kind)) that
    gets one, to 1/HEAP_SHARE of each heap."""
    info = device.info
    room = {heap.index: heap.size // HEAP_SHARE for heap in info.memory_heaps}
    blocks = []
    for nbytes, kind in values:
        buffer = Buffer(device, size_class(max(nbytes, 4)), DEFAULT_USAGE)
        size, type_bits = buffer.required_size, buffer.memory_type_bits
        buffer.close()
        candidates = candidate_types(info.memory_types, kind, type_bits)
        if not candidates:
            continue
        best = candidates[0]
        heap = info.memory_heaps[best.heap_index]
        if takes_dedicated_block(size, block_size_for(heap.size)) and size <= room[heap.index]:
            room[heap.index] -= size
            blocks.append((best, size))
    return blocks


def allocate_ahead(device: Device, values: Iterable[tuple[int, str]]) -> None:
    """Allocate the dedicated blocks of `values` (see dedicated_blocks) into gpulab.vk.ahead,
    until the driver runs out of memory: the requests that would then have failed fail in
    the run, with their proper message."""
    for memory_type, size in dedicated_blocks(device, values):
        try:
            memory = DeviceMemory(
                device, size, 1 << memory_type.index, required=memory_type.property_flags
            )
        except MemoryError:
            return
        hold_memory(memory)
