"""Float32 arrays that live in device buffers: what kernels read and write."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

from gpulab.vk import Buffer, Device
from gpulab.vk.buffer import STORAGE, TRANSFER_DST, TRANSFER_SRC, buffer_with_memory
from gpulab.vk.memory import DEVICE_LOCAL, HOST_COHERENT, HOST_VISIBLE

FLOAT_BYTES = 4
_USAGE = STORAGE | TRANSFER_SRC | TRANSFER_DST


class _HasBuffer(Protocol):
    @property
    def buffer(self) -> Buffer: ...


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
    def of(cls, allocation: _HasBuffer, shape: tuple[int, ...]) -> DeviceArray:
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


class OwnedArray:
    """A DeviceArray with its own buffer and memory: for `Kernels.run`, tests and benchmarks.

    `mappable` (default) puts it in host-visible, coherent memory (device-local where the
    device has such a type) so that `write()`/`read()` copy through the mapping; otherwise it
    is plain device-local memory, filled and read by kernels only.
    """

    def __init__(self, device: Device, shape: tuple[int, ...], *, mappable: bool = True) -> None:
        size = math.prod(shape)
        required = HOST_VISIBLE | HOST_COHERENT if mappable else DEVICE_LOCAL
        buffer, memory = buffer_with_memory(
            device, FLOAT_BYTES * max(size, 1), _USAGE, required, DEVICE_LOCAL
        )
        self.buffer = buffer
        self.memory = memory
        self.array = DeviceArray(buffer, tuple(shape))

    def write(self, values: npt.ArrayLike) -> None:
        """Copy values (converted to float32) into the buffer."""
        data = np.ascontiguousarray(values, dtype=np.float32).reshape(-1)
        if data.size != self.array.size:
            raise ValueError(f"expected {self.array.size} values, got {data.size}")
        self.memory.write(data)

    def read(self) -> npt.NDArray[np.float32]:
        """A copy of the contents, in the array's shape."""
        values: npt.NDArray[Any] = self.memory.read(np.float32, self.array.size)
        return values.reshape(self.array.shape)

    def close(self) -> None:
        """Free the buffer and its memory."""
        self.buffer.close()
        self.memory.close()

    def __enter__(self) -> OwnedArray:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
