"""MemoryManager on a real device (lavapipe here): buffers bound in shared blocks, OOM, release."""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import pytest
from gpulab.memory import (
    Allocation,
    AllocationFreedError,
    BufferPool,
    FirstFitAllocator,
    MemoryManager,
    OutOfMemoryError,
    Stager,
    allocate_dedicated,
)
from gpulab.vk import Device, ObjectClosedError, live_handles

MIB = 1 << 20
STAGED = {"upload": "staged", "download": "staged"}


def test_allocations_share_a_block_at_aligned_offsets(device: Device) -> None:
    with MemoryManager(device) as manager:
        a, b = manager.allocate(1000), manager.allocate(1000)
        assert a.memory is b.memory
        assert a.buffer.memory is a.memory and a.buffer.size == 1000
        storage = device.info.min_storage_buffer_offset_alignment
        assert b.offset % max(storage, b.buffer.alignment) == 0
        assert b.offset >= a.offset + 1000
        # Another kind shares the block where it takes the same memory type (lavapipe has one
        # type for every kind; a discrete GPU stages through system memory).
        staging = manager.allocate(1000, kind="upload")
        same_type = staging.memory_type == a.memory_type
        assert (staging.memory is a.memory) == same_type
        assert live_handles()["DeviceMemory"] == (1 if same_type else 2)
        assert manager.stats()["suballocator"] == "native"


def test_mapped_writes_and_reads_stay_inside_the_allocation(device: Device) -> None:
    with MemoryManager(device) as manager:
        a, b = manager.allocate(400, kind="mapped"), manager.allocate(400, kind="mapped")
        assert a.memory is b.memory
        a.write(np.arange(100, dtype=np.float32))
        b.write(np.full(100, -1.0, dtype=np.float32))
        np.testing.assert_array_equal(a.read(np.float32, 100), np.arange(100, dtype=np.float32))
        np.testing.assert_array_equal(b.read(np.float32, 100), np.full(100, -1.0))
        with pytest.raises(ValueError, match="exceeds the 400-byte allocation"):
            a.view(np.float32, 101)


def test_use_after_free_raises(device: Device) -> None:
    with MemoryManager(device) as manager:
        allocation = manager.allocate(256)
        allocation.free()
        allocation.free()  # a second free does nothing
        with pytest.raises(AllocationFreedError, match="used after free"):
            _ = allocation.buffer
        with pytest.raises(AllocationFreedError):
            allocation.read(np.float32, 1)


def test_large_buffers_get_dedicated_memory(device: Device) -> None:
    with MemoryManager(device, block_size=4 * MIB) as manager:
        big = manager.allocate(3 * MIB)
        assert big.dedicated and big.offset == 0
        big.free()
        assert manager.stats()["dedicated_count"] == 0


def device_heap(device: Device) -> int:
    """The heap of the memory type that device allocations take first."""
    with MemoryManager(device) as probe:
        return probe.allocate(4).memory_type.heap_index


def test_out_of_memory_names_heap_request_and_usage(device: Device) -> None:
    heap = device_heap(device)
    # Room for two requests in the device memory's heap, none in any other (on the H100,
    # system memory took the third one).
    limits = {h.index: 0 for h in device.info.memory_heaps} | {heap: 8 * MIB}
    with MemoryManager(device, heap_limits=limits, block_size=4 * MIB) as manager:
        held = [manager.allocate(3 * MIB), manager.allocate(3 * MIB)]
        with pytest.raises(OutOfMemoryError) as caught:
            manager.allocate(3 * MIB)
        assert (caught.value.heap, caught.value.limit) == (heap, 8 * MIB)
        assert caught.value.usage == sum(a.buffer.required_size for a in held)
        assert "3145728 bytes (3.0 MiB) of device memory" in str(caught.value)
        held.pop().free()
        manager.allocate(3 * MIB).free()  # the freed space is usable again


