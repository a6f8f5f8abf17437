"""BufferPool: reuse by size class, LRU eviction under the budget, lifetimes, use after release."""

from __future__ import annotations

import pytest
from gpulab.memory import AllocationFreedError, BufferPool, MemoryManager, size_class
from gpulab.vk import Device, live_handles

MIB = 1 << 20


def test_size_classes_waste_at_most_a_quarter() -> None:
    assert size_class(1) == 256
    assert size_class(1000) == 1024
    assert size_class(1025) == 1280
    assert size_class(3 * MIB + 1) == 3 * MIB + MIB // 2
    assert size_class(300 * MIB + 1) == 300 * MIB + 4096
    for n in (257, 999, 12345, 7 * MIB + 3):
        assert n <= size_class(n) <= n * 1.25 + 1


def test_a_released_buffer_is_reused_without_vulkan_calls(device: Device) -> None:
    with MemoryManager(device) as manager, BufferPool(manager, 64 * MIB) as pool:
        first = pool.acquire(1000, label="node s")
        buffer = first.buffer
        first.free()  # for a pooled allocation, free() returns it to the pool
        buffers_before = live_handles()["Buffer"]
        second = pool.acquire(900)  # same size class
        assert second.buffer is buffer and second.size == 900 and second.capacity == 1024
        assert live_handles()["Buffer"] == buffers_before
        stats = pool.stats()
        assert (stats["hits"], stats["misses"], stats["hit_rate"]) == (1, 1, 0.5)
        assert manager.stats()["pool"]["hit_rate"] == 0.5
        pool.release(second)


def test_use_after_release_raises_even_though_the_buffer_lives_on(device: Device) -> None:
    with MemoryManager(device) as manager, BufferPool(manager, 64 * MIB) as pool:
        allocation = pool.acquire(4096)
        pool.release(allocation)
        reused = pool.acquire(4096)
        with pytest.raises(AllocationFreedError, match="used after free"):
            _ = allocation.buffer
        with pytest.raises(AllocationFreedError):
            pool.release(allocation)
        assert not reused.freed
        reused.free()


def test_only_its_own_allocations_go_back_to_a_pool(device: Device) -> None:
    with MemoryManager(device) as manager, BufferPool(manager, MIB) as pool:
        stranger = manager.allocate(1000)
        with pytest.raises(ValueError, match="was not acquired from this pool"):
            pool.release(stranger)
        assert not stranger.freed  # still the manager's, still usable
        stranger.free()


def test_the_budget_evicts_least_recently_used_first(device: Device) -> None:
    with MemoryManager(device) as manager, BufferPool(manager, 3 * MIB) as pool:
        a, b, c = (pool.acquire(MIB) for _ in range(3))
        buffer_a, buffer_c = a.buffer, c.buffer
        for allocation in (a, b, c):
            allocation.free()
        assert pool.stats()["cached_bytes"] == 3 * MIB
        pool.acquire(2 * MIB).free()  # over budget: the two oldest cached (a, b) go
        stats = pool.stats()
        assert stats["evictions"] == 2 and stats["cached_bytes"] == 3 * MIB
        assert buffer_a.closed and not buffer_c.closed
        assert pool.acquire(MIB).buffer is buffer_c


def test_out_of_memory_clears_the_cache_and_retries(device: Device) -> None:
    limits = {0: 8 * MIB}
    with (
        MemoryManager(device, heap_limits=limits, block_size=8 * MIB) as manager,
        BufferPool(manager, 1 << 40) as pool,
    ):
        pool.acquire(3 * MIB).free()  # both cached in the one 8 MiB block that fills the heap
        pool.acquire(2 * MIB).free()
        big = pool.acquire(5 * MIB)  # fits only once the cache is released
        assert pool.stats()["cached_bytes"] == 0 and pool.stats()["evictions"] == 2
        big.free()


def test_lifetimes_say_who_allocated_and_for_how_long(device: Device) -> None:
    now = [100.0]
    with MemoryManager(device) as manager, BufferPool(manager, MIB, clock=lambda: now[0]) as pool:
        named = pool.acquire(512, label="node s")
        anonymous = pool.acquire(512)
        now[0] = 102.5
        named.free()
        records = pool.lifetimes()
        assert records[0]["label"].startswith("test_pool.py:")  # the caller's line
        assert records[0]["released_at"] is None and records[0]["alive_s"] == 2.5
        assert records[1] == {
            "label": "node s",
            "size": 512,
            "capacity": 512,
            "acquired_at": 100.0,
            "released_at": 102.5,
            "alive_s": 2.5,
        }
        anonymous.free()
