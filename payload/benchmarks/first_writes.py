"""First writes into a new mapping: what a run's straight .npy upload pays that a reused
buffer does not (issue 50: a run's upload_ms at 2^26 was 29.2 ms on the H100, the same read
into a buffer written before 17.9 ms).

    PYTHONPATH=payload/src python3 payload/benchmarks/first_writes.py [MIB]

Writes MIB (default 512) MiB of float32 to /dev/shm, then three times: Stager.upload_file into
a new `device_mapped` buffer (first writes) and into the same buffer again; a new buffer
whose pages are touched first (one byte per 4 KiB page, on 16 threads) and the upload into it;
and a new buffer cleared whole on 16 threads. Prints the ms of each.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import numpy as np
from gpulab.kernels.session import DeviceSession

PATH = "/dev/shm/gpulab-first-writes.bin"
THREADS = 16
PAGE = 4096


def ms(step: Callable[[], object]) -> float:
    start = time.perf_counter()
    step()
    return (time.perf_counter() - start) * 1e3


def main() -> None:
    nbytes = (int(sys.argv[1]) if len(sys.argv) > 1 else 512) << 20
    np.random.default_rng(0).random(nbytes // 4, dtype=np.float32).tofile(PATH)
    file = os.open(PATH, os.O_RDONLY)
    step = nbytes // THREADS
    try:
        with (
            DeviceSession(0) as session,
            ThreadPoolExecutor(THREADS) as pool,
            session.open_stager(threads=THREADS) as stager,
        ):
            manager = session.manager

            def upload(target: object) -> float:
                return ms(lambda: stager.upload_file(file, 0, nbytes, target))  # type: ignore[arg-type]

            for trial in range(3):
                fresh = manager.allocate(nbytes, "device_mapped", label="fresh")
                first, again = upload(fresh), upload(fresh)
                fresh.free()
                manager.trim()  # its block goes back: the next buffer is new memory
                touched = manager.allocate(nbytes, "device_mapped", label="touched")
                view = touched.view(np.uint8, nbytes)

                def touch(i: int, view: np.ndarray = view) -> None:
                    view[i * step : (i + 1) * step : PAGE] = 0

                touch_ms = ms(lambda: list(pool.map(touch, range(THREADS))))
                after_touch = upload(touched)
                del view
                touched.free()
                manager.trim()
                cleared = manager.allocate(nbytes, "device_mapped", label="cleared")
                whole = cleared.view(np.uint8, nbytes)

                def clear(i: int, whole: np.ndarray = whole) -> None:
                    whole[i * step : (i + 1) * step] = 0

                clear_ms = ms(lambda: list(pool.map(clear, range(THREADS))))
                del whole
                cleared.free()
                manager.trim()
                print(
                    f"trial {trial}: new buffer {first:.1f} ms, again {again:.1f} ms; pages "
                    f"touched on {THREADS} threads {touch_ms:.1f} ms, then the upload "
                    f"{after_touch:.1f} ms; cleared whole on {THREADS} threads {clear_ms:.1f} ms",
                    flush=True,
                )
    finally:
        os.close(file)
        os.unlink(PATH)


if __name__ == "__main__":
    main()