def test_empty_blocks_go_after_the_grace_period(device: Device) -> None:
    now = [0.0]
    with MemoryManager(device, grace_s=5.0, clock=lambda: now[0]) as manager:
        manager.allocate(1000).free()
        assert manager.stats()["block_count"] == 1
        now[0] = 6.0
        manager.blocks.release_expired()  # what every allocate and free does first
        assert manager.stats()["block_count"] == 0
        assert "DeviceMemory" not in live_handles()


def test_closing_releases_every_handle(device: Device) -> None:
    manager = MemoryManager(device)
    held = [manager.allocate(100 * (i + 1)) for i in range(20)]
    manager.close()
    assert not {"Buffer", "DeviceMemory"} & set(live_handles())
    with pytest.raises(ObjectClosedError, match="MemoryManager is used after close"):
        manager.allocate(100)
    del held


def test_random_allocate_free_on_the_device(device: Device) -> None:
    """A smaller real-device variant of the stress test: contents survive neighbours' churn.

    The contents go in and out through the copy engine, as device memory the host cannot map
    does; the staging rings come from a manager of their own.
    """
    rng = random.Random(3)
    with (
        MemoryManager(device, allocator_factory=FirstFitAllocator) as manager,
        MemoryManager(device) as staging,
        Stager(staging, paths=STAGED) as stager,
    ):

        def contents(allocation: Allocation) -> Any:
            return stager.download(allocation, allocation.size // 4, np.uint32)

        live: list[tuple[Allocation, int]] = []
        for step in range(600):
            if live and rng.random() < 0.45:
                allocation, value = live.pop(rng.randrange(len(live)))
                assert (contents(allocation) == value).all()
                allocation.free()
            else:
                allocation = manager.allocate(4 * rng.randint(1, 20_000))
                stager.upload(np.full(allocation.size // 4, step, dtype=np.uint32), allocation)
                live.append((allocation, step))
        assert manager.stats()["allocation_count"] == len(live)
        for allocation, value in live:
            assert (contents(allocation) == value).all()


def test_freeing_everything_leaves_one_region_per_native_block_then_none(device: Device) -> None:
    rng = random.Random(11)
    with MemoryManager(device, block_size=8 * MIB) as manager:
        held = [manager.allocate(rng.randint(1, 600_000)) for _ in range(60)]
        assert manager.stats()["block_count"] >= 2
        rng.shuffle(held)
        for allocation in held:
            allocation.free()
        blocks = [b for group in manager.blocks.blocks.values() for b in group]
        for block in blocks:
            assert block.offsets is not None
            stats = block.offsets.stats()
            assert (stats.free_region_count, stats.largest_free_region) == (1, block.size)
        manager.trim()
        assert manager.stats()["block_count"] == 0
        assert "DeviceMemory" not in live_handles()


def test_closing_closes_the_attached_pools_and_stagers_first(device: Device) -> None:
    manager = MemoryManager(device)
    pool, stager = BufferPool(manager, budget_bytes=MIB), Stager(manager)
    pool.acquire(100).free()
    assert set(manager.stats()) >= {"pool", "transfers"}
    manager.close()
    assert pool.closed and stager.stats()["pinned_arrays"] == 0
    assert not {"DeviceMemory", "CommandPool"} & set(live_handles())  # the stager's too


def test_a_dedicated_allocation_has_memory_of_its_own_until_freed(device: Device) -> None:
    before = live_handles()
    with allocate_dedicated(device, 1000, "mapped", label="alone") as alone:
        assert alone.dedicated and alone.offset == 0 and alone.memory.size >= 1000
        alone.write(np.arange(250, dtype=np.float32))
        np.testing.assert_array_equal(alone.read(np.float32, 250), np.arange(250))
        assert live_handles()["DeviceMemory"] == before.get("DeviceMemory", 0) + 1
    assert live_handles() == before
    with pytest.raises(AllocationFreedError):
        _ = alone.buffer
