"""A staging ring's chunks, and the submissions that copy them (the Stager's pipelines).

A chunk is mapped host memory that the device copies from or into: pinned memory from the
MemoryManager (`PinnedChunk`), or anonymous host memory imported with
VK_EXT_external_memory_host after its first fill (`ImportedChunk.import_pages`).

`Copies` records and submits copies between chunks and device buffers, several chunks'
copies in one command buffer and one vkQueueSubmit where the caller has them ready at once:
a submission costs the host about the same whatever it carries, so an upload whose chunks
fill together pays for one. A chunk remembers which submission last copied it; waiting for
the chunk waits for that submission's fence (one whose command buffer has been recorded
again since is done already).
"""

from __future__ import annotations

import mmap
import threading
import time
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np
import numpy.typing as npt

from gpulab.memory.host_import import HostImporter, ImportedArray
from gpulab.memory.manager import Allocation
from gpulab.vk import CommandBuffer, CommandPool, Fence


class _Submission:
    """A command buffer and its fence; `generation` counts its recordings, so that a chunk
    copied by an earlier one knows it is done once the submission has been reused."""

    def __init__(self, pool: CommandPool) -> None:
        self.commands: CommandBuffer = pool.allocate()
        self.fence = Fence(pool.device)
        self.generation = 0
        self.pending = False
        self.order = 0
        """The position of its last submission among all of them (the oldest goes first)."""
        self._lock = threading.Lock()

    def wait(self, generation: int) -> None:
        """Block until recording `generation` has run (at once when it is long done); one
        thread waits and resets the fence, others then find it done."""
        with self._lock:
            if self.pending and self.generation == generation:
                self.fence.wait()
                self.fence.reset()
                self.pending = False

    def close(self) -> None:
        self.wait(self.generation)
        self.fence.close()
        self.commands.close()


@dataclass
class PinnedChunk:
    """A chunk of pinned memory (an Allocation of the upload or readback kind)."""

    allocation: Allocation
    view: npt.NDArray[np.uint8]
    copied_by: tuple[_Submission, int] | None = None

    @property
    def source(self) -> tuple[Any, int]:
        """What a copy out of the chunk reads: the owner of the buffer, the chunk's offset."""
        return self.allocation, 0

    @property
    def size(self) -> int:
        return self.allocation.size

    def release(self) -> None:
        del self.view
        self.allocation.free()


@dataclass
class ImportedChunk:
    """A chunk of anonymous host memory, imported when first filled (`import_pages`): the
    first read into it faults its pages in, and importing then pins pages that are there, on
    the thread that read them, while other threads read other chunks. Importing costs a
    small share of allocating pinned memory on NVIDIA's driver (docs/benchmarks.md)."""

    memory: mmap.mmap
    view: npt.NDArray[np.uint8]
    copied_by: tuple[_Submission, int] | None = None
    imported: ImportedArray | None = None
    import_s: float = 0.0

    @classmethod
    def anonymous(cls, size: int) -> ImportedChunk:
        memory = mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
        return cls(memory, np.frombuffer(memory, dtype=np.uint8))

    def import_pages(self, importer: HostImporter) -> None:
        """Import the chunk's pages, once (call after its first fill)."""
        if self.imported is None:
            start = time.perf_counter()
            self.imported = importer.import_array(self.view)
            self.import_s = time.perf_counter() - start

    @property
    def source(self) -> tuple[Any, int]:
        assert self.imported is not None, "a chunk is imported when first filled"
        return self.imported, self.imported.offset

    @property
    def size(self) -> int:
        return self.view.size

    def release(self) -> None:
        if self.imported is not None:
            self.imported.close()
        del self.view
        self.memory.close()


Chunk = PinnedChunk | ImportedChunk
IN_FLIGHT = 8
"""Submissions in flight at most: a ninth waits for the oldest (the copy engine runs them in
order, so it has that much queued)."""


class Copy(NamedTuple):
    """`size` bytes from `source` at `src` to `target` at `dst` (owners of buffers:
    Allocations or imported arrays), made for `chunk`."""

    chunk: Chunk
    source: Any
    target: Any
    size: int
    src: int
    dst: int


@dataclass
class Copies:
    """Submits chunks' copies on one device's queue (see the module docstring). One thread
    submits; any thread may wait for a chunk."""

    pool: CommandPool
    submissions: list[_Submission] = field(default_factory=list)
    submitted: int = 0
    """Submissions so far (a pipeline's count of them is what batching saves)."""

    def submit(self, copies: list[Copy], *, readback: bool = False) -> None:
        """Record `copies` in one command buffer and submit it; a readback (into chunks)
        first waits for the kernels that wrote its sources, an upload's copies are made
        visible to the kernels after it."""
        submission = self._idle()
        commands = submission.commands
        commands.begin()
        if readback:
            commands.barrier("compute", "transfer")
        for copy in copies:
            commands.copy_buffer(
                copy.source.buffer, copy.target.buffer, copy.size, copy.src, copy.dst
            )
        commands.barrier("transfer", "host" if readback else "compute")
        commands.end()
        self.pool.device.submit(commands, submission.fence)
        submission.pending = True
        self.submitted += 1
        submission.order = self.submitted
        for copy in copies:
            copy.chunk.copied_by = (submission, submission.generation)

    def _idle(self) -> _Submission:
        """A submission to record into: one whose work is done, a new one while there are
        fewer than the chunks in flight could need, else the oldest, waited for."""
        idle = [s for s in self.submissions if not s.pending]
        if not idle:
            oldest = min(self.submissions, key=lambda s: s.order, default=None)
            if oldest is None or len(self.submissions) < IN_FLIGHT:
                self.submissions.append(_Submission(self.pool))
                idle = [self.submissions[-1]]
            else:
                oldest.wait(oldest.generation)
                idle = [oldest]
        chosen = idle[0]
        chosen.generation += 1
        return chosen

    @staticmethod
    def wait(chunk: Chunk) -> None:
        """Block until the last copy of `chunk` has run."""
        copied_by = chunk.copied_by
        if copied_by is not None:
            copied_by[0].wait(copied_by[1])
            chunk.copied_by = None

    def close(self) -> None:
        """Wait for every submission, then release them."""
        for submission in self.submissions:
            submission.close()
        self.submissions.clear()
