"""MemoryManager: buffers suballocated from large blocks of device memory, one per request.

Each allocation has its own VkBuffer, bound at its offset inside a shared VkDeviceMemory
block: descriptors and copies use offset 0 and the allocation's size, as with a buffer that
owns its memory.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

from gpulab.memory.blocks import DEFAULT_GRACE_S, BlockAllocator, Limits, Region
from gpulab.memory.errors import AllocationFreedError
from gpulab.memory.memory_types import MAPPABLE
from gpulab.memory.offsets import FirstFitAllocator, OffsetAllocatorFactory, default_factory
from gpulab.vk import Buffer, Closeable, Device, DeviceMemory, MemoryType, ObjectClosedError
from gpulab.vk.buffer import STORAGE, TRANSFER_DST, TRANSFER_SRC

DEFAULT_USAGE = STORAGE | TRANSFER_SRC | TRANSFER_DST


class Part(Protocol):
    """What is built on a manager and attached to it (a BufferPool, a Stager)."""

    def stats(self) -> dict[str, Any]: ...
    def close(self) -> None: ...


AddUp = Callable[[list[dict[str, Any]]], dict[str, Any]]
"""The stats() of the attached parts of one section -> the section's figures."""


@dataclass(eq=False)
class Reservation:
    """A bound buffer and the region it occupies: what a pool caches between uses."""

    buffer: Buffer
    region: Region
    kind: str
    usage: int

    @property
    def capacity(self) -> int:
        return self.buffer.size

    @property
    def memory(self) -> DeviceMemory:
        memory: DeviceMemory = self.region.block.memory  # type: ignore[assignment]
        return memory


class Allocation:
    """A buffer of `size` bytes bound at `offset` in `memory`. Free it once, or use `with`.

    After free() (or after the pool took it back), every accessor raises AllocationFreedError.
    """

    def __init__(
        self,
        reservation: Reservation,
        size: int,
        release: Callable[[Allocation], None],
        label: str = "",
    ) -> None:
        self._reservation: Reservation | None = reservation
        self.size = size
        self.kind = reservation.kind
        self.label = label
        self._release = release

    def _live(self) -> Reservation:
        if self._reservation is None:
            raise AllocationFreedError(f"{self!r} is used after free()")
        return self._reservation

    @property
    def freed(self) -> bool:
        return self._reservation is None

    @property
    def buffer(self) -> Buffer:
        """The VkBuffer: bind it at offset 0 with range `size`."""
        return self._live().buffer

    @property
    def capacity(self) -> int:
        """The buffer's size: `size` or more (pools round up to a size class)."""
        return self._live().capacity

    @property
    def memory(self) -> DeviceMemory:
        """The block's memory (shared with other allocations: never close it)."""
        return self._live().memory

    @property
    def offset(self) -> int:
        """Where the buffer sits in `memory`."""
        return self._live().region.offset

    @property
    def memory_type(self) -> MemoryType:
        return self._live().region.block.memory_type

    @property
    def dedicated(self) -> bool:
        return self._live().region.block.dedicated

    @property
    def host_visible(self) -> bool:
        """Whether view(), read() and write() work (mappable, coherent memory)."""
        flags = self.memory_type.property_flags
        return flags & MAPPABLE == MAPPABLE

    def view(self, dtype: npt.DTypeLike, count: int, offset: int = 0) -> npt.NDArray[Any]:
        """A zero-copy numpy view of the mapped buffer; drop it before freeing."""
        nbytes = count * np.dtype(dtype).itemsize
        if offset < 0 or count < 0 or offset + nbytes > self.size:
            raise ValueError(
                f"a view of {count} x {np.dtype(dtype)} at offset {offset} exceeds the "
                f"{self.size}-byte allocation"
            )
        if not self.host_visible:
            raise ValueError(
                f"{self!r} is in memory type {self.memory_type.index} "
                f"({'|'.join(self.memory_type.properties)}), which the host cannot map"
            )
        return self.memory.view(dtype, count, self.offset + offset)

    def write(self, data: npt.NDArray[Any], offset: int = 0) -> None:
        """Copy an array into the mapped buffer at a byte offset."""
        flat = np.ascontiguousarray(data).reshape(-1)
        target = self.view(flat.dtype, flat.size, offset)
        target[:] = flat

    def read(self, dtype: npt.DTypeLike, count: int, offset: int = 0) -> npt.NDArray[Any]:
        """A copy of `count` elements at a byte offset of the mapped buffer."""
        result: npt.NDArray[Any] = self.view(dtype, count, offset).copy()
        return result

    def free(self) -> None:
        """Give the buffer back (to the manager, or to its pool). A second call does nothing."""
        if self._reservation is not None:
            self._release(self)

    def _take(self) -> Reservation:
        """Detach the reservation (the owner's release path calls this)."""
        reservation = self._live()
        self._reservation = None
        return reservation

    def __enter__(self) -> Allocation:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.free()

    def __repr__(self) -> str:
        state = "freed" if self._reservation is None else f"at {self.offset}"
        label = f" {self.label!r}" if self.label else ""
        return f"<Allocation{label} {self.size} bytes {self.kind} {state}>"


