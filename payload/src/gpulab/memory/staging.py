"""Stager: numpy arrays into and out of device buffers, as fast as the copy engine allows.

Uploads go through a persistently mapped ring of staging chunks: while the device copies
chunk i into the target buffer, host threads fill the next chunks, one whole chunk each
(numpy releases the GIL while it copies). Readbacks run the other way through HOST_CACHED
memory, where host reads are fast: the device copies ahead into the ring while host threads
drain it. The chunks and the submissions of their copies are gpulab.memory.ring's: upload
chunks filled at about the same time go to the device in one submission.

Regions of files (.npy inputs' data) are uploaded by `upload_files` the same way without
any host array: host threads read chunks with os.preadv straight from the page cache into
the mapped chunks of the readback ring while the device copies the chunks read before; all
the regions of one call share one pipeline, so a second file's reads overlap the first's
last copies instead of waiting for them.

Everything is sized to the transfer at hand, so that a short run stays cheap at both ends:
a ring holds no more chunks than the transfers so far needed (growing to `slots`), and
transfers smaller than `threaded_from` run on the calling thread; the host threads are
started by the first transfer that uses them.

When the target buffer is itself mappable (integrated GPUs, lavapipe, the H200's
DEVICE_LOCAL|HOST_VISIBLE type), the host could also read or write it directly; which way a
transfer takes is gpulab.memory.path_choice's (measured once per direction, see `paths`).

Arrays of at most UPDATE_LIMIT bytes (64 KiB) that would be staged are written by the
recording itself instead (vkCmdUpdateBuffer, "inline"): a new process then makes no staging
memory for a graph's small values.

Arrays made by `pinned_empty` live in mapped host memory already: they move with one
vkCmdCopyBuffer and no host copy ("pinned" in `counts`). An existing numpy array can be
`register`ed instead (what cudaHostRegister does: its pages are imported once with
VK_EXT_external_memory_host, see host_import), then it moves the same way ("registered").
Pageable arrays of `import_above` bytes or more are imported for each transfer instead of
going through the ring, where the device supports it ("imported": off by default, since
the import costs more than staging saves).
"""

from __future__ import annotations

import mmap
import os
import time
from collections.abc import Callable, Iterable
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from typing import Any

import numpy as np
import numpy.typing as npt

from gpulab.memory import file_regions
from gpulab.memory.file_regions import FileRegion, RegionReadError, read_chunk
from gpulab.memory.host_import import HostImporter
from gpulab.memory.manager import Allocation, MemoryManager
from gpulab.memory.path_choice import PathChoice
from gpulab.memory.pinned import Pin, PinnedArray, pinned_location
from gpulab.memory.registered import RegisteredArrays
from gpulab.memory.ring import HUGE_PAGE, Chunk, Copies, Copy, HostBlock, ImportedChunk, PinnedChunk
from gpulab.vk import Closeable, CommandBuffer, CommandPool, Fence, VulkanError
from gpulab.vk.buffer import TRANSFER_DST, TRANSFER_SRC
from gpulab.vk.commands import UPDATE_LIMIT
from gpulab.vk.memory import HOST_CACHED

