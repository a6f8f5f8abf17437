"""The Python owner of libgpulab_suballoc's offset allocator.

A Suballocator hands out offsets into a range [0, capacity) (for example one large GPU memory
allocation carved into buffers); it never touches memory. The native handle is released
exactly once: by close(), by leaving a `with` block, or by a finalizer if the owner is
garbage-collected while open. Calls on one owner are serialized by a lock, so it can be
shared between threads.
"""

from __future__ import annotations

import threading
import weakref
from dataclasses import dataclass
from typing import Any

from gpulab._closeable import Closeable
from gpulab.native import _ffi

_U64_LIMIT = 1 << 64


class SuballocatorError(RuntimeError):
    """A failure reported by the native allocator, with its message."""


class InvalidArgument(SuballocatorError, ValueError):
    """Size 0, an alignment that is not a power of two, or a capacity out of range."""


class OutOfSpace(SuballocatorError, MemoryError):
    """No free region fits the request; the message gives free bytes and the largest region."""


class UnknownOffset(SuballocatorError, LookupError):
    """The offset is not a live allocation: never allocated, or already freed."""


class HostOutOfMemory(SuballocatorError, MemoryError):
    """The allocator's own bookkeeping could not get host memory (std::bad_alloc)."""


class SuballocatorClosed(SuballocatorError):
    """The Suballocator was used after close()."""


@dataclass(frozen=True)
class SuballocatorStats:
    """A snapshot of the allocator; sizes in bytes."""

    capacity: int
    used: int
    free: int
    largest_free_region: int
    allocation_count: int
    free_region_count: int


def _native() -> _ffi.NativeLibrary:
    return _ffi.load(_ffi.SUBALLOC)


def raise_for_status(native: _ffi.NativeLibrary, status: int, action: str) -> None:
    """Turns a native status into the matching exception, with the native message."""
    lib = native.lib
    if status == lib.GPULAB_SUBALLOC_OK:
        return
    error_types: dict[int, type[SuballocatorError]] = {
        lib.GPULAB_SUBALLOC_INVALID_ARGUMENT: InvalidArgument,
        lib.GPULAB_SUBALLOC_OUT_OF_SPACE: OutOfSpace,
        lib.GPULAB_SUBALLOC_UNKNOWN_OFFSET: UnknownOffset,
        lib.GPULAB_SUBALLOC_NO_MEMORY: HostOutOfMemory,
    }
    message = native.ffi.string(lib.gpulab_suballoc_last_error()).decode(errors="replace")
    raise error_types.get(status, SuballocatorError)(f"{action}: {message}")


def _u64(value: int, name: str) -> int:
    if not isinstance(value, int) or not 0 <= value < _U64_LIMIT:
        raise InvalidArgument(f"{name} must be an integer from 0 to 2^64-1, got {value!r}")
    return value


def live_handles() -> int:
    """Native allocators alive in this process (for leak checks)."""
    return int(_native().lib.gpulab_suballoc_live_handles())


class Suballocator(Closeable):
    """An offset allocator over [0, capacity) bytes: TLSF, exact sizes, merged free regions."""

    def __init__(self, capacity: int) -> None:
        native = _native()
        out = native.ffi.new("gpulab_suballoc **")
        status = native.lib.gpulab_suballoc_create(_u64(capacity, "capacity"), out)
        raise_for_status(native, status, f"Suballocator({capacity})")
        self._native = native
        self._handle: Any = out[0]
        self._finalizer = weakref.finalize(self, native.lib.gpulab_suballoc_destroy, out[0])
        self._lock = threading.Lock()
        self._offset_out = native.ffi.new("uint64_t *")
        self._stats_out = native.ffi.new("gpulab_suballoc_stats *")
        self.capacity = capacity

    @property
    def closed(self) -> bool:
        return self._handle is None

    def _open_handle(self) -> Any:
        if self._handle is None:
            raise SuballocatorClosed("this Suballocator is closed; create a new one")
        return self._handle

    def allocate(self, size: int, alignment: int = 1) -> int:
        """Reserves `size` bytes at an offset that is a multiple of `alignment`; returns it."""
        with self._lock:
            status = self._native.lib.gpulab_suballoc_allocate(
                self._open_handle(),
                _u64(size, "size"),
                _u64(alignment, "alignment"),
                self._offset_out,
            )
            raise_for_status(self._native, status, f"allocate({size}, alignment={alignment})")
            return int(self._offset_out[0])

    def free(self, offset: int) -> None:
        """Releases the allocation at `offset`; raises UnknownOffset if there is none."""
        with self._lock:
            status = self._native.lib.gpulab_suballoc_free(
                self._open_handle(), _u64(offset, "offset")
            )
            raise_for_status(self._native, status, f"free({offset})")

    def reset(self) -> None:
        """Releases every allocation at once."""
        with self._lock:
            status = self._native.lib.gpulab_suballoc_reset(self._open_handle())
            raise_for_status(self._native, status, "reset()")

    def stats(self) -> SuballocatorStats:
        """Capacity, usage and fragmentation now."""
        with self._lock:
            status = self._native.lib.gpulab_suballoc_get_stats(
                self._open_handle(), self._stats_out
            )
            raise_for_status(self._native, status, "stats()")
            s = self._stats_out
            return SuballocatorStats(
                capacity=int(s.capacity),
                used=int(s.used),
                free=int(s.free),
                largest_free_region=int(s.largest_free_region),
                allocation_count=int(s.allocation_count),
                free_region_count=int(s.free_region_count),
            )

    def close(self) -> None:
        """Destroys the native allocator. The handle is cleared first, so closing again, or
        the finalizer running later, does nothing."""
        with self._lock:
            self._handle = None
            self._finalizer()

    def __repr__(self) -> str:
        state = "closed" if self.closed else "open"
        return f"<Suballocator capacity={self.capacity} {state}>"
