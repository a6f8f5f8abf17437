"""BufferPool: reuse of released buffers by size class, under a byte budget, with lifetimes.

A released buffer stays bound and cached; the next request of its size class (same kind and
usage) takes it back without any Vulkan call. Cached buffers are evicted least recently used
first whenever cached plus in-use bytes exceed the budget, and all of them when a request
does not fit in its best memory type (the block allocator calls `clear` before the request
moves to another type or fails).
"""

from __future__ import annotations

import sys
import time
from collections import OrderedDict, deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from gpulab.memory.manager import DEFAULT_USAGE, Allocation, MemoryManager, Reservation
from gpulab.vk import Closeable, ObjectClosedError

SMALLEST_CLASS = 256
EXACT_ABOVE = 256 << 20
PAGE = 4096
HISTORY = 10_000


def size_class(nbytes: int) -> int:
    """The capacity that serves `nbytes`: a power of two split in four (at most 25% more),
    256 bytes at least; above 256 MiB the size rounded to a 4 KiB page."""
    if nbytes <= SMALLEST_CLASS:
        return SMALLEST_CLASS
    if nbytes > EXACT_ABOVE:
        return -(-nbytes // PAGE) * PAGE
    step = (1 << (nbytes.bit_length() - 1)) // 4
    return -(-nbytes // step) * step


@dataclass
class Lifetime:
    """Who acquired a buffer (the label, else the caller's file:line), when, for how long."""

    label: str
    size: int
    capacity: int
    acquired_at: float
    released_at: float | None = None

    def as_dict(self, now: float) -> dict[str, Any]:
        end = now if self.released_at is None else self.released_at
        return {
            "label": self.label,
            "size": self.size,
            "capacity": self.capacity,
            "acquired_at": self.acquired_at,
            "released_at": self.released_at,
            "alive_s": round(end - self.acquired_at, 6),
        }


def combine_pool_stats(pools: list[dict[str, Any]]) -> dict[str, Any]:
    """The pools' counters added up, with the overall hit rate."""
    keys = ("hits", "misses", "evictions", "in_use_bytes", "cached_bytes", "budget_bytes")
    total = {key: sum(int(pool[key]) for pool in pools) for key in keys}
    requests = total["hits"] + total["misses"]
    return {**total, "hit_rate": round(total["hits"] / requests, 4) if requests else 0.0}


def _caller() -> str:
    frame = sys._getframe(2)
    return f"{frame.f_code.co_filename.rsplit('/', 1)[-1]}:{frame.f_lineno}"


class BufferPool(Closeable):
    """Pooled allocations from one MemoryManager, kept under `budget_bytes` (see module)."""

    def __init__(
        self,
        manager: MemoryManager,
        budget_bytes: int,
        clock: Callable[[], float] = time.time,
    ) -> None:
        if budget_bytes < 0:
            raise ValueError(f"the pool budget must not be negative, got {budget_bytes}")
        self.manager = manager
        self.budget_bytes = budget_bytes
        self._clock = clock
        self._cached: OrderedDict[int, tuple[tuple[str, int, int], Reservation]] = OrderedDict()
        self._by_class: dict[tuple[str, int, int], list[Reservation]] = {}
        self._live: dict[int, tuple[Allocation, Lifetime]] = {}  # by id; holds the object
        self._history: deque[Lifetime] = deque(maxlen=HISTORY)
        self.hits = 0
        self.misses = 0
        self.evictions = 0
        self.in_use_bytes = 0
        self.cached_bytes = 0
        self.closed = False
        manager.attach("pool", self, combine_pool_stats)
        manager.blocks.on_exhausted.append(self.clear)

    def acquire(
        self, nbytes: int, kind: str = "device", usage: int = DEFAULT_USAGE, label: str = ""
    ) -> Allocation:
        """An allocation of `nbytes` (capacity: its size class), cached or new."""
        if self.closed:
            raise ObjectClosedError("the BufferPool is used after close()")
        if nbytes <= 0:
            raise ValueError(f"allocation size must be positive, got {nbytes}")
        capacity = size_class(nbytes)
        key = (kind, usage, capacity)
        stack = self._by_class.get(key)
        if stack:
            reservation = stack.pop()
            del self._cached[id(reservation)]
            self.cached_bytes -= capacity
            self.hits += 1
        else:
            reservation = self.manager.reserve(capacity, kind, usage)
            self.misses += 1
        self.in_use_bytes += capacity
        allocation = Allocation(reservation, nbytes, self.release, label or _caller())
        lifetime = Lifetime(allocation.label, nbytes, capacity, self._clock())
        self._live[id(allocation)] = (allocation, lifetime)
        self._evict()
        return allocation

    def release(self, allocation: Allocation) -> None:
        """Take a buffer back into the cache; the allocation is unusable afterwards."""
        entry = self._live.get(id(allocation))
        if entry is None or entry[0] is not allocation:
            allocation._live()  # a freed allocation: AllocationFreedError names it
            raise ValueError(f"{allocation!r} was not acquired from this pool")
        reservation = allocation._take()
        del self._live[id(allocation)]
        lifetime = entry[1]
        lifetime.released_at = self._clock()
        self._history.append(lifetime)
        capacity = reservation.capacity
        self.in_use_bytes -= capacity
        if self.closed:
            self.manager.unreserve(reservation)
            return
        key = (reservation.kind, reservation.usage, capacity)
        self._by_class.setdefault(key, []).append(reservation)
        self._cached[id(reservation)] = (key, reservation)
        self.cached_bytes += capacity
        self._evict()

    def _evict(self) -> None:
        while self._cached and self.cached_bytes + self.in_use_bytes > self.budget_bytes:
            self._drop_oldest()

    def _drop_oldest(self) -> None:
        _, (key, reservation) = self._cached.popitem(last=False)
        self._by_class[key].remove(reservation)
        self.cached_bytes -= reservation.capacity
        self.evictions += 1
        self.manager.unreserve(reservation)

    def clear(self) -> None:
        """Release every cached buffer."""
        while self._cached:
            self._drop_oldest()

    def lifetimes(self) -> list[dict[str, Any]]:
        """Live allocations, then the most recent released ones (oldest first)."""
        now = self._clock()
        records = [*(lifetime for _, lifetime in self._live.values()), *self._history]
        return [record.as_dict(now) for record in records]

    def stats(self) -> dict[str, Any]:
        requests = self.hits + self.misses
        return {
            "hits": self.hits,
            "misses": self.misses,
            "hit_rate": round(self.hits / requests, 4) if requests else 0.0,
            "evictions": self.evictions,
            "in_use_bytes": self.in_use_bytes,
            "cached_bytes": self.cached_bytes,
            "budget_bytes": self.budget_bytes,
            "live_allocations": len(self._live),
        }

    def close(self) -> None:
        """Release the cache; buffers still acquired go back to the manager when released."""
        if self.closed:
            return
        self.clear()
        self.closed = True
        self.manager.detach(self)
        self.manager.blocks.on_exhausted.remove(self.clear)
