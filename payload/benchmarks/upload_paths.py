"""A .npy file's ways into device memory, timed in one process (issue 50's upload target).

    PYTHONPATH=payload/src python3 payload/benchmarks/upload_paths.py alloc seq16|par16|one128
    PYTHONPATH=payload/src python3 payload/benchmarks/upload_paths.py upload [MIB]

`alloc` (run each mode in a new process, as a run pays it): 128 MiB of the readback memory
type (pinned, HOST_CACHED) as 16 allocations of 8 MiB in turn, the same on 16 threads at
once, or one allocation, and the ms each took (NVIDIA's driver pins host memory as it
allocates it).

`upload` writes MIB (default 512) MiB of float32 to /dev/shm (the page cache, as a file read
a second time is) and uploads it with Stager.upload_file: straight into mappable VRAM (kind
device_mapped) on 16, 8 and 12 host threads and as two halves in turn; through a staging
ring that is kept between uploads, for several thread counts, chunk sizes and ring lengths
(gpulab.memory.file_regions' FILE_CHUNK and FILE_RING_CHUNKS, set here), with the median µs
of each submission (chunks filled together share one); and both at once (a share straight
into VRAM on some threads, the rest through the ring on others). Each line is the median of
three uploads of the warmed-up path and its ratio to bytes / the copy engine's rate from
pinned memory (measured first). The target buffers are reused, so first writes into new
mappings are not in these figures (a run's are: compare its upload_ms).
"""

from __future__ import annotations

import os
import statistics
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
from gpulab.diagnostics.memory_bench import copy_engine_gbps
from gpulab.kernels.session import DeviceSession
from gpulab.memory import file_regions, ring, staging
from gpulab.memory.memory_types import candidate_types
from gpulab.vk import DeviceMemory

PATH = "/dev/shm/gpulab-upload-paths.bin"
RINGS = ((16, 8, 10), (16, 8, 18), (16, 4, 18), (16, 16, 18), (12, 8, 14), (8, 8, 10))
"""(threads, chunk MiB, ring chunks) of the ring runs."""
SPLITS = ((0.5, 8, 8), (0.4, 6, 10), (0.6, 10, 6))
"""(share straight into VRAM, its threads, the ring's threads) of the runs of both at once."""


def pin(mode: str) -> None:
    with DeviceSession(0) as session:
        device = session.device
        memory_type = candidate_types(device.info.memory_types, "readback", 0xFFFFFFFF)[0]

        def one(size: int) -> DeviceMemory:
            return DeviceMemory(
                device, size, 1 << memory_type.index, required=memory_type.property_flags
            )

        start = time.perf_counter()
        if mode == "seq16":
            memories = [one(8 << 20) for _ in range(16)]
        elif mode == "par16":
            with ThreadPoolExecutor(16) as pool:
                memories = list(pool.map(lambda _: one(8 << 20), range(16)))
        else:
            memories = [one(128 << 20)]
        ms = (time.perf_counter() - start) * 1e3
        print(f"alloc {mode}: 128 MiB pinned in {ms:.1f} ms ({ms / 128:.3f} ms/MiB)")
        for memory in memories:
            memory.close()


def median_ms(step: Callable[[], object]) -> float:
    times = []
    for _ in range(3):
        start = time.perf_counter()
        step()
        times.append((time.perf_counter() - start) * 1e3)
    return statistics.median(times)


