"""The .npy staging ring taken apart (issue 50's upload target): what a ring costs to set up
in a new process, and where a kept ring's 512 MiB upload spends its time.

    PYTHONPATH=payload/src python3 payload/benchmarks/ring_probe.py setup MODE MIB
    PYTHONPATH=payload/src python3 payload/benchmarks/ring_probe.py timeline [MIB]
    PYTHONPATH=payload/src python3 payload/benchmarks/ring_probe.py cold KIND RING [MIB [CHUNK]]
    PYTHONPATH=payload/src python3 payload/benchmarks/ring_probe.py colddown KIND [MIB]

`setup` (each MODE in a new process, as a run pays it): MIB of staging memory as the Stager's
pinned readback memory (one allocation); or as anonymous host memory whose pages are
touched on 16 threads and then imported with VK_EXT_external_memory_host ("imported"), the
same in transparent huge pages ("huge", 2 MiB-aligned, MADV_HUGEPAGE), or imported untouched
("lazy": the driver faults them in); the ms of each step, then the copy
engine's rate from that memory into VRAM (GPU timestamps, best of four).

`timeline` writes MIB (default 512) MiB to /dev/shm and uploads it into plain VRAM through
a kept ring (Stager.upload_file), with every read, submission and slot wait timed: the
upload's ms, then per chunk the read's ms and GB/s, the submission's us, the time a slot
waited for its previous copy, and how long the submitting thread waited for the next chunk.
Then the same with the reads taken out (the chunks' bytes already in the ring): what the
submissions and copies alone cost. Rings of pinned memory (the readback ring) and of
imported host memory (Stager(readback_memory="imported")).

`cold` (each in a new process): the first upload of MIB (default 512) through a file ring
(KIND pinned or imported) of RING chunks of CHUNK MiB (default 8), its setup included as in
a run's upload_ms, then a second through the kept ring. `colddown` (each in a new process):
the same for a staged download of MIB MiB from plain VRAM through a readback ring of KIND
memory, as `gpulab run --full` reads large results.
"""

from __future__ import annotations

import itertools
import mmap
import os
import statistics
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
from gpulab.diagnostics.memory_bench import copy_engine_gbps
from gpulab.kernels.session import DeviceSession
from gpulab.memory import file_regions, ring, staging
from gpulab.memory.host_import import HostImporter
from gpulab.vk import TimestampQueryPool

PATH = "/dev/shm/gpulab-ring-probe.bin"
THREADS = 16
PAGE = 4096
HUGE = 2 << 20
RINGS = (
    (16, 8, 10, "pinned"),
    (16, 8, 18, "pinned"),
    (16, 8, 18, "imported"),
    (16, 4, 18, "imported"),
    (16, 16, 10, "imported"),
)
"""(threads, chunk MiB, ring chunks, file ring) of the timelines."""


def ms_since(start: float) -> float:
    return (time.perf_counter() - start) * 1e3


def touch(array: np.ndarray, i: int, step: int) -> None:
    """Write a byte of each page of the i-th `step` bytes of `array`."""
    array[i * step : (i + 1) * step : PAGE] = 0


def engine_rate(session: DeviceSession, source: Any, nbytes: int) -> float:
    """GB/s of vkCmdCopyBuffer from `source` (a Buffer) into VRAM, best of four."""
    target = session.manager.allocate(nbytes, "device", label="probe target")
    best = float("inf")
    with TimestampQueryPool(session.device, 2) as queries:
        commands = session.submitter.allocate()
        commands.begin()
        commands.reset_queries(queries)
        commands.write_timestamp(queries, 0)
        commands.copy_buffer(source, target.buffer, nbytes, 0, 0)
        commands.write_timestamp(queries, 1)
        commands.end()
        for _ in range(4):
            session.submitter.submit(commands)
            best = min(best, queries.elapsed_ns(0, 1) * 1e-9)
        commands.close()
    target.free()
    return nbytes / best / 1e9


