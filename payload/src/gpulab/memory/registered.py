"""Numpy arrays whose pages stay imported until released (what cudaHostRegister does).

`RegisteredArrays.add` imports a C-contiguous array's pages once with
VK_EXT_external_memory_host (see host_import); the Stager then moves the array, or any
contiguous slice of it, with one vkCmdCopyBuffer and no host copy, until `remove`. The
importer is the Stager's, which its other imports (per-transfer imports, the imported
readback ring) share.
"""

from __future__ import annotations

from typing import Any

import numpy.typing as npt

from gpulab.memory.host_import import HostImporter, ImportedArray
from gpulab.vk import Closeable


class RegisteredArrays(Closeable):
    """The registered arrays of one Stager, by data address, each with its import (which keeps
    the array alive meanwhile)."""

    def __init__(self) -> None:
        self._arrays: dict[int, tuple[npt.NDArray[Any], ImportedArray]] = {}

    def add(self, array: npt.NDArray[Any], importer: HostImporter) -> None:
        """Import `array`'s pages with `importer`; ValueError for an empty or non-contiguous
        array, one already registered, or a device that cannot import host memory."""
        if not array.flags.c_contiguous or array.nbytes == 0:
            raise ValueError("register needs a non-empty C-contiguous array")
        address = int(array.ctypes.data)
        if self.locate(array) is not None:
            raise ValueError(f"the array at {address:#x} is already registered")
        if not importer.usable:
            raise ValueError(
                f"{importer.device.info.name} cannot import host memory "
                "(VK_EXT_external_memory_host with page-sized alignment)"
            )
        self._arrays[address] = (array, importer.import_array(array))

    def remove(self, array: npt.NDArray[Any]) -> None:
        """Release the import that add(array) made."""
        entry = self._arrays.pop(int(array.ctypes.data), None)
        if entry is None:
            raise ValueError(f"the array at {int(array.ctypes.data):#x} is not registered")
        entry[1].close()

    def locate(self, array: npt.NDArray[Any]) -> tuple[ImportedArray, int] | None:
        """(import, byte offset in its buffer) of an array inside a registered one."""
        if not self._arrays or not array.flags.c_contiguous:
            return None
        address = int(array.ctypes.data)
        for start, (whole, imported) in self._arrays.items():
            if start <= address and address + array.nbytes <= start + whole.nbytes:
                return imported, imported.offset + address - start
        return None

    @property
    def count(self) -> int:
        return len(self._arrays)

    @property
    def nbytes(self) -> int:
        return sum(whole.nbytes for whole, _ in self._arrays.values())

    def close(self) -> None:
        """Release every import (the arrays stay as they are)."""
        for _, imported in self._arrays.values():
            imported.close()
        self._arrays.clear()