class Bench:
    """One session's targets and file, and the line printer (ratio to bytes / rate)."""

    def __init__(self, session: DeviceSession, file: int, nbytes: int) -> None:
        self.session, self.file, self.nbytes = session, file, nbytes
        self.plain = session.manager.allocate(nbytes, "device", label="plain VRAM")
        self.mapped = session.manager.allocate(nbytes, "device_mapped", label="mappable VRAM")
        rate = copy_engine_gbps(session, self.plain, nbytes, 3)["h2d_cached"]
        self.floor = nbytes / (rate * 1e9) * 1e3
        print(f"{nbytes >> 20} MiB, copy engine {rate:.1f} GB/s: bytes / rate {self.floor:.2f} ms")
        plain, mapped = self.plain.host_visible, self.mapped.host_visible
        print(f"mappable: plain VRAM {plain}, device_mapped {mapped}")

    def line(self, label: str, ms: float) -> None:
        print(f"{label}: {ms:.1f} ms = {ms / self.floor:.2f}x", flush=True)

    def straight(self) -> None:
        file, nbytes, mapped, half = self.file, self.nbytes, self.mapped, self.nbytes // 2
        for threads in (16, 8, 12):
            with self.session.open_stager(threads=threads) as stager:
                stager.upload_file(file, 0, nbytes, mapped)
                ms = median_ms(lambda s=stager: s.upload_file(file, 0, nbytes, mapped))
                self.line(f"straight, {threads} threads", ms)
                if threads == 16:

                    def halves(s: staging.Stager = stager) -> None:
                        s.upload_file(file, 0, half, mapped)
                        s.upload_file(file, half, half, mapped)

                    self.line("straight, 16 threads, two halves in turn", median_ms(halves))

    def rings(self, submitted: dict[str, float]) -> None:
        file, nbytes, plain = self.file, self.nbytes, self.plain
        for threads, chunk, slots in RINGS:
            file_regions.FILE_CHUNK, file_regions.FILE_RING_CHUNKS = chunk << 20, slots
            chunk_bytes = max(chunk << 20, staging.CHUNK_BYTES)
            with self.session.open_stager(
                threads=threads, slots=slots, chunk_bytes=chunk_bytes
            ) as stager:
                stager.upload_file(file, 0, nbytes, plain)  # the ring, allocated
                submitted.update(count=0, seconds=0.0)
                ms = median_ms(lambda s=stager: s.upload_file(file, 0, nbytes, plain))
                each = submitted["seconds"] / max(submitted["count"], 1) * 1e6
                self.line(
                    f"ring kept, {threads} threads, {chunk} MiB chunks, ring of {slots} "
                    f"(submission {each:.0f} us each)",
                    ms,
                )

    def both(self, share: float, straight_threads: int, ring_threads: int) -> None:
        file, nbytes = self.file, self.nbytes
        file_regions.FILE_CHUNK = 8 << 20
        file_regions.FILE_RING_CHUNKS = ring_threads + 2
        cut = int(nbytes * share) // (8 << 20) * (8 << 20)
        with (
            self.session.open_stager(threads=straight_threads) as straight,
            self.session.open_stager(threads=ring_threads, slots=ring_threads + 2) as ringed,
        ):
            ringed.upload_file(file, cut, nbytes - cut, self.plain)

            def together() -> None:
                other = threading.Thread(
                    target=straight.upload_file, args=(file, 0, cut, self.mapped)
                )
                other.start()
                ringed.upload_file(file, cut, nbytes - cut, self.plain)
                other.join()

            self.line(
                f"both: {share:.0%} straight on {straight_threads} threads, the rest "
                f"through the ring on {ring_threads}",
                median_ms(together),
            )


def upload(mib: int) -> None:
    nbytes = mib << 20
    np.random.default_rng(0).random(nbytes // 4, dtype=np.float32).tofile(PATH)
    file = os.open(PATH, os.O_RDONLY)
    submitted = {"count": 0.0, "seconds": 0.0}
    submit = ring.Copies.submit

    def timed_submit(copies: ring.Copies, *args: Any, **kwargs: Any) -> None:
        start = time.perf_counter()
        submit(copies, *args, **kwargs)
        submitted["seconds"] += time.perf_counter() - start
        submitted["count"] += 1

    ring.Copies.submit = timed_submit  # type: ignore[method-assign]
    try:
        with DeviceSession(0) as session:
            bench = Bench(session, file, nbytes)
            bench.straight()
            bench.rings(submitted)
            for split in SPLITS:
                bench.both(*split)
    finally:
        ring.Copies.submit = submit  # type: ignore[method-assign]
        os.close(file)
        os.unlink(PATH)


if __name__ == "__main__":
    if sys.argv[1:2] == ["alloc"]:
        pin(sys.argv[2])
    else:
        upload(int(sys.argv[2]) if len(sys.argv) > 2 else 512)
