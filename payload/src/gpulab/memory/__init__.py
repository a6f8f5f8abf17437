"""gpulab.memory: device memory for kernels and backends.

`MemoryManager` suballocates buffers from large blocks per memory type, `BufferPool` reuses
them by size class under a byte budget, `Stager` moves numpy arrays in and out;
`allocate_dedicated` gives a buffer that lives alone memory of its own. Every device buffer of
gpulab comes from here. Imports only gpulab.vk and gpulab.native.
"""

from gpulab.memory.blocks import BlockAllocator, block_size_for
from gpulab.memory.errors import AllocationFreedError, OutOfMemoryError
from gpulab.memory.file_regions import FileRegion, RegionReadError
from gpulab.memory.manager import DEFAULT_USAGE, Allocation, MemoryManager, allocate_dedicated
from gpulab.memory.memory_types import KINDS
from gpulab.memory.offsets import FirstFitAllocator, OffsetAllocator
from gpulab.memory.pinned import PinnedArray
from gpulab.memory.pool import BufferPool, size_class
from gpulab.memory.staging import Stager

__all__ = [
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
]
