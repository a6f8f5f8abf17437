"""gpulab.memory: device memory for kernels and backends.

`MemoryManager` suballocates buffers from large blocks per memory type, `BufferPool` reuses
them by size class under a byte budget, `Stager` moves numpy arrays in and out;
`allocate_dedicated` gives a buffer that lives alone memory of its own. Every device buffer of
gpulab comes from here. Imports only gpulab.vk and gpulab.native.

Names are imported on first use (PEP 562): `gpulab run` allocates a graph's large buffers
ahead on its early thread (gpulab.memory.ahead), which needs neither numpy nor the modules
that do, while the first thread imports them.
"""

from typing import TYPE_CHECKING

from gpulab._lazy import lazy_attributes

if TYPE_CHECKING:
    from gpulab.memory.blocks import BlockAllocator, block_size_for
    from gpulab.memory.errors import AllocationFreedError, OutOfMemoryError
    from gpulab.memory.manager import (
        DEFAULT_USAGE,
        Allocation,
        MemoryManager,
        allocate_dedicated,
    )
    from gpulab.memory.memory_types import KINDS
    from gpulab.memory.offsets import FirstFitAllocator, OffsetAllocator
    from gpulab.memory.pinned import PinnedArray
    from gpulab.memory.pool import BufferPool
    from gpulab.memory.size_classes import size_class
    from gpulab.memory.staging import Stager

_MODULES = {
    "blocks": ("BlockAllocator", "block_size_for"),
    "errors": ("AllocationFreedError", "OutOfMemoryError"),
    "manager": ("DEFAULT_USAGE", "Allocation", "MemoryManager", "allocate_dedicated"),
    "memory_types": ("KINDS",),
    "offsets": ("FirstFitAllocator", "OffsetAllocator"),
    "pinned": ("PinnedArray",),
    "pool": ("BufferPool",),
    "size_classes": ("size_class",),
    "staging": ("Stager",),
}

__all__ = [
    "DEFAULT_USAGE",
    "KINDS",
    "Allocation",
    "AllocationFreedError",
    "BlockAllocator",
    "BufferPool",
    "FirstFitAllocator",
    "MemoryManager",
    "OffsetAllocator",
    "OutOfMemoryError",
    "PinnedArray",
    "Stager",
    "allocate_dedicated",
    "block_size_for",
    "size_class",
]

__getattr__, __dir__ = lazy_attributes(
    __name__, {name: f"{__name__}.{module}" for module, names in _MODULES.items() for name in names}
)
