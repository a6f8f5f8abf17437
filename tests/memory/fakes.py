"""Fake memory blocks and a fake clock: the block allocator's logic without a GPU."""

from __future__ import annotations

from gpulab.memory.blocks import BlockAllocator, Limits
from gpulab.memory.offsets import FirstFitAllocator
from gpulab.vk import MemoryHeap, MemoryType

MIB = 1 << 20


class FakeMemory:
    """Stands in for a vk.DeviceMemory: records that it was released."""

    def __init__(self, memory_type: MemoryType, size: int) -> None:
        self.memory_type = memory_type
        self.size = size
        self.closed = False

    def close(self) -> None:
        assert not self.closed, "a block was released twice"
        self.closed = True


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


# A discrete GPU's layout: VRAM (heap 0), system memory (heap 1), and mappable VRAM.
HEAPS = (MemoryHeap(0, 64 * MIB, True), MemoryHeap(1, 32 * MIB, False))
TYPES = (
    MemoryType(0, 0, 0x1, ("device_local",)),
    MemoryType(1, 1, 0x6, ("host_visible", "host_coherent")),
    MemoryType(2, 1, 0xE, ("host_visible", "host_coherent", "host_cached")),
    MemoryType(3, 0, 0x7, ("device_local", "host_visible", "host_coherent")),
)


def fake_blocks(
    heap_limits: dict[int, int] | None = None, grace_s: float = 2.0, block_size: int = 4 * MIB
) -> tuple[BlockAllocator, list[FakeMemory], FakeClock]:
    """A block allocator over fake memory and the pure-Python offset allocator."""
    made: list[FakeMemory] = []
    clock = FakeClock()

    def source(memory_type: MemoryType, size: int) -> FakeMemory:
        memory = FakeMemory(memory_type, size)
        made.append(memory)
        return memory

    blocks = BlockAllocator(
        HEAPS,
        TYPES,
        source,
        FirstFitAllocator,
        limits=Limits(storage_alignment=64, atom_size=256),
        heap_limits=heap_limits,
        block_size=block_size,
        grace_s=grace_s,
        clock=clock,
    )
    return blocks, made, clock
