"""The block allocator: large blocks of device memory per memory type, carved into regions.

It knows memory types, heaps, blocks and offsets, not buffers: the memory itself comes from a
`MemorySource` (vkAllocateMemory in real use, a fake in tests), and each block is carved by an
`OffsetAllocator` from a factory. What it decides:
- block size from the heap size (256 MiB, or an eighth of a heap of 1 GiB or less), halved
  down to the request when a heap is nearly full; unless a size is given, the first blocks of
  a memory type are smaller (as VMA makes them): each new block the smallest of the preferred
  size / 2^k (k <= FIRST_BLOCK_SHIFT) that is larger than every block of the type so far and
  holds the request twice, so a short run allocates (and the driver pins, for host memory) a
  few MiB, while a long one reaches full-size blocks after a few doublings;
- requests above half a block get a dedicated block of their own, released on free;
- a heap that is full (its size, a configured limit, or the driver says so) first makes the
  caches registered with `on_exhausted` and the empty blocks go (once per request) and tries
  again, so that memory merely held (cached buffers, empty blocks) never pushes a request
  into a worse memory type, a kernel's buffer into system memory on a discrete GPU; then the
  request moves to the next suitable memory type; when none is left, OutOfMemoryError names
  the heap of the best suited one;
- empty blocks are released after a grace period (by the first allocate or free after it, or
  by trim()), so that a free followed by an allocate does not go back to the driver.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from gpulab.memory.errors import OutOfMemoryError
from gpulab.memory.memory_types import alignment_for, candidate_types
from gpulab.memory.offsets import OffsetAllocator, OffsetAllocatorFactory
from gpulab.vk import MemoryHeap, MemoryType

LARGE_HEAP_BLOCK = 256 << 20
SMALL_HEAP = 1 << 30
MIN_BLOCK = 1 << 20
FIRST_BLOCK_SHIFT = 6
"""The first block of a type is at least the preferred size / 2^6 (4 MiB of 256): NVIDIA's
driver pins host-visible memory at allocation, about 0.2 ms per MiB on the H200."""
DEFAULT_GRACE_S = 2.0


class BlockMemory(Protocol):
    """One allocation of device memory (a vk.DeviceMemory in real use)."""

    def close(self) -> None: ...


MemorySource = Callable[[MemoryType, int], BlockMemory]
"""(memory type, size) -> new memory; raises MemoryError when the heap cannot provide it."""


def block_size_for(heap_size: int) -> int:
    """The preferred block size on a heap of this size (as VMA chooses it)."""
    if heap_size <= SMALL_HEAP:
        return max(MIN_BLOCK, heap_size // 8)
    return LARGE_HEAP_BLOCK


class Block:
    """One block of memory of one type; `offsets` is None for a dedicated block."""

    def __init__(
        self, memory: BlockMemory, memory_type: MemoryType, size: int, offsets: Any
    ) -> None:
        self.memory = memory
        self.memory_type = memory_type
        self.size = size
        self.offsets: OffsetAllocator | None = offsets
        self.used = 0
        self.count = 0
        self.empty_since: float | None = None

    @property
    def dedicated(self) -> bool:
        return self.offsets is None

    def largest_free_region(self) -> int:
        if self.offsets is None:
            return 0
        return self.offsets.stats().largest_free_region


@dataclass(frozen=True)
class Region:
    """A reserved range of a block: `size` bytes at `offset`."""

    block: Block
    offset: int
    size: int


@dataclass(frozen=True)
class Limits:
    """The device limits that alignment depends on."""

    storage_alignment: int = 1
    atom_size: int = 1


class BlockAllocator:
    """Regions of device memory from per-type blocks (see the module docstring)."""

    def __init__(
        self,
        heaps: tuple[MemoryHeap, ...],
        memory_types: tuple[MemoryType, ...],
        source: MemorySource,
        offsets_factory: OffsetAllocatorFactory,
        *,
        limits: Limits | None = None,
        heap_limits: dict[int, int] | None = None,
        block_size: int | None = None,
        grace_s: float = DEFAULT_GRACE_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.heaps = heaps
        self.memory_types = memory_types
        self._source = source
        self._offsets_factory = offsets_factory
        self.limits = limits or Limits()
        self.heap_limits = {h.index: h.size for h in heaps} | dict(heap_limits or {})
        self._block_size = block_size
        self.grace_s = grace_s
        self._clock = clock
        self.blocks: dict[int, list[Block]] = {t.index: [] for t in memory_types}
        self.heap_usage = {h.index: 0 for h in heaps}
        self.on_exhausted: list[Callable[[], object]] = []
        self._empty: set[Block] = set()
        self.in_use = 0
        self.peak_in_use = 0
        self.type_in_use = {t.index: 0 for t in memory_types}
        self.type_peak = {t.index: 0 for t in memory_types}
        self._candidates: dict[tuple[str, int], list[MemoryType]] = {}
        self._block_sizes: dict[int, int] = {}

    def block_size(self, memory_type: MemoryType) -> int:
        """The preferred block size for this type (fixed if one was given)."""
        size = self._block_sizes.get(memory_type.index)
        if size is None:
            heap = self.heaps[memory_type.heap_index]
            size = self._block_size or block_size_for(min(heap.size, self.heap_limits[heap.index]))
            self._block_sizes[memory_type.index] = size
        return size

    def allocate(self, size: int, alignment: int, kind: str, type_bits: int) -> Region:
        """A region of at least `size` bytes, aligned, in the best memory type that has room."""
        if size <= 0:
            raise ValueError(f"allocation size must be positive, got {size}")
        self.release_expired()
        candidates = self._candidates.get((kind, type_bits))
        if candidates is None:
            candidates = candidate_types(self.memory_types, kind, type_bits)
            self._candidates[kind, type_bits] = candidates
        if not candidates:
            raise ValueError(f"no memory type suits {kind!r} memory (allowed types {type_bits:#x})")
        released = False
        for memory_type in candidates:
            region = self._allocate_in(memory_type, size, alignment)
            if region is None and not released:  # what is cached goes before worse memory
                released = True
                for release in self.on_exhausted:
                    release()
                self.trim()
                region = self._allocate_in(memory_type, size, alignment)
            if region is not None:
                return region
        heap = candidates[0].heap_index
        raise OutOfMemoryError(size, kind, heap, self.heap_usage[heap], self.heap_limits[heap])

    def _allocate_in(self, memory_type: MemoryType, size: int, alignment: int) -> Region | None:
        limits = self.limits
        alignment = alignment_for(
            memory_type, alignment, limits.storage_alignment, limits.atom_size
        )
        preferred = self.block_size(memory_type)
        if size > preferred // 2:
            block = self._new_block(memory_type, size, dedicated=True)
            return None if block is None else self._reserve(block, 0, size)
        for block in self.blocks[memory_type.index]:
            if block.offsets is None or block.size - block.used < size:
                continue
            try:
                offset = block.offsets.allocate(size, alignment)
            except MemoryError:
                continue
            return self._reserve(block, offset, size)
        block_size = self._growing_size(memory_type, preferred, size + alignment)
        while True:  # a smaller block when the heap has no room for a full one
            block = self._new_block(memory_type, block_size, dedicated=False)
            if block is not None:
                assert block.offsets is not None
                return self._reserve(block, block.offsets.allocate(size, alignment), size)
            if block_size // 2 < max(size + alignment, MIN_BLOCK):
                return None
            block_size //= 2

    def _growing_size(self, memory_type: MemoryType, preferred: int, request: int) -> int:
        """The size of a new shared block (see the module docstring)."""
        if self._block_size is not None:
            return preferred
        shared = [b.size for b in self.blocks[memory_type.index] if not b.dedicated]
        largest = max(shared, default=0)
        size = preferred
        for _ in range(FIRST_BLOCK_SHIFT):
            smaller = size // 2
            if smaller <= largest or smaller < 2 * request or smaller < MIN_BLOCK:
                break
            size = smaller
        return size

    def _new_block(self, memory_type: MemoryType, size: int, dedicated: bool) -> Block | None:
        heap = memory_type.heap_index
        if self.heap_usage[heap] + size > self.heap_limits[heap]:
            return None
        try:
            memory = self._source(memory_type, size)
        except MemoryError:  # the driver says the heap is full before our count does
            return None
        offsets = None if dedicated else self._offsets_factory(size)
        block = Block(memory, memory_type, size, offsets)
        self.blocks[memory_type.index].append(block)
        self.heap_usage[heap] += size
        return block

    def _reserve(self, block: Block, offset: int, size: int) -> Region:
        block.used += size
        block.count += 1
        self._empty.discard(block)
        block.empty_since = None
        type_index = block.memory_type.index
        self.in_use += size
        self.peak_in_use = max(self.peak_in_use, self.in_use)
        self.type_in_use[type_index] += size
        self.type_peak[type_index] = max(self.type_peak[type_index], self.type_in_use[type_index])
        return Region(block, offset, size)

    def free(self, region: Region) -> None:
        """Give a region back; a dedicated block goes back to the driver at once."""
        block = region.block
        if block.offsets is not None:
            block.offsets.free(region.offset)
        block.used -= region.size
        block.count -= 1
        self.in_use -= region.size
        self.type_in_use[block.memory_type.index] -= region.size
        if block.count == 0:
            if block.dedicated:
                self._release(block)
            else:
                block.empty_since = self._clock()
                self._empty.add(block)
        self.release_expired()

    def release_expired(self) -> None:
        """Release the blocks that have been empty for longer than the grace period."""
        if self._empty:
            deadline = self._clock() - self.grace_s
            for block in [b for b in self._empty if (b.empty_since or 0.0) <= deadline]:
                self._release(block)

    def trim(self) -> None:
        """Release every empty block now."""
        for block in list(self._empty):
            self._release(block)

    def _release(self, block: Block) -> None:
        self._empty.discard(block)
        self.blocks[block.memory_type.index].remove(block)
        self.heap_usage[block.memory_type.heap_index] -= block.size
        if block.offsets is not None:
            block.offsets.close()
        block.memory.close()

    def close(self) -> None:
        """Release every block, empty or not."""
        for blocks in self.blocks.values():
            for block in list(blocks):
                self._release(block)

    def stats(self) -> dict[str, Any]:
        """Totals and per-memory-type figures (see `summarize`)."""
        per_type: dict[str, dict[str, Any]] = {}
        for memory_type in self.memory_types:
            blocks = self.blocks[memory_type.index]
            if not blocks and not self.type_peak[memory_type.index]:
                continue
            entry = summarize(blocks, self.type_in_use[memory_type.index])
            entry["peak_in_use_bytes"] = self.type_peak[memory_type.index]
            entry["heap"] = memory_type.heap_index
            entry["flags"] = list(memory_type.properties)
            per_type[str(memory_type.index)] = entry
        every_block = [b for blocks in self.blocks.values() for b in blocks]
        totals = summarize(every_block, self.in_use)
        totals["peak_in_use_bytes"] = self.peak_in_use
        totals["memory_types"] = per_type
        totals["heaps"] = {
            str(index): {"allocated_bytes": used, "limit_bytes": self.heap_limits[index]}
            for index, used in self.heap_usage.items()
        }
        return totals


def summarize(blocks: list[Block], in_use: int) -> dict[str, Any]:
    """allocated, in use, free, largest free region, fragmentation and counts of some blocks.

    fragmentation = 1 - (the sum over blocks of each block's largest free region) / free
    bytes: 0 when every block's free space is one piece, near 1 when it is all crumbs.
    """
    allocated = sum(b.size for b in blocks)
    shared = [b for b in blocks if not b.dedicated]
    free = sum(b.size - b.used for b in shared)
    largest = [b.largest_free_region() for b in shared]
    return {
        "allocated_bytes": allocated,
        "in_use_bytes": in_use,
        "free_bytes": free,
        "largest_free_region": max(largest, default=0),
        "fragmentation": round(1.0 - sum(largest) / free, 4) if free else 0.0,
        "block_count": len(shared),
        "dedicated_count": len(blocks) - len(shared),
        "allocation_count": sum(b.count for b in blocks),
    }
