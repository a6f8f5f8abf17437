"""A file's bytes into a device buffer, three ways, in one process (issue 50's .npy uploads).

    PYTHONPATH=payload/src python3 payload/benchmarks/npy_read_paths.py [LOG2_BYTES]

Writes 2^LOG2_BYTES (default 2^29, 512 MiB) random bytes to /tmp (then in the page cache) and
times: Stager.upload_file into "device" memory through the pinned staging ring (a new ring,
then kept); the file read on 4, 8 and 16 host threads (4, 8 and 16 MiB reads) straight into
a "device_mapped" buffer's mapping (mappable VRAM where the device has it: a resizable BAR),
checked once against the file; and the read into pinned host memory alone, the page cache's
own rate. Each against bytes / the copy engine's rate from pinned memory, measured first.
"""

from __future__ import annotations

import hashlib
import os
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
from gpulab.diagnostics.memory_bench import copy_engine_gbps
from gpulab.kernels.session import DeviceSession
from gpulab.memory.staging import _read_exactly

THREADS = (4, 8, 16)
CHUNKS_MIB = (4, 8, 16)


def read_into(file: int, target: np.ndarray, nbytes: int, threads: int, chunk: int) -> float:
    """Seconds to read the file's first `nbytes` into `target` on `threads` threads."""
    starts = range(0, nbytes, chunk)
    with ThreadPoolExecutor(threads) as pool:
        start = time.perf_counter()
        list(pool.map(lambda at: _read_exactly(file, target[at : at + chunk], at), starts))
        return time.perf_counter() - start


def main() -> None:
    nbytes = 1 << (int(sys.argv[1]) if len(sys.argv) > 1 else 29)
    path = f"/tmp/gpulab-read-paths-{nbytes}.bin"
    if not os.path.exists(path):
        np.random.default_rng(1).integers(0, 255, nbytes, dtype=np.uint8).tofile(path)
    digest = hashlib.md5(
        np.fromfile(path, dtype=np.uint8).tobytes()
    ).hexdigest()  # and in the page cache
    file = os.open(path, os.O_RDONLY)
    with DeviceSession(0) as session:
        manager, stager = session.manager, session.stager
        for t in manager.device.info.memory_types:
            heap = manager.device.info.memory_heaps[t.heap_index]
            print(f"type {t.index} {t.property_flags:#x} heap {t.heap_index} {heap.size >> 20} MiB")
        target = manager.allocate(nbytes, "device")
        rates = copy_engine_gbps(session, target, nbytes, 3)
        ideal_ms = nbytes / (rates["h2d_cached"] * 1e9) * 1e3
        print(f"copy engine {rates['h2d_cached']:.1f} GB/s: bytes / rate {ideal_ms:.2f} ms")
        for attempt in ("a new ring", "the ring kept", "the ring kept"):
            start = time.perf_counter()
            stager.upload_file(file, 0, nbytes, target)
            ms = (time.perf_counter() - start) * 1e3
            print(f"ring, {attempt}: {ms:.1f} ms = {ms / ideal_ms:.2f}x")
        print(f"  (allocating the ring: {stager.staging_alloc_s * 1e3:.1f} ms)")
        target.free()
        for threads in THREADS:
            for chunk_mib in CHUNKS_MIB:
                start = time.perf_counter()
                mapped = manager.allocate(nbytes, "device_mapped")
                alloc_ms = (time.perf_counter() - start) * 1e3
                view = mapped.view(np.uint8, nbytes)
                ms = read_into(file, view, nbytes, threads, chunk_mib << 20) * 1e3
                check = ""
                if (threads, chunk_mib) == (THREADS[-1], 8):
                    back = stager.download(mapped, nbytes // 4).view(np.uint8)
                    check = f", same bytes: {hashlib.md5(back.tobytes()).hexdigest() == digest}"
                del view
                flags = mapped.memory_type.property_flags
                mapped.free()
                print(
                    f"into device_mapped (type flags {flags:#x}, allocated in {alloc_ms:.1f} ms), "
                    f"{threads:2d} threads, {chunk_mib:2d} MiB reads: {ms:.1f} ms = "
                    f"{ms / ideal_ms:.2f}x ({nbytes / ms / 1e6:.1f} GB/s){check}"
                )
        host = manager.allocate(nbytes, "readback")
        view = host.view(np.uint8, nbytes)
        ms = read_into(file, view, nbytes, THREADS[-1], 8 << 20) * 1e3
        del view
        host.free()
        rate = nbytes / ms / 1e6
        print(f"into pinned host memory, {THREADS[-1]} threads: {ms:.1f} ms ({rate:.1f} GB/s)")
    os.close(file)


if __name__ == "__main__":
    main()
