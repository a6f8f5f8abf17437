"""Regions of files for Stager.upload_files: what each region is, which way it goes (read
straight into mapped device memory, or through the staging ring), its chunks, and the read
itself (os.preadv from the page cache: no shared file offset, so threads read one file at
once, without the GIL).

The sizes here are module attributes that the Stager reads at each upload, so that the
benchmarks (payload/benchmarks/ring_probe.py and others) can set them.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import NamedTuple

import numpy as np
import numpy.typing as npt

from gpulab.memory.manager import Allocation
from gpulab.vk.memory import HOST_CACHED

FILE_CHUNK = 8 << 20
"""Chunks of a file's upload hold at most this much."""
FILE_RING_CHUNKS = 10
"""A file's upload uses at most this many chunks of a pinned ring (and threads + 2 at most).
The ring is pinned memory, which NVIDIA's driver pins when it is allocated: in a new process
that is part of the upload, so the ring is no larger than the copy engine needs. Measured on
the H200 (payload/benchmarks/npy_upload_sweep.py, docs/benchmarks.md): with 16 threads, 8 MiB
chunks in a ring of 10 moved 512 MiB and 2 GiB at 2.11x and 1.63x the copy engine's time
(4 MiB chunks: 2.95x at both; 2 MiB: 4-5x, each chunk's submission then costs more than
its copy); a ring of 16 was no better at 512 MiB and twice the pinned memory."""
IMPORTED_RING_CHUNKS = 18
"""An imported file ring's chunks at most (threads + 2 at most): importing costs far less than
allocating pinned memory, so the ring can keep every host thread reading."""


class FileRegion(NamedTuple):
    """`nbytes` of the open file `file` (a descriptor) from byte `offset`, for the start of
    `allocation`; `inspect(chunk, start)` sees each chunk after its read (Stager.upload_files).
    A NamedTuple: this module loads on every run's path, where a dataclass costs more."""

    file: int
    offset: int
    nbytes: int
    allocation: Allocation
    inspect: Callable[[npt.NDArray[np.uint8], int], None] | None = None


class RegionReadError(OSError):
    """Region `region` (its index in the upload_files call) could not be read: `error`, an
    EOFError (the file ended first) or the OSError of the read."""

    def __init__(self, region: int, error: EOFError | OSError) -> None:
        super().__init__(str(error))
        self.region = region
        self.error = error


def read_exactly(file: int, target: npt.NDArray[np.uint8], position: int) -> None:
    """Fill `target` from the file descriptor `file` at `position`; EOFError if the file ends
    first."""
    view = memoryview(target)  # type: ignore[arg-type]
    done = 0
    while done < len(view):
        count = os.preadv(file, [view[done:]], position + done)
        if count == 0:
            raise EOFError(
                f"the file ends at byte {position + done}, {len(view) - done} bytes short"
            )
        done += count


def read_chunk(
    regions: Sequence[FileRegion], index: int, start: int, piece: npt.NDArray[np.uint8]
) -> int:
    """Read region `index`'s bytes from `start` into `piece` (all of it), show them to the
    region's inspect; the bytes read. A failed read raises RegionReadError."""
    region = regions[index]
    try:
        read_exactly(region.file, piece, region.offset + start)
    except (EOFError, OSError) as exc:
        raise RegionReadError(index, exc) from exc
    if region.inspect is not None:
        region.inspect(piece, start)
    return piece.size


def split_ways(regions: Sequence[FileRegion]) -> tuple[list[int], list[int]]:
    """The indices of the regions read straight into their mapped memory, and of those that
    go through the ring: mapped memory is read into unless it is uncached memory that the
    region's inspect would read back. Empty regions are in neither."""
    straight: list[int] = []
    ringed: list[int] = []
    for index, region in enumerate(regions):
        if region.nbytes == 0:
            continue  # nothing to read, nor to count
        mapped = region.allocation.host_visible
        cached = region.allocation.memory_type.property_flags & HOST_CACHED
        (straight if mapped and (cached or region.inspect is None) else ringed).append(index)
    return straight, ringed


def chunks_of(
    regions: Sequence[FileRegion], indices: list[int], chunk: int
) -> list[tuple[int, int, int]]:
    """(region index, start in the region, size) of each chunk of the regions `indices`."""
    return [
        (index, start, min(chunk, regions[index].nbytes - start))
        for index in indices
        for start in range(0, regions[index].nbytes, chunk)
    ]