class MemoryManager(Closeable):
    """Owns the memory blocks of one device; hands out `Allocation`s.

    `heap_limits` caps heaps below their size ({heap index: bytes}); `allocator_factory`
    replaces the offset allocator (default: the native suballocator when built); empty
    blocks are released `grace_s` seconds after their last allocation went. Close it before
    the device (closing the device also releases everything).
    """

    def __init__(
        self,
        device: Device,
        *,
        heap_limits: dict[int, int] | None = None,
        allocator_factory: OffsetAllocatorFactory | None = None,
        block_size: int | None = None,
        grace_s: float = DEFAULT_GRACE_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        info = device.info
        if allocator_factory is None:
            self.suballocator, allocator_factory = default_factory()
        else:
            self.suballocator = getattr(allocator_factory, "__name__", "custom")
        self.device = device
        self.blocks = BlockAllocator(
            info.memory_heaps,
            info.memory_types,
            self._allocate_memory,
            allocator_factory,
            limits=Limits(info.min_storage_buffer_offset_alignment, info.non_coherent_atom_size),
            heap_limits=heap_limits,
            block_size=block_size,
            grace_s=grace_s,
            clock=clock,
        )
        self._parts: dict[int, tuple[str, Part, AddUp]] = {}
        self._reservations: set[Reservation] = set()
        self.closed = False

    def _allocate_memory(self, memory_type: MemoryType, size: int) -> DeviceMemory:
        return DeviceMemory(
            self.device, size, 1 << memory_type.index, required=memory_type.property_flags
        )

    def reserve(self, nbytes: int, kind: str = "device", usage: int = DEFAULT_USAGE) -> Reservation:
        """A bound buffer of `nbytes` (the pools' building block; most callers use allocate)."""
        if self.closed:
            raise ObjectClosedError("the MemoryManager is used after close()")
        buffer = Buffer(self.device, nbytes, usage)
        try:
            region = self.blocks.allocate(
                buffer.required_size, buffer.alignment, kind, buffer.memory_type_bits
            )
        except BaseException:
            buffer.close()
            raise
        try:
            buffer.bind(region.block.memory, region.offset)  # type: ignore[arg-type]
        except BaseException:
            buffer.close()
            self.blocks.free(region)
            raise
        reservation = Reservation(buffer, region, kind, usage)
        self._reservations.add(reservation)
        return reservation

    def unreserve(self, reservation: Reservation) -> None:
        """Destroy the buffer, then give its region back."""
        self._reservations.discard(reservation)
        reservation.buffer.close()
        self.blocks.free(reservation.region)

    def allocate(
        self, nbytes: int, kind: str = "device", usage: int = DEFAULT_USAGE, label: str = ""
    ) -> Allocation:
        """A buffer of `nbytes` in memory suited to `kind` ("device", "upload", "readback")."""
        return Allocation(self.reserve(nbytes, kind, usage), nbytes, self._release, label)

    def _release(self, allocation: Allocation) -> None:
        self.unreserve(allocation._take())

    def trim(self) -> None:
        """Release empty blocks now instead of after the grace period."""
        self.blocks.trim()

    def attach(self, section: str, part: Part, add_up: AddUp) -> None:
        """Report `part`'s stats() under `section` of stats() (added up with the other parts
        there by `add_up`) until detach(); close() closes it first."""
        self._parts[id(part)] = (section, part, add_up)

    def detach(self, part: Part) -> None:
        """Forget an attached part (a part's close() calls this). Unknown parts are ignored."""
        self._parts.pop(id(part), None)

    def stats(self) -> dict[str, Any]:
        """Allocator statistics, and those of the attached pools and stagers, JSON-ready."""
        result = self.blocks.stats()
        result["suballocator"] = self.suballocator
        sections: dict[str, tuple[AddUp, list[dict[str, Any]]]] = {}
        for section, part, add_up in self._parts.values():
            sections.setdefault(section, (add_up, []))[1].append(part.stats())
        for section in sorted(sections):
            add_up, figures = sections[section]
            result[section] = add_up(figures)
        return result

    def close(self) -> None:
        """Close the attached parts, then free every block; allocations still held become
        unusable. A second call does nothing."""
        if self.closed:
            return
        for _, part, _ in list(self._parts.values()):
            part.close()
        self._parts.clear()
        self.closed = True
        for reservation in self._reservations:  # buffers first: they are bound to the blocks
            reservation.buffer.close()
        self._reservations.clear()
        self.blocks.close()


def allocate_dedicated(
    device: Device, nbytes: int, kind: str = "device", usage: int = DEFAULT_USAGE, label: str = ""
) -> Allocation:
    """A buffer of `nbytes` in device memory of its own, which its free() gives back: for a
    buffer that lives alone (a test's array, a pipeline's input), with no manager to keep.

    It comes from a manager of its own whose every block is dedicated (a block size of one
    byte puts every request above half a block); freeing the allocation closes that manager.
    """
    manager = MemoryManager(device, allocator_factory=FirstFitAllocator, block_size=1)
    try:
        reservation = manager.reserve(nbytes, kind, usage)
    except BaseException:
        manager.close()
        raise
    return Allocation(reservation, nbytes, functools.partial(_free_alone, manager), label)


def _free_alone(manager: MemoryManager, allocation: Allocation) -> None:
    manager.unreserve(allocation._take())
    manager.close()
