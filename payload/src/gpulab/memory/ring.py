"""A staging ring's chunks, and the submissions that copy them (the Stager's pipelines).

A chunk is mapped host memory that the device copies from or into: pinned memory from the
MemoryManager (`PinnedChunk`), or a slice of anonymous host memory imported at once with
VK_EXT_external_memory_host (`HostBlock`, `ImportedChunk`).

`Copies` records and submits copies between chunks and device buffers, several chunks'
copies in one command buffer and one vkQueueSubmit where the caller has them ready at once:
a submission costs the host about the same whatever it carries, so an upload whose chunks
fill together pays for one. A chunk remembers which submission last copied it; waiting for
the chunk waits for that submission's fence (one whose command buffer has been recorded
again since is done already).
"""

from __future__ import annotations

import contextlib
import mmap
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np
import numpy.typing as npt

from gpulab.memory.host_import import HostImporter
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


HUGE_PAGE = 2 << 20
"""A host block starts on this boundary, so that transparent huge pages can back it."""


class HostBlock:
    """Anonymous host memory imported as one device buffer (VK_EXT_external_memory_host), the
    memory of an imported ring: pinning pages that exist is cheap, so the block's pages are
    first touched on the host threads (`touch`, in huge pages where the kernel gives them),
    then imported at once. On the H100, 80 MiB so: 8 ms, against 23-68 ms to allocate as much
    pinned memory (docs/benchmarks.md, 7 Dec 21:01). Closed by its last chunk."""

    def __init__(
        self,
        nbytes: int,
        importer: HostImporter,
        touch: Callable[[npt.NDArray[np.uint8]], None],
    ) -> None:
        start = time.perf_counter()
        # The mapping is held by its views alone, so it goes with the last of them (a chunk a
        # traceback still holds keeps it until then, where mmap.close() would refuse).
        memory = mmap.mmap(-1, nbytes + HUGE_PAGE, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
        with contextlib.suppress(AttributeError, OSError):  # no such advice here: small pages
            memory.madvise(mmap.MADV_HUGEPAGE)
        whole = np.frombuffer(memory, dtype=np.uint8)
        skip = -int(whole.ctypes.data) % HUGE_PAGE
        self.view: npt.NDArray[np.uint8] = whole[skip : skip + nbytes]
        del whole, memory
        touch(self.view)
        self.imported = importer.import_array(self.view)
        self.setup_s = time.perf_counter() - start
        """Seconds to map, touch and import it."""
        self.users = 0

    def release(self) -> None:
        """One chunk fewer; the last releases the import and the memory."""
        self.users -= 1
        if self.users == 0:
            self.imported.close()  # the device is done with the pages
            self.view = np.empty(0, np.uint8)


@dataclass
class ImportedChunk:
    """A chunk of a HostBlock: bytes [offset, offset + size) of it."""

    block: HostBlock
    offset: int
    view: npt.NDArray[np.uint8]
    copied_by: tuple[_Submission, int] | None = None

    @classmethod
    def ring(cls, block: HostBlock, count: int, size: int) -> list[ImportedChunk]:
        """`count` chunks of `size` bytes, the block's first count * size bytes."""
        block.users += count
        return [cls(block, i * size, block.view[i * size : (i + 1) * size]) for i in range(count)]

    @property
    def source(self) -> tuple[Any, int]:
        return self.block.imported, self.block.imported.offset + self.offset

    @property
    def size(self) -> int:
        return self.view.size

    def release(self) -> None:
        del self.view
        self.block.release()


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
        chosen = next((s for s in self.submissions if not s.pending), None)
        if chosen is None and len(self.submissions) < IN_FLIGHT:
            chosen = _Submission(self.pool)
            self.submissions.append(chosen)
        elif chosen is None:
            chosen = min(self.submissions, key=lambda s: s.order)
            chosen.wait(chosen.generation)
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
