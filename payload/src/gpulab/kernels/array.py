"""Float32 arrays that live in device buffers: what kernels read and write."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from gpulab.memory import Allocation, allocate_dedicated
from gpulab.vk import Buffer, Closeable, Device

FLOAT_BYTES = 4


@dataclass(frozen=True)
class DeviceArray:
    """`shape` float32 values (C order) at byte `offset` of `buffer`; shape () is one scalar.

    The offset must be a multiple of the device's minStorageBufferOffsetAlignment, so that the
    array can be bound as a storage buffer.
    """

    buffer: Buffer
    shape: tuple[int, ...]
    offset: int = 0

    def __post_init__(self) -> None:
        if any(d < 0 for d in self.shape):
            raise ValueError(f"array shape must not be negative, got {self.shape}")
        if self.offset < 0 or self.offset + self.nbytes > self.buffer.size:
            raise ValueError(
                f"{self.nbytes} bytes at offset {self.offset} exceed the {self.buffer.size}-byte "
                "buffer"
            )

    @classmethod
    def of(cls, allocation: Allocation, shape: tuple[int, ...]) -> DeviceArray:
        """The array over a gpulab.memory Allocation (which owns a buffer bound at offset 0)."""
        return cls(allocation.buffer, tuple(shape))

    @property
    def size(self) -> int:
        """The number of elements (1 for a scalar)."""
        return math.prod(self.shape)

    @property
    def nbytes(self) -> int:
        """The bytes the elements take."""
        return FLOAT_BYTES * self.size

    def elements(self, first: int, count: int) -> tuple[Buffer, int, int]:
        """(buffer, byte offset, byte range) of `count` elements from element `first`."""
        return self.buffer, self.offset + FLOAT_BYTES * first, FLOAT_BYTES * count

    def binding(self) -> tuple[Buffer, int, int]:
        """(buffer, byte offset, byte range) of the whole array."""
        return self.elements(0, self.size)


class OwnedArray(Closeable):
    """A DeviceArray in memory of its own (gpulab.memory.allocate_dedicated): for
    `Kernels.run`, tests and benchmarks.

    `mappable` (default) puts it in memory that the host maps ("mapped": device-local where
    the device has such a type) so that `write()`/`read()` copy through the mapping; otherwise
    it is plain device memory, filled and read by kernels only.
    """

    def __init__(self, device: Device, shape: tuple[int, ...], *, mappable: bool = True) -> None:
        nbytes = FLOAT_BYTES * max(math.prod(shape), 1)
        kind = "mapped" if mappable else "device"
        self.allocation = allocate_dedicated(device, nbytes, kind, label="OwnedArray")
        self.array = DeviceArray.of(self.allocation, shape)

    @property
    def buffer(self) -> Buffer:
        """The array's buffer (its data starts at offset 0)."""
        return self.allocation.buffer

    def write(self, values: npt.ArrayLike) -> None:
        """Copy values (converted to float32) into the buffer."""
        data = np.ascontiguousarray(values, dtype=np.float32).reshape(-1)
        if data.size != self.array.size:
            raise ValueError(f"expected {self.array.size} values, got {data.size}")
        self.allocation.write(data)

    def read(self) -> npt.NDArray[np.float32]:
        """A copy of the contents, in the array's shape."""
        values: npt.NDArray[Any] = self.allocation.read(np.float32, self.array.size)
        return values.reshape(self.array.shape)

    def close(self) -> None:
        """Free the buffer and its memory (a second call does nothing)."""
        self.allocation.free()
