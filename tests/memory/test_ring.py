"""The staging ring's chunks and their submissions (gpulab.memory.ring) on a real device
(lavapipe here): copies batched into one submission land whole, a chunk waits for the
submission that last copied it, reused submissions and waiting threads stay correct."""

from __future__ import annotations

import mmap
import threading
from collections.abc import Iterator

import numpy as np
import pytest
from gpulab.memory import MemoryManager
from gpulab.memory.host_import import HostImporter
from gpulab.memory.ring import (
    HUGE_PAGE,
    IN_FLIGHT,
    Copies,
    Copy,
    HostBlock,
    ImportedChunk,
    PinnedChunk,
)
from gpulab.vk import CommandPool, Device

CHUNK = 1 << 16


@pytest.fixture
def parts(device: Device) -> Iterator[tuple[MemoryManager, Copies]]:
    with MemoryManager(device) as manager, CommandPool(device) as pool:
        copies = Copies(pool)
        try:
            yield manager, copies
        finally:
            copies.close()


def pinned_chunk(manager: MemoryManager) -> PinnedChunk:
    allocation = manager.allocate(CHUNK, "readback")
    return PinnedChunk(allocation, allocation.view(np.uint8, CHUNK))


def test_copies_of_several_chunks_go_in_one_submission(
    parts: tuple[MemoryManager, Copies],
) -> None:
    manager, copies = parts
    chunks = [pinned_chunk(manager) for _ in range(3)]
    target = manager.allocate(3 * CHUNK, "device")
    data = np.random.default_rng(1).integers(0, 256, 3 * CHUNK, dtype=np.uint8)
    for number, chunk in enumerate(chunks):
        chunk.view[:] = data[number * CHUNK : (number + 1) * CHUNK]
    copies.submit(
        [
            Copy(chunk, chunk.allocation, target, CHUNK, 0, n * CHUNK)
            for n, chunk in enumerate(chunks)
        ]
    )
    assert copies.submitted == 1
    for chunk in chunks:
        copies.wait(chunk)
        assert chunk.copied_by is None
    # Back through the first chunk, a readback per third of the target.
    for number in range(3):
        copies.submit(
            [Copy(chunks[0], target, chunks[0].allocation, CHUNK, number * CHUNK, 0)],
            readback=True,
        )
        copies.wait(chunks[0])
        assert np.array_equal(chunks[0].view, data[number * CHUNK : (number + 1) * CHUNK])
    target.free()
    for chunk in chunks:
        chunk.release()


def test_submissions_are_reused_and_stale_waits_return(
    parts: tuple[MemoryManager, Copies],
) -> None:
    """More submissions than IN_FLIGHT, none waited for: the oldest are waited for and
    recorded again, and a chunk still pointing at an earlier recording finds it done."""
    manager, copies = parts
    chunks = [pinned_chunk(manager) for _ in range(IN_FLIGHT + 3)]
    target = manager.allocate(CHUNK, "device")
    for chunk in chunks:
        copies.submit([Copy(chunk, chunk.allocation, target, CHUNK, 0, 0)])
    assert len(copies.submissions) == IN_FLIGHT
    assert copies.submitted == IN_FLIGHT + 3
    first_submission, generation = chunks[0].copied_by  # type: ignore[misc]
    assert first_submission.generation > generation  # recorded again since
    waiters = [threading.Thread(target=copies.wait, args=(chunk,)) for chunk in chunks]
    for waiter in waiters:
        waiter.start()
    for waiter in waiters:
        waiter.join(timeout=30)
    assert not any(waiter.is_alive() for waiter in waiters)
    assert all(not submission.pending for submission in copies.submissions)
    target.free()
    for chunk in chunks:
        chunk.release()


def test_an_imported_ring_is_one_block_touched_then_imported(
    parts: tuple[MemoryManager, Copies], device: Device
) -> None:
    """Its chunks are slices of one host block, imported once after every page was touched;
    the block goes when its last chunk does."""
    manager, copies = parts
    importer = HostImporter(device)
    if not importer.usable:
        pytest.skip(f"{device.info.name} cannot import host memory")
    touched: list[int] = []

    def touch(view: np.ndarray) -> None:
        view[:: mmap.PAGESIZE] = 0
        touched.append(view.size)

    block = HostBlock(3 * CHUNK, importer, touch)
    assert touched == [3 * CHUNK] and block.setup_s > 0.0
    assert int(block.view.ctypes.data) % HUGE_PAGE == 0
    chunks = ImportedChunk.ring(block, 3, CHUNK)
    target = manager.allocate(3 * CHUNK, "readback")
    for number, chunk in enumerate(chunks):
        chunk.view[:] = number + 1
    batch = []
    for number, chunk in enumerate(chunks):
        source, offset = chunk.source
        batch.append(Copy(chunk, source, target, CHUNK, offset, number * CHUNK))
    copies.submit(batch)
    for chunk in chunks:
        copies.wait(chunk)
    landed = target.read(np.uint8, 3 * CHUNK).reshape(3, CHUNK)
    assert [set(row.tolist()) for row in landed] == [{1}, {2}, {3}]
    target.free()
    for chunk in chunks[:2]:
        chunk.release()
    assert block.users == 1 and block.view.size == 3 * CHUNK
    chunks[2].release()
    assert block.users == 0 and block.view.size == 0