def setup(mode: str, mib: int) -> None:
    nbytes = mib << 20
    with DeviceSession(0) as session:
        if mode == "pinned":
            start = time.perf_counter()
            allocation = session.manager.allocate(nbytes, "readback", label="probe ring")
            allocation.view(np.uint8, nbytes)
            print(f"setup pinned {mib} MiB: allocated and mapped {ms_since(start):.1f} ms")
            print(f"  engine from it: {engine_rate(session, allocation.buffer, nbytes):.1f} GB/s")
            allocation.free()
            return
        start = time.perf_counter()
        importer = HostImporter(session.device)
        made = ms_since(start)
        start = time.perf_counter()
        memory = mmap.mmap(-1, nbytes + HUGE, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
        whole = np.frombuffer(memory, dtype=np.uint8)
        skip = -int(whole.ctypes.data) % HUGE
        array = whole[skip : skip + nbytes]
        if mode == "huge":
            memory.madvise(mmap.MADV_HUGEPAGE)
        mapped = ms_since(start)
        start = time.perf_counter()
        if mode in ("imported", "huge"):
            step = nbytes // THREADS

            with ThreadPoolExecutor(THREADS) as pool:
                list(pool.map(touch, [array] * THREADS, range(THREADS), [step] * THREADS))
        touched = ms_since(start)
        start = time.perf_counter()
        imported = importer.import_array(array)
        pinned = ms_since(start)
        print(
            f"setup {mode} {mib} MiB: importer {made:.1f} ms, mmap {mapped:.2f} ms, pages "
            f"touched on {THREADS} threads {touched:.1f} ms, import {pinned:.1f} ms; total "
            f"{made + mapped + touched + pinned:.1f} ms"
        )
        print(f"  engine from it: {engine_rate(session, imported.buffer, nbytes):.1f} GB/s")
        imported.close()
        del array, whole
        memory.close()


class Timeline:
    """Timed reads, submissions and slot waits of the Stager, patched in for one upload."""

    def __init__(self) -> None:
        self.events: dict[str, list[tuple[float, float, int]]] = {}
        self.lock = threading.Lock()
        self.skip_reads = False
        self._read = file_regions.read_exactly
        self._submit = ring.Copies.submit
        self._wait = ring.Copies.wait

    def note(self, kind: str, start: float, nbytes: int = 0) -> None:
        with self.lock:
            self.events.setdefault(kind, []).append((start, time.perf_counter(), nbytes))

    def install(self) -> None:
        timeline = self

        def read(file: int, target: np.ndarray, position: int) -> None:
            start = time.perf_counter()
            if not timeline.skip_reads:
                timeline._read(file, target, position)
            timeline.note("read", start, target.size)

        def submit(copies: ring.Copies, batch: list[ring.Copy], **kwargs: Any) -> None:
            start = time.perf_counter()
            timeline._submit(copies, batch, **kwargs)
            timeline.note("submit", start, len(batch))

        def wait(chunk: Any) -> None:
            start = time.perf_counter()
            timeline._wait(chunk)
            timeline.note("slot wait", start)

        file_regions.read_exactly = read  # type: ignore[assignment]
        ring.Copies.submit = submit  # type: ignore[method-assign]
        ring.Copies.wait = staticmethod(wait)  # type: ignore[method-assign]

    def remove(self) -> None:
        file_regions.read_exactly = self._read  # type: ignore[assignment]
        ring.Copies.submit = self._submit  # type: ignore[method-assign]
        ring.Copies.wait = staticmethod(self._wait)  # type: ignore[method-assign]

    def report(self, label: str, total_ms: float, floor_ms: float) -> None:
        reads = self.events.get("read", [])
        submits = self.events.get("submit", [])
        if not reads or not submits:
            print(f"{label}: {total_ms:.1f} ms, not through the ring (the target is mappable)")
            return
        waits = [end - start for start, end, _ in self.events.get("slot wait", [])]
        read_s = [end - start for start, end, _ in reads]
        read_rate = [n / (end - start) / 1e9 for start, end, n in reads if end > start]
        submit_s = [end - start for start, end, _ in submits]
        gaps = [b[0] - a[1] for a, b in itertools.pairwise(submits)] or [0.0]
        first_submit = submits[0][0] - min(start for start, _, _ in reads)
        print(
            f"{label}: {total_ms:.1f} ms = {total_ms / floor_ms:.2f}x; {len(reads)} chunks in "
            f"{len(submits)} submissions; "
            f"read {statistics.median(read_s) * 1e3:.2f} ms median "
            f"({statistics.median(read_rate):.1f} GB/s per thread, max "
            f"{max(read_s) * 1e3:.2f} ms); submit {statistics.median(submit_s) * 1e6:.0f} us "
            f"median (sum {sum(submit_s) * 1e3:.1f} ms); between submits "
            f"{statistics.median(gaps) * 1e6:.0f} us median, max {max(gaps) * 1e3:.2f} ms; "
            f"first submit {first_submit * 1e3:.2f} ms after the first read began; slot waits "
            f"over 50 us {sum(w > 5e-5 for w in waits)} (sum {sum(waits) * 1e3:.1f} ms)",
            flush=True,
        )


def timeline(mib: int) -> None:
    nbytes = mib << 20
    np.random.default_rng(0).random(nbytes // 4, dtype=np.float32).tofile(PATH)
    file = os.open(PATH, os.O_RDONLY)
    probe = Timeline()
    probe.install()
    try:
        with DeviceSession(0) as session:
            plain = session.manager.allocate(nbytes, "device", label="plain VRAM")
            rate = copy_engine_gbps(session, plain, nbytes, 3)["h2d_cached"]
            floor = nbytes / (rate * 1e9) * 1e3
            print(f"{mib} MiB, copy engine {rate:.1f} GB/s: bytes / rate {floor:.2f} ms")
            for threads, chunk, slots, kind in RINGS:
                file_regions.FILE_CHUNK = chunk << 20
                file_regions.FILE_RING_CHUNKS = file_regions.IMPORTED_RING_CHUNKS = slots
                with session.open_stager(
                    threads=threads,
                    slots=slots,
                    chunk_bytes=max(chunk << 20, staging.CHUNK_BYTES),
                    readback_memory=kind,
                ) as stager:
                    stager.upload_file(file, 0, nbytes, plain)  # the ring, allocated
                    for skip in (False, True, False):
                        probe.skip_reads = skip
                        probe.events.clear()
                        start = time.perf_counter()
                        stager.upload_file(file, 0, nbytes, plain)
                        what = "no reads" if skip else "with reads"
                        probe.report(
                            f"{kind} ring kept, {threads} threads, {chunk} MiB x {slots}, {what}",
                            ms_since(start),
                            floor,
                        )
    finally:
        probe.remove()
        os.close(file)
        os.unlink(PATH)


def print_first_and_again(
    what: str, times: tuple[float, float], stats: dict[str, Any], nbytes: int, rate: float
) -> None:
    """One line: the first transfer's ms and the ring it made, the second's (`times`), each
    against bytes / the copy engine's `rate` (GB/s)."""
    floor = nbytes / (rate * 1e9) * 1e3
    first, again = times
    alloc_ms, import_ms = stats["staging_alloc_ms"], stats["staging_import_ms"]
    print(
        f"{what} {first:.1f} ms = {first / floor:.2f}x (ring: allocation {alloc_ms:.1f} ms, "
        f"imports {import_ms:.1f} ms, {stats['staging_bytes'] >> 20} MiB), again {again:.1f} "
        f"ms = {again / floor:.2f}x; copy engine {rate:.1f} GB/s",
        flush=True,
    )


def cold(kind: str, slots: int, mib: int, chunk_mib: int) -> None:
    """A new process's first upload through a `kind` file ring of `slots` chunks of
    `chunk_mib` MiB (its setup included, as a run's upload_ms has it), then a second through
    the kept ring."""
    nbytes = mib << 20
    np.random.default_rng(0).random(nbytes // 4, dtype=np.float32).tofile(PATH)
    file = os.open(PATH, os.O_RDONLY)
    file_regions.FILE_RING_CHUNKS = file_regions.IMPORTED_RING_CHUNKS = slots
    file_regions.FILE_CHUNK = chunk_mib << 20
    try:
        with DeviceSession(0) as session:
            plain = session.manager.allocate(nbytes, "device", label="plain VRAM")
            with session.open_stager(readback_memory=kind) as stager:
                start = time.perf_counter()
                stager.upload_file(file, 0, nbytes, plain)
                first = ms_since(start)
                start = time.perf_counter()
                stager.upload_file(file, 0, nbytes, plain)
                again = ms_since(start)
                stats = stager.stats()
            rate = copy_engine_gbps(session, plain, nbytes, 3)["h2d_cached"]
            what = f"cold {kind} ring of {slots} x {chunk_mib} MiB, {mib} MiB: first upload"
            print_first_and_again(what, (first, again), stats, nbytes, rate)
    finally:
        os.close(file)
        os.unlink(PATH)


def cold_download(kind: str, mib: int) -> None:
    """A new process's first staged download of MIB MiB from plain VRAM through a readback
    ring of `kind` memory (its setup included, as `gpulab run --full` pays it), then a
    second; the bytes checked."""
    nbytes = mib << 20
    data = np.random.default_rng(0).integers(0, 256, nbytes, dtype=np.uint8)
    with DeviceSession(0) as session:
        plain = session.manager.allocate(nbytes, "device", label="plain VRAM")
        with session.open_stager(upload_memory="write_combined") as loader:
            loader.upload(data, plain)
        with session.open_stager(readback_memory=kind) as stager:
            start = time.perf_counter()
            back = stager.download(plain, nbytes, np.uint8)
            first = ms_since(start)
            start = time.perf_counter()
            stager.download(plain, nbytes, np.uint8, out=back)
            again = ms_since(start)
            stats = stager.stats()
        assert np.array_equal(back, data), "the download differs from the upload"
        rate = copy_engine_gbps(session, plain, nbytes, 3)["d2h"]
        what = f"cold download, {kind} readback ring, {mib} MiB: first"
        print_first_and_again(what, (first, again), stats, nbytes, rate)


if __name__ == "__main__":
    if sys.argv[1:2] == ["colddown"]:
        cold_download(sys.argv[2], int(sys.argv[3]) if len(sys.argv) > 3 else 512)
    elif sys.argv[1:2] == ["setup"]:
        setup(sys.argv[2], int(sys.argv[3]))
    elif sys.argv[1:2] == ["cold"]:
        sizes = [int(arg) for arg in sys.argv[4:6]]
        cold(sys.argv[2], int(sys.argv[3]), *(sizes + [512, 8][len(sizes) :]))
    else:
        timeline(int(sys.argv[2]) if len(sys.argv) > 2 else 512)