CHUNK_BYTES = 16 << 20
MIN_CHUNK = 64 << 10
MIN_SHARE = 8 << 20
"""Chunks of large transfers hold at least this much (while a transfer still gets four
chunks): on the H200, 64 MiB moved faster in 8 chunks of 8 MiB on 8 threads than in 16 of
4 MiB on 16 (docs/benchmarks.md)."""
THREADED_FROM = 8 << 20
"""Transfers and host copies smaller than this run on the calling thread (staged ones still
pipelined over chunks): splitting them saves less than handing pieces to threads costs, and a
short run then never starts (or joins) the host threads."""
_LINE = 64
MAX_THREADS = 16
"""The default host threads: up to one per core (on the H200's 16 cores, 16 read 1 GiB back
faster than 8 in every run and uploaded it about as fast; see docs/benchmarks.md)."""
SPIN_S = 0.05
"""A pinned or imported copy is waited for by polling its fence for up to this long (then
blocking): a blocking wait's wake-up costs a visible share of a few-millisecond copy."""
ONE_COPY_BYTES = 256 << 20
"""A pinned or imported transfer is recorded as copies of at most this size."""
PATHS = (
    "pinned",
    "registered",
    "imported",
    "staged",
    "direct",
    "inline",
    "file",
    "file_direct",
)
"""Transfers by path: "inline" are uploads of at most UPDATE_LIMIT bytes carried by the
recording (vkCmdUpdateBuffer); "file" and "file_direct" are upload_files' regions, through
the ring or read straight into mapped device memory."""
UPLOAD_MEMORY = {"write_combined": "upload", "cached": "readback"}
"""Stager(upload_memory=...) -> the memory kind of the upload ring."""
READBACK_MEMORY = ("imported", "pinned")
"""Stager(readback_memory=...): the readback ring (.npy file uploads and staged downloads) in
one block of anonymous host memory imported at once, where the device can import host memory
(else, or when an import fails, pinned memory), or in pinned memory. On the H100, 80 MiB
imported is ready in 8 ms, pinned in 23-68 ms, and a new process's first staged download of
256 MiB took 31-36 ms through the imported ring against 122-124 ms through the pinned one
(docs/benchmarks.md, 7 Dec 21:30)."""


def _settle(futures: Iterable[Future[Any]]) -> None:
    """Cancel what has not started and wait for the rest (after an error part-way)."""
    waiting = list(futures)
    for future in waiting:
        future.cancel()
    wait(waiting)


def combine_stager_stats(stagers: list[dict[str, Any]]) -> dict[str, Any]:
    """The stagers' pinned and registered arrays and transfer counts added up."""
    keys = (
        "pinned_arrays",
        "pinned_bytes",
        "registered_arrays",
        "registered_bytes",
        "staging_bytes",
        "staging_alloc_ms",
        "staging_import_ms",
    )
    total: dict[str, Any] = {key: sum(s[key] for s in stagers) for key in keys}
    total["transfers"] = {}
    for stager in stagers:
        for direction, counts in stager["transfers"].items():
            into = total["transfers"].setdefault(direction, {})
            for path, count in counts.items():
                into[path] = into.get(path, 0) + count
    return total


def _touch_pages(memory: npt.NDArray[np.uint8]) -> None:
    """Write a zero into each page of `memory` (its first touch faults the page in)."""
    memory[:: mmap.PAGESIZE] = 0


def _bytes_of(array: npt.NDArray[Any]) -> npt.NDArray[np.uint8]:
    flat = np.ascontiguousarray(array).reshape(-1)
    return flat.view(np.uint8)


