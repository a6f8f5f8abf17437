"""gpulab.memory's public names: the API the kernels and the backends build on."""

from __future__ import annotations

import gpulab.memory


def test_public_names_are_pinned() -> None:
    assert set(gpulab.memory.__all__) == {
        "DEFAULT_USAGE",
        "KINDS",
        "Allocation",
        "AllocationFreedError",
        "BlockAllocator",
        "BufferPool",
        "FileRegion",
        "FirstFitAllocator",
        "MemoryManager",
        "OffsetAllocator",
        "OutOfMemoryError",
        "PinnedArray",
        "RegionReadError",
        "Stager",
        "allocate_dedicated",
        "block_size_for",
        "size_class",
    }
    for name in gpulab.memory.__all__:
        assert getattr(gpulab.memory, name) is not None


def test_out_of_memory_is_a_memory_error() -> None:
    assert issubclass(gpulab.memory.OutOfMemoryError, MemoryError)
