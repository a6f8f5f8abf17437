"""The block allocator over fake memory: placement, blocks, fallback, grace period, OOM."""

from __future__ import annotations

import itertools
import random

import pytest
from gpulab.memory.blocks import BlockAllocator, Region, block_size_for
from gpulab.memory.errors import OutOfMemoryError
from gpulab.memory.memory_types import alignment_for
from gpulab.memory.offsets import FirstFitAllocator
from gpulab.vk import MemoryHeap, MemoryType

from .fakes import HEAPS, MIB, TYPES, FakeMemory, fake_blocks

GIB = 1 << 30
ALL_TYPES = 0b1111


def overlapping(regions: list[Region]) -> list[tuple[Region, Region]]:
    """Pairs of regions that share bytes of one block."""
    found = []
    by_block: dict[int, list[Region]] = {}
    for region in regions:
        by_block.setdefault(id(region.block), []).append(region)
    for group in by_block.values():
        group.sort(key=lambda r: r.offset)
        for before, after in itertools.pairwise(group):
            if before.offset + before.size > after.offset:
                found.append((before, after))
    return found


def test_block_size_follows_the_heap_size() -> None:
    assert block_size_for(140 * GIB) == 256 * MIB
    assert block_size_for(2 * GIB) == 256 * MIB
    assert block_size_for(512 * MIB) == 64 * MIB
    assert block_size_for(4 * MIB) == 1 * MIB


def test_the_first_blocks_of_a_type_start_small_and_double() -> None:
    made: list[FakeMemory] = []

    def source(memory_type: MemoryType, size: int) -> FakeMemory:
        made.append(FakeMemory(memory_type, size))
        return made[-1]

    heaps = (MemoryHeap(0, 140 * GIB, True), MemoryHeap(1, 94 * GIB, False))
    blocks = BlockAllocator(heaps, TYPES, source, FirstFitAllocator)
    blocks.allocate(4, 4, "upload", ALL_TYPES)  # a scalar's staging: a 4 MiB block, not 256
    assert [m.size for m in made] == [4 * MIB]
    for _ in range(8):
        blocks.allocate(3 * MIB, 4, "upload", ALL_TYPES)
    sizes = [m.size for m in made]
    assert sizes == sorted(sizes) and sizes[1:3] == [8 * MIB, 16 * MIB]
    blocks.allocate(100 * MIB, 4, "upload", ALL_TYPES)  # large requests reach full blocks
    assert made[-1].size == 256 * MIB
    fixed, fixed_made, _ = fake_blocks(block_size=8 * MIB)
    fixed.allocate(4, 4, "upload", ALL_TYPES)  # a given size is used as it is
    assert [m.size for m in fixed_made] == [8 * MIB]


def test_kinds_pick_their_memory_types() -> None:
    blocks, _, _ = fake_blocks()
    device = blocks.allocate(100, 4, "device", ALL_TYPES)
    upload = blocks.allocate(100, 4, "upload", ALL_TYPES)
    readback = blocks.allocate(100, 4, "readback", ALL_TYPES)
    mapped = blocks.allocate(100, 4, "mapped", ALL_TYPES)
    mapped_elsewhere = blocks.allocate(100, 4, "mapped", 0b0111)
    assert device.block.memory_type.index == 0  # VRAM the host cannot map
    assert upload.block.memory_type.index == 1  # uncached system memory
    assert readback.block.memory_type.index == 2  # cached system memory
    assert mapped.block.memory_type.index == 3  # mappable VRAM
    assert mapped_elsewhere.block.memory_type.index == 1  # else the first mappable type
    with pytest.raises(ValueError, match="unknown memory kind 'texture'"):
        blocks.allocate(100, 4, "texture", ALL_TYPES)


def test_small_allocations_share_a_block_at_aligned_offsets() -> None:
    blocks, made, _ = fake_blocks()
    regions = [blocks.allocate(1000, 16, "device", ALL_TYPES) for _ in range(10)]
    assert len(made) == 1
    assert all(r.offset % 64 == 0 for r in regions)  # minStorageBufferOffsetAlignment
    assert not overlapping(regions)


