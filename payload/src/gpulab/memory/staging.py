"""Stager: numpy arrays into and out of device buffers, as fast as the copy engine allows.

Uploads go through a persistently mapped ring of staging chunks: while the device copies
chunk i into the target buffer, host threads fill the next chunks, one whole chunk each
(numpy releases the GIL while it copies). Readbacks run the other way through HOST_CACHED
memory, where host reads are fast: the device copies ahead into the ring while host threads
drain it. Each chunk has its own command buffer and fence.

When the target buffer is itself mappable (integrated GPUs, lavapipe, the H200's
DEVICE_LOCAL|HOST_VISIBLE type), the host could also read or write it directly. Which path
is faster is measured, not assumed: the first such transfer in each direction times both on
a probe of up to PROBE_BYTES and keeps the winner (see `paths`).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from gpulab.memory.manager import Allocation, MemoryManager
from gpulab.vk import CommandBuffer, CommandPool, Fence
from gpulab.vk.buffer import TRANSFER_DST, TRANSFER_SRC

CHUNK_BYTES = 16 << 20
MIN_CHUNK = 64 << 10
PROBE_BYTES = 8 << 20
PARALLEL_ABOVE = 2 << 20
"""Copies smaller than this run on the calling thread: splitting them costs more than it saves."""
_LINE = 64


@dataclass
class _Slot:
    """One chunk of a staging ring, with the command buffer and fence of its copy."""

    allocation: Allocation
    view: npt.NDArray[np.uint8]
    commands: CommandBuffer
    fence: Fence
    in_flight: bool = False


def _settle(futures: dict[int, Future[Any]]) -> None:
    """Cancel what has not started and wait for the rest (after an error part-way)."""
    for future in futures.values():
        future.cancel()
    wait(list(futures.values()))


def _bytes_of(array: npt.NDArray[Any]) -> npt.NDArray[np.uint8]:
    flat = np.ascontiguousarray(array).reshape(-1)
    return flat.view(np.uint8)


class Stager:
    """Host <-> device transfers for one MemoryManager (see the module docstring).

    `chunk_bytes` and `slots` size each ring (default: two chunks per thread); `threads`
    copy on the host (default: up to 8);
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
        paths: dict[str, str] | None = None,
    ) -> None:
        self.threads = threads or min(8, os.cpu_count() or 1)
        slots = slots or max(3, 2 * self.threads)
        if chunk_bytes <= 0 or slots < 1:
            raise ValueError(f"need chunk_bytes > 0 and slots >= 1, got {chunk_bytes}, {slots}")
        self.manager = manager
        self.chunk_bytes = chunk_bytes
        self.slot_count = slots
        self._executor = ThreadPoolExecutor(self.threads) if self.threads > 1 else None
        self._commands = CommandPool(manager.device)
        self._rings: dict[str, list[_Slot]] = {}
        self._sync: tuple[CommandBuffer, Fence] | None = None
        self.paths: dict[str, str] = dict(paths or {})
        """"upload"/"download" -> "direct" or "staged": given, or measured on the first
        transfer to a mappable buffer."""
        self.measurements: dict[str, dict[str, float]] = {}
        """The probe timings (seconds) behind each choice in `paths`."""

    # Host copies ------------------------------------------------------------------------

    def copy(self, target: npt.NDArray[np.uint8], source: npt.NDArray[np.uint8]) -> None:
        """target[:] = source, split over the host threads when large."""
        n = source.size
        if self._executor is None or n < PARALLEL_ABOVE:
            np.copyto(target, source)
            return
        step = -(-n // self.threads // _LINE) * _LINE
        pieces = [(start, min(start + step, n)) for start in range(0, n, step)]
        list(
            self._executor.map(
                lambda p: np.copyto(target[p[0] : p[1]], source[p[0] : p[1]]), pieces
            )
        )

    # Rings ------------------------------------------------------------------------------

    def _ring(self, kind: str, nbytes: int) -> list[_Slot]:
        """The ring of `kind`, with chunks of chunk_bytes, or less for small transfers.

        Chunks start at the transfer's share per thread (rounded up to a power of two, 64 KiB
        at least) and grow to chunk_bytes as larger transfers come: small transfers do not
        pin slots * chunk_bytes of staging memory.
        """
        share = -(-nbytes // self.threads)  # every thread gets a chunk of smaller transfers
        wanted = min(self.chunk_bytes, max(MIN_CHUNK, 1 << (share - 1).bit_length()))
        ring = self._rings.get(kind)
        if ring is not None and ring[0].allocation.size >= wanted:
            return ring
        if ring is not None:
            self._release(ring)
        ring = []
        for _ in range(self.slot_count):
            allocation = self.manager.allocate(
                wanted, kind, TRANSFER_SRC | TRANSFER_DST, label=f"stager {kind}"
            )
            ring.append(
                _Slot(
                    allocation,
                    allocation.view(np.uint8, wanted),
                    self._commands.allocate(),
                    Fence(self.manager.device),
                )
            )
        self._rings[kind] = ring
        return ring

    def _release(self, ring: list[_Slot]) -> None:
        for slot in ring:
            self._wait(slot)
            del slot.view
            slot.allocation.free()
            slot.fence.close()
            slot.commands.close()

    @staticmethod
    def _wait(slot: _Slot) -> None:
        if slot.in_flight:
            slot.fence.wait()
            slot.fence.reset()
            slot.in_flight = False

    def _submit_copy(
        self, slot: _Slot, source: Allocation, target: Allocation, size: int, *, src: int, dst: int
    ) -> None:
        commands = slot.commands
        commands.begin()
        if target is slot.allocation:  # a readback: earlier kernels wrote the source
            commands.barrier("compute", "transfer")
        commands.copy_buffer(source.buffer, target.buffer, size, src, dst)
        commands.barrier("transfer", "host" if target is slot.allocation else "compute")
        commands.end()
        self.manager.device.submit(commands, slot.fence)
        slot.in_flight = True

    # Upload -----------------------------------------------------------------------------

    def upload(self, array: npt.NDArray[Any], allocation: Allocation) -> None:
        """Copy `array` (any shape, C order) into the start of `allocation`."""
        source = _bytes_of(array)
        if source.size > allocation.size:
            raise ValueError(
                f"cannot upload {source.size} bytes into a {allocation.size}-byte allocation"
            )
        if source.size == 0:
            return
        if allocation.host_visible and self._choose("upload", source, allocation) == "direct":
            self._upload_direct(source, allocation)
        else:
            self._upload_staged(source, allocation)

    def _upload_direct(self, source: npt.NDArray[np.uint8], allocation: Allocation) -> None:
        self.copy(allocation.view(np.uint8, source.size), source)

    def _upload_staged(self, source: npt.NDArray[np.uint8], allocation: Allocation) -> None:
        ring = self._ring("upload", source.size)
        chunk = ring[0].allocation.size
        starts = range(0, source.size, chunk)

        def fill(index: int) -> int:
            slot = ring[index % len(ring)]
            self._wait(slot)  # the copy that last used this chunk is done
            piece = source[starts[index] : starts[index] + chunk]
            np.copyto(slot.view[: piece.size], piece)
            return piece.size

        def send(index: int, size: int) -> None:
            slot = ring[index % len(ring)]
            self._submit_copy(slot, slot.allocation, allocation, size, src=0, dst=starts[index])

        if self._executor is None:
            for index in range(len(starts)):
                send(index, fill(index))
        else:
            # Threads fill different chunks at once; each fill waits for its chunk's previous
            # copy, and chunks are submitted in order as their fills complete.
            executor = self._executor
            futures = {i: executor.submit(fill, i) for i in range(min(len(ring), len(starts)))}
            try:
                for index in range(len(starts)):
                    send(index, futures.pop(index).result())
                    if index + len(ring) < len(starts):
                        futures[index + len(ring)] = executor.submit(fill, index + len(ring))
            finally:
                _settle(futures)
        for slot in ring:
            self._wait(slot)

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
        if allocation.host_visible and self._choose("download", target, allocation) == "direct":
            self._download_direct(allocation, target)
        else:
            self._download_staged(allocation, target)
        return out

    def _download_direct(self, allocation: Allocation, target: npt.NDArray[np.uint8]) -> None:
        self._device_writes_visible()
        self.copy(target, allocation.view(np.uint8, target.size))

    def _device_writes_visible(self) -> None:
        """Wait for submitted work and make its writes visible to host reads."""
        if self._sync is None:
            commands = self._commands.allocate()
            commands.begin()
            commands.barrier("compute", "host")
            commands.barrier("transfer", "host")
            commands.end()
            self._sync = (commands, Fence(self.manager.device))
        commands, fence = self._sync
        self.manager.device.submit(commands, fence)
        fence.wait()
        fence.reset()

    def _download_staged(self, allocation: Allocation, target: npt.NDArray[np.uint8]) -> None:
        ring = self._ring("readback", target.size)
        chunk = ring[0].allocation.size
        starts = range(0, target.size, chunk)

        def request(index: int) -> None:
            size = min(chunk, target.size - starts[index])
            slot = ring[index % len(ring)]
            self._submit_copy(slot, allocation, slot.allocation, size, src=starts[index], dst=0)

        def drain(index: int) -> None:
            slot = ring[index % len(ring)]
            self._wait(slot)
            size = min(chunk, target.size - starts[index])
            np.copyto(target[starts[index] : starts[index] + size], slot.view[:size])

        ahead = min(len(ring), len(starts))  # the device copies ahead of the host
        for index in range(ahead):
            request(index)
        if self._executor is None:
            for index in range(len(starts)):
                drain(index)
                if index + len(ring) < len(starts):
                    request(index + len(ring))
            return
        executor = self._executor
        futures = {i: executor.submit(drain, i) for i in range(ahead)}
        try:
            for index in range(len(starts)):
                futures.pop(index).result()
                if index + len(ring) < len(starts):
                    request(index + len(ring))
                    futures[index + len(ring)] = executor.submit(drain, index + len(ring))
        finally:
            _settle(futures)
        for slot in ring:
            self._wait(slot)

    # Path choice ------------------------------------------------------------------------

    def _choose(self, direction: str, data: npt.NDArray[np.uint8], allocation: Allocation) -> str:
        """The measured faster path for a mappable buffer (measured on first use)."""
        path = self.paths.get(direction)
        if path is None:
            path = self.measure(direction, data[:PROBE_BYTES], allocation)
        return path

    def measure(self, direction: str, probe: npt.NDArray[np.uint8], allocation: Allocation) -> str:
        """Time the direct and the staged path on `probe` (best of three each); keep the faster."""
        ways: dict[str, Callable[[], None]]
        if direction == "upload":
            ways = {
                "direct": lambda: self._upload_direct(probe, allocation),
                "staged": lambda: self._upload_staged(probe, allocation),
            }
        else:
            ways = {
                "direct": lambda: self._download_direct(allocation, probe),
                "staged": lambda: self._download_staged(allocation, probe),
            }
        timings: dict[str, float] = {}
        for name, run in ways.items():
            best = float("inf")
            for _ in range(3):
                start = time.perf_counter()
                run()
                best = min(best, time.perf_counter() - start)
            timings[name] = best
        self.measurements[direction] = timings
        self.paths[direction] = min(timings, key=timings.__getitem__)
        return self.paths[direction]

    def close(self) -> None:
        """Wait for copies in flight, then release the rings, command buffers and fences."""
        for ring in self._rings.values():
            self._release(ring)
        self._rings.clear()
        if self._sync is not None:
            self._sync[1].close()
            self._sync = None
        self._commands.close()
        if self._executor is not None:
            self._executor.shutdown()
            self._executor = None

    def __enter__(self) -> Stager:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
