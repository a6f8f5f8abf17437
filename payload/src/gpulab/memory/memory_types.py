"""Which memory types suit each kind of allocation, best first, and the alignment each needs."""

from __future__ import annotations

from collections.abc import Callable

from gpulab.vk import MemoryType
from gpulab.vk.memory import DEVICE_LOCAL, HOST_CACHED, HOST_COHERENT, HOST_VISIBLE

KINDS = ("device", "device_mapped", "mapped", "upload", "readback")
"""device: read and written by kernels; device_mapped: the same, preferring device-local memory
that the host can also map (a BAR or integrated GPU: the Stager may then skip staging);
mapped: read and written by kernels and through the mapping by the host (device-local where
such memory is mappable); upload: the host writes, the device reads (staging); readback: the
device writes, the host reads."""

MAPPABLE = HOST_VISIBLE | HOST_COHERENT
"""What we map: coherent memory needs no flush or invalidate calls."""


def _has(memory_type: MemoryType, flags: int) -> bool:
    return memory_type.property_flags & flags == flags


def _device_rank(memory_type: MemoryType) -> int:
    # Plain VRAM first, then VRAM that the host can also map, then any other memory.
    if _has(memory_type, DEVICE_LOCAL):
        return 1 if _has(memory_type, HOST_VISIBLE) else 0
    return 2


def _device_mapped_rank(memory_type: MemoryType) -> int:
    # Mappable VRAM first, then whatever the device kind would take.
    if _has(memory_type, DEVICE_LOCAL | MAPPABLE):
        return 0
    return 1 + _device_rank(memory_type)


def _mapped_rank(memory_type: MemoryType) -> int | None:
    # Mappable memory, VRAM first.
    if not _has(memory_type, MAPPABLE):
        return None
    return int(not _has(memory_type, DEVICE_LOCAL))


def _upload_rank(memory_type: MemoryType) -> int | None:
    # System memory that the host writes (write-combined, uncached is fine), then anything mappable.
    if not _has(memory_type, MAPPABLE):
        return None
    return int(_has(memory_type, DEVICE_LOCAL)) * 2 + int(_has(memory_type, HOST_CACHED))


def _readback_rank(memory_type: MemoryType) -> int | None:
    # Host reads: cached system memory first (uncached reads are many times slower).
    if not _has(memory_type, MAPPABLE):
        return None
    return int(not _has(memory_type, HOST_CACHED)) * 2 + int(_has(memory_type, DEVICE_LOCAL))


_RANKS: dict[str, Callable[[MemoryType], int | None]] = {
    "device": _device_rank,
    "device_mapped": _device_mapped_rank,
    "mapped": _mapped_rank,
    "upload": _upload_rank,
    "readback": _readback_rank,
}
"""Each kind's rank of a memory type: lower is better, None unsuitable."""


def candidate_types(
    memory_types: tuple[MemoryType, ...], kind: str, type_bits: int
) -> list[MemoryType]:
    """The memory types allowed by `type_bits` that suit `kind`, best first."""
    rank_of = _RANKS.get(kind)
    if rank_of is None:
        raise ValueError(f"unknown memory kind {kind!r}; expected one of {', '.join(KINDS)}")
    ranked: list[tuple[int, int, MemoryType]] = []
    for memory_type in memory_types:
        if not type_bits & (1 << memory_type.index):
            continue
        rank = rank_of(memory_type)
        if rank is not None:
            ranked.append((rank, memory_type.index, memory_type))
    return [memory_type for _, _, memory_type in sorted(ranked)]


def alignment_for(
    memory_type: MemoryType, buffer_alignment: int, storage_alignment: int, atom_size: int
) -> int:
    """The offset alignment of a buffer in memory of this type.

    The buffer's own requirement; minStorageBufferOffsetAlignment, so that a descriptor may
    also point at the block's memory through another buffer; nonCoherentAtomSize for
    host-visible memory that is not coherent, so that flushing one allocation's range never
    touches its neighbour's. All are powers of two, so the largest is a multiple of each.
    """
    alignment = max(buffer_alignment, storage_alignment, 1)
    if _has(memory_type, HOST_VISIBLE) and not _has(memory_type, HOST_COHERENT):
        alignment = max(alignment, atom_size)
    return alignment
