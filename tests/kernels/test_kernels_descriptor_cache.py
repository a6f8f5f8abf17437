"""Descriptor sets cached by their bindings, and binds skipped when already bound: never stale.

A cached set is reused only for exactly the same (buffer, offset, range) bindings, never after
one of its buffers was closed (freed, or evicted by a BufferPool), and it stays alive for the
recordings that bound it after the cache dropped it.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest
from gpulab.kernels import DeviceArray, Kernels, OwnedArray, pipelines
from gpulab.kernels.pipelines import PipelineCatalog, geometry
from gpulab.memory import BufferPool, MemoryManager
from gpulab.vk import (
    Buffer,
    CommandPool,
    Device,
    DeviceMemory,
    Fence,
    ObjectClosedError,
    live_handles,
)
from gpulab.vk.buffer import STORAGE


@pytest.fixture
def catalog(device: Device) -> Iterator[PipelineCatalog]:
    created = PipelineCatalog(device, geometry(device))
    yield created
    created.close()


class BoundBuffers:
    """Storage buffers with memory bound (a descriptor may name no other buffer:
    VUID-VkWriteDescriptorSet-descriptorType-00329); the test may close a buffer early, its
    memory is freed with the rest at the end."""

    def __init__(self, device: Device) -> None:
        self.device = device
        self.made: list[tuple[Buffer, DeviceMemory]] = []

    def __call__(self, size: int) -> Buffer:
        buffer = Buffer(self.device, size, STORAGE)
        memory = DeviceMemory(self.device, buffer.required_size, buffer.memory_type_bits)
        self.made.append((buffer, memory))
        buffer.bind(memory)
        return buffer

    def close(self) -> None:
        for buffer, memory in self.made:
            buffer.close()
            memory.close()


@pytest.fixture
def bound(device: Device) -> Iterator[BoundBuffers]:
    created = BoundBuffers(device)
    yield created
    created.close()


def _sets() -> int:
    return live_handles().get("DescriptorSet", 0)


def test_a_set_is_reused_only_for_the_same_bindings(
    catalog: PipelineCatalog, bound: BoundBuffers
) -> None:
    with bound(1024) as first, bound(1024) as second:
        bindings = ((first, 0, 256), (second, 0, 256))
        cached = catalog.descriptor_set(bindings)
        assert catalog.descriptor_set(list(bindings)) is cached
        others = [
            ((second, 0, 256), (first, 0, 256)),  # buffers swapped
            ((first, 256, 256), (second, 0, 256)),  # another offset
            ((first, 0, 512), (second, 0, 256)),  # another range
            ((first, 0, 256), (first, 0, 256)),  # another buffer
        ]
        made = [catalog.descriptor_set(other) for other in others]
        assert len({id(found) for found in [cached, *made]}) == 5
        catalog.close()


def test_a_closed_buffer_is_never_bound_through_its_cached_set(
    catalog: PipelineCatalog, bound: BoundBuffers
) -> None:
    buffer = bound(1024)
    bindings = ((buffer, 0, 1024),)
    catalog.descriptor_set(bindings)
    buffer.close()
    # The cached set is not handed out: writing a new one fails on the closed buffer.
    with pytest.raises(ObjectClosedError):
        catalog.descriptor_set(bindings)


def test_an_evicted_pool_buffer_gets_a_new_set(device: Device, catalog: PipelineCatalog) -> None:
    manager = MemoryManager(device)
    try:
        with BufferPool(manager, budget_bytes=0) as pool:  # every release is evicted
            first = pool.acquire(4096)
            old_buffer = first.buffer
            old_set = catalog.descriptor_set(((old_buffer, 0, 4096),))
            first.free()
            assert pool.evictions == 1 and old_buffer.closed
            second = pool.acquire(4096)
            new_set = catalog.descriptor_set(((second.buffer, 0, 4096),))
            assert second.buffer is not old_buffer
            assert new_set is not old_set
            second.free()
        catalog.close()
    finally:
        manager.close()


def test_trimming_frees_sets_of_closed_buffers_first(
    catalog: PipelineCatalog, bound: BoundBuffers, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(pipelines, "CACHED_SETS", 8)
    before = _sets()
    closed = [bound(256) for _ in range(4)]
    for buffer in closed:
        catalog.descriptor_set(((buffer, 0, 256),))
        buffer.close()
    with bound(4096) as kept:

        def cached(i: int) -> None:
            catalog.descriptor_set(((kept, 256 * i, 256),))

        for i in range(5):
            cached(i)
        assert _sets() == before + 5  # the 9th set went over: the closed buffers' 4 went
        for i in range(5, 9):
            cached(i)
        assert _sets() == before + 6  # the 9th again: the oldest, down to 3/4 of the limit
        for i in range(3, 9):
            cached(i)  # the 6 most recent are cached: nothing new
        assert _sets() == before + 6
        cached(0)  # dropped: made again
        assert _sets() == before + 7
        catalog.close()


class Arrays:
    """Owned host-visible arrays, closed together."""

    def __init__(self, device: Device) -> None:
        self.device = device
        self.owned: list[OwnedArray] = []

    def make(self, values: np.ndarray) -> OwnedArray:
        created = OwnedArray(self.device, values.shape)
        created.write(values)
        self.owned.append(created)
        return created

    def close(self) -> None:
        for created in self.owned:
            created.close()


@pytest.fixture
def arrays(device: Device) -> Iterator[Arrays]:
    created = Arrays(device)
    yield created
    created.close()


def _run(device: Device, kernels: Kernels, steps: list[tuple[str, dict, DeviceArray]]) -> None:
    with CommandPool(device) as pool, Fence(device) as fence:
        cmd = pool.allocate()
        cmd.begin()
        for op, inputs, out in steps:
            kernels.record(cmd, op, inputs, out)
        cmd.barrier("compute", "host")
        cmd.end()
        device.submit(cmd, fence)
        fence.wait()


def test_interleaved_ops_bind_what_each_needs(
    device: Device, kernels: Kernels, arrays: Arrays
) -> None:
    """Pipelines with 1, 2 and 4 bindings in turn, the same op on the same arrays twice in a
    row (nothing to rebind), and back to an earlier set: every dispatch sees its own."""
    n = 1000
    x = np.linspace(-2, 3, n, dtype=np.float32)
    dx, acc = arrays.make(x), arrays.make(np.ones(n, dtype=np.float32))
    filled, copied, scaled = (arrays.make(np.zeros(n, dtype=np.float32)) for _ in range(3))
    steps = [
        ("fill", {"value": 7.0}, filled.array),
        ("add", {"x": dx.array, "y": acc.array}, acc.array),
        ("add", {"x": dx.array, "y": acc.array}, acc.array),  # same bindings again
        ("copy", {"x": dx.array}, copied.array),
        ("scale", {"x": dx.array, "a": -0.5}, scaled.array),
        ("add", {"x": dx.array, "y": acc.array}, acc.array),  # back to the first set
    ]
    _run(device, kernels, steps)
    np.testing.assert_array_equal(filled.read(), np.full(n, 7.0, dtype=np.float32))
    np.testing.assert_array_equal(acc.read(), np.float32(1) + x + x + x)
    np.testing.assert_array_equal(copied.read(), x)
    np.testing.assert_array_equal(scaled.read(), np.float32(-0.5) * x)


def test_a_recording_keeps_the_sets_the_cache_dropped(
    device: Device, kernels: Kernels, arrays: Arrays, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(pipelines, "CACHED_SETS", 4)
    n = 64
    sources = [arrays.make(np.full(n, i, dtype=np.float32)) for i in range(12)]
    targets = [arrays.make(np.zeros(n, dtype=np.float32)) for _ in sources]
    steps = [
        ("scale", {"x": source.array, "a": 2.0}, target.array)
        for source, target in zip(sources, targets, strict=True)
    ]
    _run(device, kernels, steps)
    for i, target in enumerate(targets):
        np.testing.assert_array_equal(target.read(), np.full(n, 2 * i, dtype=np.float32))


def test_a_freed_input_is_not_read_through_a_stale_set(
    device: Device, kernels: Kernels, arrays: Arrays
) -> None:
    """The same op on a new array after the old one was freed reads the new array."""
    n = 256
    out = arrays.make(np.zeros(n, dtype=np.float32))
    for value in (3.0, 5.0):
        with OwnedArray(device, (n,)) as x:
            x.write(np.full(n, value, dtype=np.float32))
            _run(device, kernels, [("scale", {"x": x.array, "a": 1.0}, out.array)])
        np.testing.assert_array_equal(out.read(), np.full(n, value, dtype=np.float32))


def test_a_mapping_and_its_pairs_name_the_same_pipeline(catalog: PipelineCatalog) -> None:
    pairs = ((0, 64), (1, True), (2, False), (3, False))
    made = catalog.pipeline("elementwise", 4, pairs)
    assert catalog.pipeline("elementwise", 4, {3: False, 2: False, 1: True, 0: 64}) is made
    assert (
        catalog.pipeline("elementwise", 4, ((0, 64), (1, False), (2, False), (3, False)))
        is not made
    )
    catalog.close()