def test_non_coherent_host_memory_aligns_to_the_atom_size() -> None:
    non_coherent = MemoryType(5, 1, 0x2, ("host_visible",))
    coherent = MemoryType(6, 1, 0x6, ("host_visible", "host_coherent"))
    assert alignment_for(non_coherent, 16, 64, 256) == 256
    assert alignment_for(coherent, 16, 64, 256) == 64
    assert alignment_for(coherent, 1024, 64, 256) == 1024


def test_large_requests_get_a_dedicated_block_released_on_free() -> None:
    blocks, made, _ = fake_blocks()
    region = blocks.allocate(3 * MIB, 16, "device", ALL_TYPES)  # above half a 4 MiB block
    assert region.block.dedicated and region.block.size == 3 * MIB
    blocks.free(region)
    assert made[0].closed and blocks.stats()["dedicated_count"] == 0


def test_empty_blocks_are_kept_for_the_grace_period_then_released() -> None:
    blocks, made, clock = fake_blocks(grace_s=2.0)
    blocks.free(blocks.allocate(1000, 16, "device", ALL_TYPES))
    clock.now = 1.0
    blocks.free(blocks.allocate(1000, 16, "device", ALL_TYPES))  # reuses the empty block
    assert len(made) == 1
    assert [m.closed for m in made] == [False]
    clock.now = 3.5
    blocks.release_expired()
    assert [m.closed for m in made] == [True]
    assert blocks.stats()["block_count"] == 0


def test_a_full_heap_falls_back_to_the_next_type_then_raises() -> None:
    calls = []
    blocks, _, _ = fake_blocks(heap_limits={0: 4 * MIB, 1: 4 * MIB})
    blocks.on_exhausted.append(lambda: calls.append("released"))
    heaps = []
    with pytest.raises(OutOfMemoryError) as caught:
        while True:
            heaps.append(blocks.allocate(MIB + 1, 16, "device", ALL_TYPES).block.memory_type)
    # Three fit in one 4 MiB block of VRAM; the mappable VRAM type is on the same full heap,
    # so the next three land in system memory (heap 1), and the seventh fits nowhere.
    assert [t.index for t in heaps] == [0, 0, 0, 1, 1, 1]
    error = caught.value
    # The error names VRAM, where device memory belongs, not the system memory tried last.
    assert (error.request, error.heap, error.usage, error.limit) == (MIB + 1, 0, 4 * MIB, 4 * MIB)
    assert "1048577 bytes (1.0 MiB) of device memory" in str(error)
    assert "heap 0 (4.0 MiB of 4.0 MiB in use)" in str(error)
    assert calls == ["released"] * 4  # caches let go once for each request VRAM could not take


def test_cached_memory_gives_way_before_a_request_moves_to_worse_memory() -> None:
    # A discrete GPU whose VRAM holds a pool's cache: the request takes the cache's place in
    # VRAM instead of landing in system memory (heap 1), which has room.
    blocks, _, _ = fake_blocks(heap_limits={0: 4 * MIB})
    cached = blocks.allocate(3 * MIB, 16, "device", ALL_TYPES)
    blocks.on_exhausted.append(lambda: blocks.free(cached))  # what a pool's clear() does
    assert blocks.allocate(3 * MIB, 16, "device", ALL_TYPES).block.memory_type.index == 0


def test_empty_blocks_give_way_before_a_request_moves_to_worse_memory() -> None:
    blocks, made, _ = fake_blocks(heap_limits={0: 4 * MIB})
    blocks.free(blocks.allocate(MIB, 16, "device", ALL_TYPES))  # an empty 4 MiB block, kept
    assert blocks.allocate(3 * MIB, 16, "device", ALL_TYPES).block.memory_type.index == 0
    assert [m.closed for m in made] == [True, False]


