"""Offset allocators: what carves one block of device memory into allocations.

The block allocator depends only on the `OffsetAllocator` protocol, so tests can plug the
pure-Python `FirstFitAllocator` and check splitting and merging exactly without a GPU. The
default is the native TLSF `gpulab.native.Suballocator`; where the native library is not
built, the pure-Python one stands in (stats() says which one ran).
"""

from __future__ import annotations

import bisect
from collections.abc import Callable
from typing import Protocol

from gpulab.native import NativeUnavailable, OutOfSpace, Suballocator


class OffsetStats(Protocol):
    """What the block allocator reads from an offset allocator's stats()."""

    @property
    def capacity(self) -> int: ...
    @property
    def used(self) -> int: ...
    @property
    def free(self) -> int: ...
    @property
    def largest_free_region(self) -> int: ...
    @property
    def allocation_count(self) -> int: ...
    @property
    def free_region_count(self) -> int: ...


class OffsetAllocator(Protocol):
    """Hands out aligned offsets in [0, capacity); raises a MemoryError when nothing fits."""

    capacity: int

    def allocate(self, size: int, alignment: int = 1) -> int: ...
    def free(self, offset: int) -> None: ...
    def stats(self) -> OffsetStats: ...
    def close(self) -> None: ...


OffsetAllocatorFactory = Callable[[int], OffsetAllocator]
"""capacity -> a new offset allocator over [0, capacity)."""


class FirstFitStats:
    """The pure-Python allocator's snapshot (same fields as the native SuballocatorStats)."""

    def __init__(self, capacity: int, used: int, regions: list[tuple[int, int]], count: int):
        self.capacity = capacity
        self.used = used
        self.free = capacity - used
        self.largest_free_region = max((size for _, size in regions), default=0)
        self.allocation_count = count
        self.free_region_count = len(regions)


class FirstFitAllocator:
    """A pure-Python first-fit offset allocator with merged free regions.

    Free regions are kept sorted by offset; freeing merges a region with its neighbours, so
    two free regions are never adjacent. Exact sizes: the alignment padding before an
    allocation stays free.
    """

    def __init__(self, capacity: int) -> None:
        if capacity <= 0:
            raise ValueError(f"capacity must be positive, got {capacity}")
        self.capacity = capacity
        self._starts: list[int] = [0]  # free region starts, sorted
        self._sizes: dict[int, int] = {0: capacity}  # free region start -> size
        self._live: dict[int, int] = {}  # allocation offset -> size
        self._used = 0

    def allocate(self, size: int, alignment: int = 1) -> int:
        if size <= 0 or alignment <= 0 or alignment & (alignment - 1):
            raise ValueError(f"invalid request: size {size}, alignment {alignment}")
        for start in self._starts:
            region = self._sizes[start]
            offset = -(-start // alignment) * alignment
            if offset + size <= start + region:
                self._carve(start, region, offset, size)
                self._live[offset] = size
                self._used += size
                return offset
        raise OutOfSpace(
            f"allocate({size}, alignment={alignment}): no free region fits "
            f"({self.capacity - self._used} bytes free)"
        )

    def _carve(self, start: int, region: int, offset: int, size: int) -> None:
        index = bisect.bisect_left(self._starts, start)
        del self._starts[index]
        del self._sizes[start]
        end, region_end = offset + size, start + region
        if end < region_end:
            self._starts.insert(index, end)
            self._sizes[end] = region_end - end
        if start < offset:
            self._starts.insert(index, start)
            self._sizes[start] = offset - start

    def free(self, offset: int) -> None:
        size = self._live.pop(offset, None)
        if size is None:
            raise LookupError(f"free({offset}): no live allocation at this offset")
        self._used -= size
        start, end = offset, offset + size
        index = bisect.bisect_left(self._starts, start)
        if index < len(self._starts) and self._starts[index] == end:  # merge the next region
            end += self._sizes.pop(end)
            del self._starts[index]
        if index > 0:  # merge the previous region when it ends here
            previous = self._starts[index - 1]
            if previous + self._sizes[previous] == start:
                self._sizes[previous] = end - previous
                return
        self._starts.insert(index, start)
        self._sizes[start] = end - start

    def stats(self) -> FirstFitStats:
        regions = [(start, self._sizes[start]) for start in self._starts]
        return FirstFitStats(self.capacity, self._used, regions, len(self._live))

    def free_regions(self) -> list[tuple[int, int]]:
        """(offset, size) of every free region, by offset (for tests)."""
        return [(start, self._sizes[start]) for start in self._starts]

    def close(self) -> None:
        self._live.clear()


def native_available() -> bool:
    """Whether the native suballocator library can be loaded here."""
    try:
        Suballocator(1).close()
    except NativeUnavailable:
        return False
    return True


def default_factory() -> tuple[str, OffsetAllocatorFactory]:
    """("native", Suballocator) when the library loads, else ("python", FirstFitAllocator)."""
    if native_available():
        return "native", Suballocator
    return "python", FirstFitAllocator
