"""Stager.upload_file's ring settings against the copy engine (issue 50's .npy uploads).

    PYTHONPATH=payload/src python3 payload/benchmarks/npy_upload_sweep.py [MIB]

Writes MIB (default 512) MiB of float32 to /dev/shm (the page cache, as a file read a second
time is), then for each host-thread count, chunk size and ring length (gpulab.memory.file_regions'
FILE_CHUNK and FILE_RING_CHUNKS, set here for the measurement) uploads it into a device buffer
three times with a new Stager (its ring allocated in the upload; but from the memory manager's
blocks that earlier rings freed, so without the pinning a new process pays: 2-3.6 ms per 8 MiB
on the H100, docs/benchmarks.md) and again with the ring kept, and prints the median ms of
each against bytes / the copy engine's rate from pinned memory, measured first (1.0: the file
moved at the copy engine's rate). On a device whose buffer is host-visible (lavapipe) the file
is read straight into it instead.
"""

from __future__ import annotations

import itertools
import os
import statistics
import sys
import time

import numpy as np
from gpulab.diagnostics.memory_bench import copy_engine_gbps
from gpulab.kernels.session import DeviceSession
from gpulab.memory import file_regions, staging

SETTINGS = itertools.product((4, 8, 16), (2, 4, 8, 16), (6, 10, 16))
"""(threads, chunk MiB, ring chunks)."""


def main() -> None:
    mib = int(sys.argv[1]) if len(sys.argv) > 1 else 512
    path = "/dev/shm/gpulab-npy-upload-sweep.bin"
    np.random.default_rng(0).random(mib << 18, dtype=np.float32).tofile(path)
    nbytes = mib << 20
    try:
        with DeviceSession(0) as session:
            target = session.manager.allocate(nbytes, "device", label="sweep target")
            rate = copy_engine_gbps(session, target, nbytes, 3)["h2d_cached"]
            floor = nbytes / (rate * 1e9) * 1e3
            print(f"{mib} MiB, copy engine {rate:.1f} GB/s: bytes/rate {floor:.2f} ms")
            for threads, chunk, ring in SETTINGS:
                file_regions.FILE_CHUNK, file_regions.FILE_RING_CHUNKS = chunk << 20, ring
                cold: list[float] = []
                kept: list[float] = []
                allocs: list[float] = []
                for _ in range(3):
                    stager = session.open_stager(
                        threads=threads, chunk_bytes=max(chunk << 20, staging.CHUNK_BYTES)
                    )
                    file = os.open(path, os.O_RDONLY)
                    try:
                        for times in (cold, kept):
                            start = time.perf_counter()
                            stager.upload_file(file, 0, nbytes, target)
                            times.append((time.perf_counter() - start) * 1e3)
                        allocs.append(stager.staging_alloc_s * 1e3)
                    finally:
                        os.close(file)
                        stager.close()
                first, again = statistics.median(cold), statistics.median(kept)
                print(
                    f"threads {threads:2d} chunk {chunk:2d} MiB ring {ring:2d}: new ring "
                    f"{first:6.1f} ms (alloc {statistics.median(allocs):5.1f}) = "
                    f"{first / floor:4.2f}x, ring kept {again:6.1f} ms = {again / floor:4.2f}x",
                    flush=True,
                )
            target.free()
    finally:
        os.unlink(path)


if __name__ == "__main__":
    main()
