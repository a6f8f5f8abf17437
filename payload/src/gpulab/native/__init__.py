"""gpulab's native libraries through cffi: float32 kernels (`gpulab.native.kernels`) and the
offset suballocator. Importing this never loads a library; the first use does, and raises
NativeUnavailable with the fix if it cannot."""

from gpulab.native import kernels
from gpulab.native._ffi import LIB_DIR_ENV, NativeUnavailable
from gpulab.native.suballocator import (
    HostOutOfMemory,
    InvalidArgument,
    OutOfSpace,
    Suballocator,
    SuballocatorClosed,
    SuballocatorError,
    SuballocatorStats,
    UnknownOffset,
)

__all__ = [
    "LIB_DIR_ENV",
    "HostOutOfMemory",
    "InvalidArgument",
    "NativeUnavailable",
    "OutOfSpace",
    "Suballocator",
    "SuballocatorClosed",
    "SuballocatorError",
    "SuballocatorStats",
    "UnknownOffset",
    "kernels",
]