class Stager(Closeable):
    """Host <-> device transfers for one MemoryManager (see the module docstring).

    `chunk_bytes` and `slots` size each ring (default: two chunks per thread); `threads`
    copy on the host (default: one per core, up to MAX_THREADS), for transfers of at least
    `threaded_from` bytes; `upload_memory` is
    "write_combined" (the upload memory kind) or "cached" (HOST_CACHED, as the readback
    ring) for the upload ring;
    `import_above` (bytes) imports pageable arrays at least that large instead of staging
    them, where the device can (None: never);
    `paths` fixes the choice for mappable buffers instead of measuring it. Transfers block
    until the data has arrived. One thread at a time: the rings are shared between calls.
    Close it before the manager.
    """

    def __init__(
        self,
        manager: MemoryManager,
        chunk_bytes: int = CHUNK_BYTES,
        slots: int | None = None,
        threads: int | None = None,
        *,
        paths: dict[str, str] | None = None,
        upload_memory: str = "write_combined",
        import_above: int | None = None,
        threaded_from: int = THREADED_FROM,
        readback_memory: str = "imported",
    ) -> None:
        if upload_memory not in UPLOAD_MEMORY:
            raise ValueError(
                f"upload_memory must be one of {', '.join(UPLOAD_MEMORY)}, got {upload_memory!r}"
            )
        if readback_memory not in READBACK_MEMORY:
            raise ValueError(
                f"readback_memory must be one of {', '.join(READBACK_MEMORY)}, "
                f"got {readback_memory!r}"
            )
        self.readback_memory = readback_memory
        self.import_refused: str | None = None
        """Why the imported readback ring could not be made (the pinned one serves since)."""
        self.threads = threads or min(MAX_THREADS, os.cpu_count() or 1)
        slots = slots or max(3, 2 * self.threads)
        if chunk_bytes <= 0 or slots < 1:
            raise ValueError(f"need chunk_bytes > 0 and slots >= 1, got {chunk_bytes}, {slots}")
        self.manager = manager
        self.chunk_bytes = chunk_bytes
        self.slot_count = slots
        self.threaded_from = threaded_from
        self._executor: ThreadPoolExecutor | None = None
        """The host threads: started by the first transfer that uses them."""
        self._commands = CommandPool(manager.device)
        self._rings: dict[str, list[Any]] = {}
        """Rings by kind ("upload", "readback": PinnedChunk; "imported": ImportedChunk)."""
        self._copies = Copies(self._commands)
        self._sync: tuple[CommandBuffer, Fence] | None = None
        self._copier: tuple[CommandBuffer, Fence] | None = None
        self._copier_recording: tuple[int, ...] = ()
        self._choice = PathChoice(paths)
        self.upload_memory = upload_memory
        self.import_above = import_above
        self._pins: set[Pin] = set()
        self._host_importer: HostImporter | None = None
        self._registered = RegisteredArrays()
        self.counts: dict[str, dict[str, int]] = {
            direction: dict.fromkeys(PATHS, 0) for direction in ("upload", "download")
        }
        """Transfers per direction and path."""
        self.staging_alloc_s = 0.0
        """Seconds spent allocating ring chunks (a driver that pins host memory when it is
        allocated, as NVIDIA's does, takes about as long as a copy of it)."""
        self.staging_import_s = 0.0
        """Seconds spent making imported rings (touching their pages, importing them)."""
        manager.attach("transfers", self, combine_stager_stats)

    # Host copies ------------------------------------------------------------------------

    def _threads_for(self, nbytes: int) -> ThreadPoolExecutor | None:
        """The host threads for a transfer of `nbytes` (None: the calling thread alone)."""
        if self.threads == 1 or nbytes < self.threaded_from:
            return None
        if self._executor is None:
            self._executor = ThreadPoolExecutor(self.threads, thread_name_prefix="gpulab-stager")
        return self._executor

    def copy(self, target: npt.NDArray[np.uint8], source: npt.NDArray[np.uint8]) -> None:
        """target[:] = source, split over the host threads when large."""
        n = source.size
        threads = self._threads_for(n)
        if threads is None:
            np.copyto(target, source)
            return
        step = -(-n // self.threads // _LINE) * _LINE
        pieces = [(start, min(start + step, n)) for start in range(0, n, step)]
        list(threads.map(lambda p: np.copyto(target[p[0] : p[1]], source[p[0] : p[1]]), pieces))

    # Rings ------------------------------------------------------------------------------

    def chunk_for(self, nbytes: int) -> int:
        """The chunk size of a staged transfer of `nbytes`.

        The transfer's share per thread, but at least MIN_SHARE unless that leaves fewer than
        four chunks, rounded up to a power of two (MIN_CHUNK at least), at most chunk_bytes.
        """
        share = max(-(-nbytes // self.threads), min(MIN_SHARE, -(-nbytes // 4)))
        return min(self.chunk_bytes, max(MIN_CHUNK, 1 << (share - 1).bit_length()))

    def _ring(
        self, kind: str, nbytes: int, *, chunk: int | None = None, most: int | None = None
    ) -> tuple[list[Any], int]:
        """The ring of `kind` for a transfer of `nbytes`, and the chunk size to use in it
        (`chunk`, else chunk_for(nbytes); at most `most` chunks needed, else slot_count).

        Slots grow to the largest chunk used so far (chunk_bytes at most), and the ring to the
        most chunks one transfer had (`slot_count` at most): small transfers do not pin
        slots * chunk_bytes of staging memory. An imported ring is one block of host memory,
        made again whole when it must grow.
        """
        wanted = chunk or self.chunk_for(nbytes)
        count = min(most or self.slot_count, self.slot_count, -(-nbytes // wanted))
        ring = self._rings.get(kind, [])
        if ring and (ring[0].size < wanted or (kind == "imported" and len(ring) < count)):
            count = max(count, len(ring))
            size = max(ring[0].size, wanted)
            self._release(ring)
            ring = []
        else:
            size = ring[0].size if ring else wanted
        if kind == "imported" and not ring:
            try:
                block = HostBlock(count * size, self._importer, self._touch)
            except (OSError, ValueError, VulkanError) as error:
                # Host memory this device or system will not import after all (a limit, the
                # driver's refusal): the pinned ring serves from now on.
                self.import_refused = f"{type(error).__name__}: {error}"
                self._rings.pop(kind, None)
                return self._ring("readback", nbytes, chunk=chunk, most=most)
            self.staging_import_s += block.setup_s
            ring = ImportedChunk.ring(block, count, size)
        while len(ring) < count:
            ring.append(self._slot(kind, size))
        self._rings[kind] = ring
        return ring, wanted

    def _touch(self, view: npt.NDArray[np.uint8]) -> None:
        """Fault in every page of `view` (an imported ring's block) on the host threads, a
        whole number of huge pages each."""
        executor = self._threads_for(view.size)
        if executor is None:
            _touch_pages(view)
            return
        step = -(-view.size // self.threads // HUGE_PAGE) * HUGE_PAGE
        list(executor.map(_touch_pages, [view[at : at + step] for at in range(0, view.size, step)]))

    def _slot(self, kind: str, size: int) -> Chunk:
        memory_kind = UPLOAD_MEMORY[self.upload_memory] if kind == "upload" else kind
        start = time.perf_counter()
        allocation = self.manager.allocate(
            size, memory_kind, TRANSFER_SRC | TRANSFER_DST, label=f"stager {kind}"
        )
        self.staging_alloc_s += time.perf_counter() - start
        return PinnedChunk(allocation, allocation.view(np.uint8, size))

    def _release(self, ring: list[Any]) -> None:
        for slot in ring:
            self._wait(slot)
            slot.release()

    def _wait(self, slot: Chunk) -> None:
        self._copies.wait(slot)

    # Upload -----------------------------------------------------------------------------

    def upload(self, array: npt.NDArray[Any], allocation: Allocation) -> None:
        """Copy `array` (any shape, C order) into the start of `allocation`."""
        if array.nbytes > allocation.size:
            raise ValueError(
                f"cannot upload {array.nbytes} bytes into a {allocation.size}-byte allocation"
            )
        if array.nbytes == 0:
            return
        pinned = pinned_location(array)
        if pinned is not None:
            self._copy_whole(pinned[0], allocation, array.nbytes, src=pinned[1], dst=0)
            self.counts["upload"]["pinned"] += 1
            return
        registered = self._registered.locate(array)
        if registered is not None:
            self._copy_whole(registered[0], allocation, array.nbytes, src=registered[1], dst=0)
            self.counts["upload"]["registered"] += 1
            return
        source = _bytes_of(array)
        if allocation.host_visible and self._choose("upload", source, allocation) == "direct":
            self._upload_direct(source, allocation)
            path = "direct"
        elif source.size <= UPDATE_LIMIT and source.size % 4 == 0:
            self._upload_inline(source, allocation)
            path = "inline"
        elif self._imports(source):
            with self._importer.import_array(source) as imported:
                self._copy_whole(imported, allocation, source.size, src=imported.offset, dst=0)
            path = "imported"
        else:
            self._upload_staged(source, allocation)
            path = "staged"
        self.counts["upload"][path] += 1

    # Pinned and imported memory ---------------------------------------------------------

    def pinned_empty(
        self, shape: int | tuple[int, ...], dtype: npt.DTypeLike = np.float32
    ) -> PinnedArray:
        """An uninitialised array in pinned host memory (HOST_CACHED where the device has it).

        upload() and download(out=...) move it (or a contiguous slice of it) with one device
        copy and no host copy. Call its free() when done; close() frees those left.
        """
        dt = np.dtype(dtype)
        count = int(np.prod(shape, dtype=np.int64))
        nbytes = max(count * dt.itemsize, 1)
        allocation = self.manager.allocate(
            nbytes, "readback", TRANSFER_SRC | TRANSFER_DST, label="pinned host array"
        )
        pin = Pin(allocation, self._pins.discard)
        self._pins.add(pin)
        array = allocation.view(dt, count).reshape(shape).view(PinnedArray)
        array.pin = pin
        return array

    def register(self, array: npt.NDArray[Any]) -> None:
        """Import a C-contiguous array's pages once, so that it (or a contiguous slice of it)
        moves like a pinned array until unregister(). The Stager keeps the array alive
        meanwhile. ValueError where the device cannot import host memory."""
        self._registered.add(array, self._importer)

    def unregister(self, array: npt.NDArray[Any]) -> None:
        """Release the import made by register(array)."""
        self._registered.remove(array)

    @property
    def _importer(self) -> HostImporter:
        """The device's importer of host memory, made on first need and shared by registered
        arrays, per-transfer imports and the imported readback ring (its `usable` says
        whether the device can import at all)."""
        if self._host_importer is None:
            self._host_importer = HostImporter(self.manager.device)
        return self._host_importer

    def _imports(self, data: npt.NDArray[np.uint8]) -> bool:
        """Whether a pageable array of this size is imported rather than staged."""
        if self.import_above is None or data.size < self.import_above:
            return False
        return self._importer.usable

    def _copy_whole(self, source: Any, target: Any, size: int, *, src: int, dst: int) -> None:
        """One submission of copies between two buffers (Allocations or imported arrays).

        The same copy as the last one is resubmitted without recording it again (the
        recording keeps both buffers referenced, so their ids stay theirs).
        """
        if self._copier is None:
            self._copier = (self._commands.allocate(), Fence(self.manager.device))
        commands, fence = self._copier
        key = (id(source.buffer), id(target.buffer), size, src, dst)
        if key != self._copier_recording:
            self._copier_recording = ()
            commands.begin()
            commands.barrier("compute", "transfer")  # earlier kernels wrote or read the target
            for start in range(0, size, ONE_COPY_BYTES):
                piece = min(ONE_COPY_BYTES, size - start)
                commands.copy_buffer(source.buffer, target.buffer, piece, src + start, dst + start)
            commands.barrier("transfer", "host")
            commands.barrier("transfer", "compute")
            commands.end()
            self._copier_recording = key
        self.manager.device.submit(commands, fence)
        if self.manager.device.info.type != "cpu":  # a CPU device needs every core itself
            deadline = time.perf_counter() + SPIN_S
            while not fence.signaled and time.perf_counter() < deadline:
                pass
        fence.wait()
        fence.reset()

    def _upload_inline(self, source: npt.NDArray[np.uint8], allocation: Allocation) -> None:
        """A small array written by the recording itself (vkCmdUpdateBuffer): no staging
        memory to make, which in a new process costs more than the transfer (NVIDIA pins it)."""

        def record(commands: CommandBuffer) -> None:
            commands.barrier("compute", "transfer")  # earlier kernels read or wrote the target
            commands.update_buffer(allocation.buffer, source.tobytes())
            commands.barrier("transfer", "compute")

        self._run_once(record)

    def _upload_direct(self, source: npt.NDArray[np.uint8], allocation: Allocation) -> None:
        self.copy(allocation.view(np.uint8, source.size), source)

    def _upload_staged(self, source: npt.NDArray[np.uint8], allocation: Allocation) -> None:
        ring, chunk = self._ring("upload", source.size)
        starts = range(0, source.size, chunk)

        def fill(index: int, slot: Any) -> int:
            self._wait(slot)  # the copy that last used this chunk is done
            piece = source[starts[index] : starts[index] + chunk]
            np.copyto(slot.view[: piece.size], piece)
            return piece.size

        self._pipeline(ring, [(allocation, start) for start in starts], fill, source.size)

    def _pipeline(
        self,
        ring: list[Any],
        targets: list[tuple[Allocation, int]],
        fill: Callable[[int, Any], int],
        nbytes: int,
    ) -> None:
        """Chunk i of an upload is filled by `fill(i, slot)` into a slot of `ring` (the bytes
        it put there; it first waits for the slot's previous copy) and copied to targets[i]
        (an allocation and the offset in it); with host threads, the next chunks fill while
        the device copies.

        The threads' chunks are copied in the order their fills end, not in chunk order: every
        chunk has a target of its own, and a slot whose copy is submitted takes the next
        chunk at once, so one slow read holds up its own slot only. The fills that ended
        together go in one submission.
        """

        def copy(index: int, slot: Any, size: int) -> Copy:
            target, at = targets[index]
            source, offset = slot.source
            return Copy(slot, source, target, size, offset, at)

        count = len(targets)
        executor = self._threads_for(nbytes)
        try:
            if executor is None:
                for index in range(count):
                    slot = ring[index % len(ring)]
                    self._copies.submit([copy(index, slot, fill(index, slot))])
                return
            futures: dict[Future[int], tuple[int, Any]] = {}

            def start(index: int, slot: Any) -> None:
                futures[executor.submit(fill, index, slot)] = (index, slot)

            for index, slot in enumerate(ring[:count]):
                start(index, slot)
            following = len(futures)
            try:
                while futures:
                    done, _ = wait(futures, return_when=FIRST_COMPLETED)
                    batch = []
                    for future in done:
                        index, slot = futures.pop(future)
                        batch.append(copy(index, slot, future.result()))
                    self._copies.submit(batch)
                    for sent in batch:
                        if following < count:
                            start(following, sent.chunk)
                            following += 1
            finally:
                _settle(futures)
        finally:
            # Also after an error part-way (a fill that raised): no copy into a target may
            # still run when the caller frees it.
            for slot in ring:
                self._wait(slot)

    # Files ------------------------------------------------------------------------------

    def upload_file(
        self,
        file: int,
        offset: int,
        nbytes: int,
        allocation: Allocation,
        inspect: Callable[[npt.NDArray[np.uint8], int], None] | None = None,
    ) -> None:
        """Copy `nbytes` of the open file `file` (a descriptor) from byte `offset` into the
        start of `allocation`: upload_files with one region, its EOFError or OSError raised
        as it is."""
        try:
            self.upload_files([FileRegion(file, offset, nbytes, allocation, inspect)])
        except RegionReadError as failed:
            raise failed.error from None

    def upload_files(self, regions: list[FileRegion]) -> None:
        """Copy each region of a file into the start of its allocation, with no host copy but
        the read itself: host threads read chunks (os.preadv, without the GIL) straight into
        the mapped chunks of the staging ring while the device copies the chunks read before,
        every region's chunks in one pipeline. The ring is the readback ring (HOST_CACHED
        where the device has it, so `inspect` reads it fast, and downloads share its memory),
        or with readback_memory="imported" one block of anonymous host memory, its pages touched on
        the host threads and imported at once (gpulab.memory.ring.HostBlock). A region whose
        allocation is itself mapped (integrated GPUs, lavapipe; a discrete GPU's VRAM behind a
        resizable BAR) is read straight into it, with no ring, no copy and no pinned memory
        to allocate; unless it is uncached memory that its `inspect` would read back.

        A region's `inspect(chunk, start)` sees each of its chunks after the read, on the
        thread that read it (`start`: the chunk's byte offset in the region); what it raises
        stops the transfer and is raised here, as is RegionReadError when a read fails or a
        file ends before its region does.
        """
        for region in regions:
            if region.nbytes > region.allocation.size:
                raise ValueError(
                    f"cannot upload {region.nbytes} bytes into a "
                    f"{region.allocation.size}-byte allocation"
                )
        total = sum(region.nbytes for region in regions)
        if total == 0:
            return
        chunk = min(self.chunk_bytes, file_regions.FILE_CHUNK, self.chunk_for(total))
        straight_regions, ringed_regions = file_regions.split_ways(regions)
        if straight_regions:
            straight = file_regions.chunks_of(regions, straight_regions, chunk)
            # Mapped here, once per region: a memory's first view maps it (vkMapMemory), which
            # the reading threads must not do at once.
            views = {
                index: regions[index].allocation.view(np.uint8, regions[index].nbytes)
                for index in straight_regions
            }

            def read_straight(i: int) -> int:
                index, start, size = straight[i]
                return read_chunk(regions, index, start, views[index][start : start + size])

            nbytes = sum(regions[index].nbytes for index in straight_regions)
            self._each(len(straight), read_straight, nbytes)
            self.counts["upload"]["file_direct"] += len(straight_regions)
        if ringed_regions:
            ringed = file_regions.chunks_of(regions, ringed_regions, chunk)
            nbytes = sum(regions[index].nbytes for index in ringed_regions)
            kind = self._readback_kind()
            most = (
                file_regions.IMPORTED_RING_CHUNKS
                if kind == "imported"
                else file_regions.FILE_RING_CHUNKS
            )
            ring, chunk = self._ring(kind, nbytes, chunk=chunk, most=min(most, self.threads + 2))

            def fill(i: int, slot: Any) -> int:
                self._wait(slot)  # the copy that last used this chunk is done
                index, start, size = ringed[i]
                return read_chunk(regions, index, start, slot.view[:size])

            targets = [(regions[index].allocation, start) for index, start, _ in ringed]
            self._pipeline(ring, targets, fill, nbytes)
            self.counts["upload"]["file"] += len(ringed_regions)

    def _readback_kind(self) -> str:
        """The readback ring's kind: "imported" where readback_memory asks for it and the
        device can import host memory, else "readback" (pinned)."""
        if self.readback_memory != "imported" or self.import_refused is not None:
            return "readback"
        return "imported" if self._importer.usable else "readback"

    def _each(self, count: int, step: Callable[[int], object], nbytes: int) -> None:
        """step(0) ... step(count - 1), on the host threads when `nbytes` is large; an error
        in one cancels those not started and waits for the others before it is raised."""
        executor = self._threads_for(nbytes)
        if executor is None:
            for index in range(count):
                step(index)
            return
        futures = {i: executor.submit(step, i) for i in range(count)}
        try:
            for index in range(count):
                futures.pop(index).result()
        finally:
            _settle(futures.values())

    # Download ---------------------------------------------------------------------------

    def download(
        self,
        allocation: Allocation,
        shape: int | tuple[int, ...],
        dtype: npt.DTypeLike = np.float32,
        out: npt.NDArray[Any] | None = None,
    ) -> npt.NDArray[Any]:
        """The start of `allocation` as a new array of `shape` and `dtype` (or into `out`)."""
        if out is None:
            out = np.empty(shape, dtype=dtype)
        elif not out.flags.c_contiguous:
            raise ValueError("download needs a C-contiguous `out` array")
        target = out.reshape(-1).view(np.uint8)
        if target.size > allocation.size:
            raise ValueError(
                f"cannot download {target.size} bytes from a {allocation.size}-byte allocation"
            )
        if target.size == 0:
            return out
        pinned = pinned_location(out)
        registered = self._registered.locate(out)
        if pinned is not None:
            self._copy_whole(allocation, pinned[0], target.size, src=0, dst=pinned[1])
            path = "pinned"
        elif registered is not None:
            self._copy_whole(allocation, registered[0], target.size, src=0, dst=registered[1])
            path = "registered"
        elif allocation.host_visible and self._choose("download", target, allocation) == "direct":
            self._download_direct(allocation, target)
            path = "direct"
        elif self._imports(target):
            with self._importer.import_array(target) as imported:
                self._copy_whole(allocation, imported, target.size, src=0, dst=imported.offset)
            path = "imported"
        else:
            self._download_staged(allocation, target)
            path = "staged"
        self.counts["download"][path] += 1
        return out

    def _download_direct(self, allocation: Allocation, target: npt.NDArray[np.uint8]) -> None:
        self._device_writes_visible()
        self.copy(target, allocation.view(np.uint8, target.size))

    def _device_writes_visible(self) -> None:
        """Wait for submitted work and make its writes visible to host reads."""

        def record(commands: CommandBuffer) -> None:
            commands.barrier("compute", "host")
            commands.barrier("transfer", "host")

        self._run_once(record)

    def _run_once(self, record: Callable[[CommandBuffer], None]) -> None:
        """Record with `record` into the command buffer of transfers that are recorded, run
        and waited for, then submit it and wait."""
        if self._sync is None:
            self._sync = (self._commands.allocate(), Fence(self.manager.device))
        commands, fence = self._sync
        commands.begin()
        record(commands)
        commands.end()
        self.manager.device.submit(commands, fence)
        fence.wait()
        fence.reset()

    def _download_staged(self, allocation: Allocation, target: npt.NDArray[np.uint8]) -> None:
        ring, chunk = self._ring(self._readback_kind(), target.size)
        starts = range(0, target.size, chunk)

        def request(index: int) -> None:
            # One submission per chunk: a chunk's drain starts when its own copy is done.
            size = min(chunk, target.size - starts[index])
            slot = ring[index % len(ring)]
            into, at = slot.source
            self._copies.submit(
                [Copy(slot, allocation, into, size, starts[index], at)], readback=True
            )

        def drain(index: int) -> None:
            slot = ring[index % len(ring)]
            self._wait(slot)
            size = min(chunk, target.size - starts[index])
            np.copyto(target[starts[index] : starts[index] + size], slot.view[:size])

        ahead = min(len(ring), len(starts))  # the device copies ahead of the host
        for index in range(ahead):
            request(index)
        executor = self._threads_for(target.size)
        if executor is None:
            for index in range(len(starts)):
                drain(index)
                if index + len(ring) < len(starts):
                    request(index + len(ring))
            return
        futures = {i: executor.submit(drain, i) for i in range(ahead)}
        try:
            for index in range(len(starts)):
                futures.pop(index).result()
                if index + len(ring) < len(starts):
                    request(index + len(ring))
                    futures[index + len(ring)] = executor.submit(drain, index + len(ring))
        finally:
            _settle(futures.values())
        for slot in ring:
            self._wait(slot)

    # Path choice ------------------------------------------------------------------------

    @property
    def paths(self) -> dict[str, str]:
        """Each direction's way ("upload"/"download" -> "direct" or "staged"): given, or
        measured on the first transfer to a mappable buffer (gpulab.memory.path_choice)."""
        return self._choice.paths

    @paths.setter
    def paths(self, paths: dict[str, str]) -> None:
        self._choice.paths = dict(paths)

    @property
    def measurements(self) -> dict[str, dict[str, float]]:
        """The probe timings (seconds) behind each choice in `paths`."""
        return self._choice.measurements

    def _choose(self, direction: str, data: npt.NDArray[np.uint8], allocation: Allocation) -> str:
        """The way for a mappable buffer (PathChoice.choose, with this Stager's two ways)."""

        def ways(nbytes: int) -> dict[str, Callable[[], None]]:
            probe = data[:nbytes]
            if direction == "upload":
                return {
                    "direct": lambda: self._upload_direct(probe, allocation),
                    "staged": lambda: self._upload_staged(probe, allocation),
                }
            return {
                "direct": lambda: self._download_direct(allocation, probe),
                "staged": lambda: self._download_staged(allocation, probe),
            }

        cached = bool(allocation.memory_type.property_flags & HOST_CACHED)
        return self._choice.choose(direction, data.size, cached=cached, ways=ways)

    def stats(self) -> dict[str, Any]:
        """Pinned and registered arrays (count, bytes), the rings' chunks (bytes, the ms their
        allocation took, and an imported ring's import) and transfers per direction and path."""
        return {
            "pinned_arrays": len(self._pins),
            "pinned_bytes": sum(pin.nbytes for pin in self._pins),
            "registered_arrays": self._registered.count,
            "registered_bytes": self._registered.nbytes,
            "staging_bytes": sum(slot.size for ring in self._rings.values() for slot in ring),
            "staging_alloc_ms": self.staging_alloc_s * 1e3,
            "staging_import_ms": self.staging_import_s * 1e3,
            "transfers": {direction: dict(counts) for direction, counts in self.counts.items()},
        }

    def close(self) -> None:
        """Wait for copies in flight, then release the rings, pinned arrays and fences."""
        self.manager.detach(self)
        for pin in list(self._pins):
            pin.free()
        self._registered.close()
        for ring in self._rings.values():
            self._release(ring)
        self._rings.clear()
        self._copies.close()
        for pair in (self._sync, self._copier):
            if pair is not None:
                pair[1].close()
        self._sync = self._copier = None
        self._copier_recording = ()
        self._commands.close()
        if self._executor is not None:
            self._executor.shutdown()
            self._executor = None