def test_the_retry_after_releasing_caches_can_succeed() -> None:
    blocks, _, _ = fake_blocks(heap_limits={0: 4 * MIB, 1: 0})
    held = blocks.allocate(3 * MIB, 16, "device", ALL_TYPES)
    blocks.on_exhausted.append(lambda: blocks.free(held))  # what a pool's clear() does
    assert blocks.allocate(3 * MIB, 16, "device", ALL_TYPES).size == 3 * MIB


def test_blocks_shrink_to_fit_a_nearly_full_heap() -> None:
    blocks, made, _ = fake_blocks(heap_limits={0: 6 * MIB, 1: 0})
    for _ in range(5):  # four fill the first block exactly
        blocks.allocate(MIB, 16, "device", ALL_TYPES)
    assert [m.size for m in made] == [4 * MIB, 2 * MIB]


def test_a_driver_out_of_memory_counts_as_a_full_heap() -> None:
    def source(memory_type: MemoryType, size: int) -> FakeMemory:
        if memory_type.heap_index == 0:
            raise MemoryError("VK_ERROR_OUT_OF_DEVICE_MEMORY")
        return FakeMemory(memory_type, size)

    blocks = BlockAllocator(HEAPS, TYPES, source, FirstFitAllocator, block_size=4 * MIB)
    assert blocks.allocate(100, 16, "device", ALL_TYPES).block.memory_type.heap_index == 1


def test_stress_100k_operations_against_a_model() -> None:
    """Random allocate/free: statistics equal a model's after every step; nothing overlaps."""
    rng = random.Random(5)
    blocks, made, clock = fake_blocks(heap_limits={0: 48 * MIB, 1: 16 * MIB}, grace_s=0.5)
    live: list[tuple[Region, int]] = []
    in_use = peak = failures = 0
    for step in range(100_000):
        clock.now = step * 0.001
        if live and (rng.random() < 0.5 or len(live) > 400):
            region, alignment = live.pop(rng.randrange(len(live)))
            blocks.free(region)
            in_use -= region.size
        else:
            size = rng.choice((rng.randint(1, 4096), rng.randint(1, 256 * 1024), 3 * MIB))
            alignment = 1 << rng.randint(0, 12)
            try:
                region = blocks.allocate(size, alignment, rng.choice(("device", "upload")), 0xF)
            except OutOfMemoryError:
                failures += 1
                continue
            assert region.offset % max(alignment, 64) == 0
            live.append((region, alignment))
            in_use += size
            peak = max(peak, in_use)
        assert blocks.in_use == in_use
        if step % 1000 == 0:
            stats = blocks.stats()
            assert stats["allocation_count"] == len(live)
            assert stats["peak_in_use_bytes"] == peak
            assert stats["allocated_bytes"] == sum(m.size for m in made if not m.closed)
            assert not overlapping([r for r, _ in live])
    assert failures < 1000
    for region, _ in live:
        blocks.free(region)
    for block in (b for group in blocks.blocks.values() for b in group):
        assert isinstance(block.offsets, FirstFitAllocator)
        assert block.offsets.free_regions() == [(0, block.size)]
    blocks.trim()
    assert blocks.stats()["block_count"] == 0 and all(m.closed for m in made)


def test_fragmentation_is_zero_when_each_block_is_free_in_one_piece() -> None:
    blocks, _, _ = fake_blocks()
    first = [blocks.allocate(MIB, 16, "device", ALL_TYPES) for _ in range(5)]  # two blocks
    assert blocks.stats()["fragmentation"] == 0.0  # each block's free space is one piece
    blocks.free(first[1])  # a 1 MiB hole between live regions of the first block
    stats = blocks.stats()
    assert stats["free_bytes"] == 4 * MIB and stats["largest_free_region"] == 3 * MIB
    assert stats["fragmentation"] == 0.0  # per block, the hole is block 0's only free region
    blocks.free(first[3])
    assert blocks.stats()["fragmentation"] == 0.2  # 1 MiB of the 5 MiB free is a crumb
