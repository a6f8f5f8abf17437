"""Memory allocated ahead (gpulab.memory.ahead) on a real device (lavapipe here): the blocks
are those a MemoryManager would make, a manager takes them for its requests, and what it does
not take is freed."""

from __future__ import annotations

from gpulab.memory import MemoryManager
from gpulab.memory.ahead import HEAP_SHARE, allocate_ahead, dedicated_blocks
from gpulab.vk import Device, live_handles
from gpulab.vk.ahead import take_memory

MIB = 1 << 20
LARGE = 160 * MIB
"""Above half of the 256 MiB blocks of lavapipe's heap: a dedicated block."""


def test_the_blocks_ahead_are_those_the_manager_makes(device: Device) -> None:
    blocks = dedicated_blocks(device, [(LARGE, "device"), (MIB, "device"), (100 * MIB, "device")])
    assert [size for _, size in blocks] == [LARGE]
    with MemoryManager(device) as manager:
        allocation = manager.allocate(LARGE)
        made = allocation.memory
        assert (made.memory_type, made.size) == blocks[0]
        allocation.free()


def test_at_most_a_share_of_a_heap_is_allocated_ahead(device: Device) -> None:
    memory_type, _ = dedicated_blocks(device, [(LARGE, "device")])[0]
    heap = device.info.memory_heaps[memory_type.heap_index]
    many = heap.size // LARGE + 2
    blocks = dedicated_blocks(device, [(LARGE, "device")] * many)
    assert 0 < sum(size for _, size in blocks) <= heap.size // HEAP_SHARE
    assert len(blocks) < many


def test_a_manager_takes_the_memory_of_its_requests_and_frees_the_rest(device: Device) -> None:
    memories_before = live_handles().get("DeviceMemory", 0)
    allocate_ahead(device, [(LARGE, "device"), (LARGE + 64 * MIB, "device")])
    ahead = take_memory(device)
    assert len(ahead) == 2
    assert take_memory(device) == []  # taken once
    with MemoryManager(device, ahead=ahead) as manager:
        allocation = manager.allocate(LARGE)
        assert allocation.memory is ahead[0]
        assert manager.taken_ahead == 1
        assert live_handles()["DeviceMemory"] == memories_before + 2
        manager.release_ahead()
        assert ahead[1].closed
        assert live_handles()["DeviceMemory"] == memories_before + 1
        allocation.free()  # a dedicated block: back to the driver
    assert live_handles().get("DeviceMemory", 0) == memories_before


def test_closing_the_manager_frees_memory_it_never_took(device: Device) -> None:
    allocate_ahead(device, [(LARGE, "device")])
    ahead = take_memory(device)
    with MemoryManager(device, ahead=ahead) as manager:
        manager.allocate(MIB).free()  # a shared block: not the one ahead
        assert manager.taken_ahead == 0
    assert ahead[0].closed
