"""Pinned host arrays: numpy arrays that live in persistently mapped host memory.

What torch.Tensor.pin_memory() and cudaHostAlloc give CUDA users: the device's copy engine
reads and writes such an array directly, so the Stager moves it with one vkCmdCopyBuffer
and no host copy. Make them with `Stager.pinned_empty`; slices and views of one stay pinned
(as long as they are contiguous). Free one with `free()` once every view of it is dropped:
afterwards transfers of it raise AllocationFreedError, and its memory may be reused.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import numpy.typing as npt

from gpulab.memory.manager import Allocation


class Pin:
    """The memory under pinned arrays: its allocation and where it is mapped."""

    def __init__(self, allocation: Allocation, release: Callable[[Pin], None]) -> None:
        self.allocation = allocation
        self.nbytes = allocation.size
        self.address = int(allocation.view(np.uint8, allocation.size).ctypes.data)
        self._release = release

    def offset_of(self, array: npt.NDArray[Any]) -> int | None:
        """Where a C-contiguous array's data starts in this memory, or None if outside it."""
        start = int(array.ctypes.data) - self.address
        if start >= 0 and start + array.nbytes <= self.nbytes:
            return start
        return None

    def free(self) -> None:
        """Give the memory back (once; later calls do nothing)."""
        if not self.allocation.freed:
            self._release(self)
            self.allocation.free()


class PinnedArray(np.ndarray):
    """A numpy array in pinned host memory (see the module docstring).

    Arrays that numpy derives from it keep the pin only if their data lies inside the pinned
    memory (a slice does, the result of `a + 1` does not).
    """

    pin: Pin | None = None

    def __array_finalize__(self, obj: Any) -> None:
        pin = getattr(obj, "pin", None)
        if pin is not None and (pin.allocation.freed or pin.offset_of(self) is None):
            pin = None
        self.pin = pin

    def free(self) -> None:
        """Release the pinned memory under this array and every view of it."""
        if self.pin is not None:
            self.pin.free()


def pinned_location(array: npt.NDArray[Any]) -> tuple[Allocation, int] | None:
    """(allocation, byte offset) of a pinned, C-contiguous array; None for any other array.

    Raises AllocationFreedError when the array's pinned memory was freed.
    """
    pin = getattr(array, "pin", None)
    if not isinstance(pin, Pin) or not array.flags.c_contiguous:
        return None
    allocation = pin.allocation
    _ = allocation.buffer  # raises AllocationFreedError after free
    offset = pin.offset_of(array)
    return None if offset is None else (allocation, offset)
