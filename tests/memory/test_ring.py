"""The staging ring's chunks and their submissions (gpulab.memory.ring) on a real device
(lavapipe here): copies batched into one submission land whole, a chunk waits for the
submission that last copied it, reused submissions and waiting threads stay correct."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import numpy as np
import pytest
from gpulab.memory import MemoryManager
from gpulab.memory.host_import import HostImporter
from gpulab.memory.ring import IN_FLIGHT, Copies, Copy, ImportedChunk, PinnedChunk
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


def test_an_imported_chunk_is_imported_once(
    parts: tuple[MemoryManager, Copies], device: Device
) -> None:
    manager, copies = parts
    importer = HostImporter(device)
    if not importer.usable:
        pytest.skip(f"{device.info.name} cannot import host memory")
    chunk = ImportedChunk.anonymous(CHUNK)
    target = manager.allocate(CHUNK, "readback")
    chunk.view[:] = 7
    chunk.import_pages(importer)
    imported = chunk.imported
    chunk.import_pages(importer)
    assert chunk.imported is imported and chunk.import_s > 0.0
    source, offset = chunk.source
    copies.submit([Copy(chunk, source, target, CHUNK, offset, 0)])
    copies.wait(chunk)
    assert np.all(target.read(np.uint8, CHUNK) == 7)
    target.free()
    chunk.release()
