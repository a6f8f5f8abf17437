"""What limits a .npy upload on this host: the page cache's read, or the memory itself?

    python3 payload/benchmarks/host_read_rates.py [LOG2_BYTES] [--device]

Writes 2^LOG2_BYTES (default 2^29, 512 MiB) random bytes to /tmp (then in the page cache) and
times, on 1, 4, 8 and 16 threads (8 MiB pieces, into memory already faulted in): `pread` (the
file read by os.preadv, as Stager.upload_file reads), `mmap` (each piece mapped with
MAP_POPULATE, the mapping and its page faults counted, then copied by numpy, which lets the
GIL go), `mmap_copy` (the copy alone, out of a mapping of the whole file populated before) and
`memcpy` (one array of ordinary memory into another: the host's own copy rate). GB/s, best of
three. With --device (gpulab importable, a Vulkan device), the same reads on 16 threads into
the device's pinned host memory and its mappable VRAM (Stager.upload_file's two targets).
"""

from __future__ import annotations

import contextlib
import mmap
import os
import sys
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import numpy.typing as npt

PIECE = 8 << 20
THREADS = (1, 4, 8, 16)
Bytes = npt.NDArray[np.uint8]


def timed(threads: int, nbytes: int, step: Callable[[int], object]) -> float:
    """GB/s of step(at) over every piece of `nbytes`, on `threads` threads, best of three."""
    best = float("inf")
    with ThreadPoolExecutor(threads) as pool:
        for _ in range(3):
            start = time.perf_counter()
            list(pool.map(step, range(0, nbytes, PIECE)))
            best = min(best, time.perf_counter() - start)
    return nbytes / best / 1e9


def reads(file: int, target: Bytes, threads: int) -> dict[str, float]:
    """The file into `target` by pread, by mapped pieces and out of a populated mapping."""
    nbytes = target.size

    def pread(at: int) -> int:
        return os.preadv(file, [target[at : at + PIECE].data], at)

    def mapped(at: int) -> None:
        flags = mmap.MAP_SHARED | mmap.MAP_POPULATE
        with mmap.mmap(file, PIECE, flags=flags, prot=mmap.PROT_READ, offset=at) as piece:
            view = np.frombuffer(piece, dtype=np.uint8)
            np.copyto(target[at : at + PIECE], view)
            del view  # before the mapping closes

    found = {"pread": timed(threads, nbytes, pread), "mmap": timed(threads, nbytes, mapped)}
    # Unmapped when the last view of it goes, with this call's locals.
    populated = mmap.mmap(file, 0, flags=mmap.MAP_SHARED | mmap.MAP_POPULATE, prot=mmap.PROT_READ)
    whole = np.frombuffer(populated, dtype=np.uint8)

    def mmap_copy(at: int) -> None:
        np.copyto(target[at : at + PIECE], whole[at : at + PIECE])

    found["mmap_copy"] = timed(threads, nbytes, mmap_copy)
    return found


def memcpy_rate(source: Bytes, target: Bytes, threads: int) -> float:
    def memcpy(at: int) -> None:
        np.copyto(target[at : at + PIECE], source[at : at + PIECE])

    return timed(threads, source.size, memcpy)


@contextlib.contextmanager
def device_targets(nbytes: int) -> Iterator[dict[str, Bytes]]:
    """Views of the device's pinned host memory and mappable VRAM, `nbytes` each."""
    from gpulab.kernels.session import DeviceSession  # noqa: PLC0415

    with DeviceSession(0) as session:
        pinned = session.manager.allocate(nbytes, "readback")
        vram = session.manager.allocate(nbytes, "device_mapped")
        try:
            yield {"pinned": pinned.view(np.uint8, nbytes), "vram": vram.view(np.uint8, nbytes)}
        finally:
            pinned.free()
            vram.free()


def show(what: str, threads: int, found: dict[str, float]) -> None:
    shown = "  ".join(f"{name} {gbps:6.1f}" for name, gbps in found.items())
    print(f"{what}, {threads:2d} threads, GB/s:  {shown}", flush=True)


def main() -> None:
    args = [a for a in sys.argv[1:] if a != "--device"]
    nbytes = 1 << (int(args[0]) if args else 29)
    path = f"/tmp/gpulab-read-rates-{os.getpid()}.bin"
    source = np.random.default_rng(0).integers(0, 256, nbytes, dtype=np.uint8)
    source.tofile(path)
    target = np.ones(nbytes, dtype=np.uint8)  # faulted in
    file = os.open(path, os.O_RDONLY)
    try:
        for threads in THREADS:
            found = reads(file, target, threads) | {"memcpy": memcpy_rate(source, target, threads)}
            show(f"{nbytes >> 20} MiB into memory", threads, found)
        if not np.array_equal(target, source):
            sys.exit("the last read differs from the file")
        if "--device" in sys.argv:
            with device_targets(nbytes) as targets:
                for name, view in targets.items():
                    show(f"{nbytes >> 20} MiB into {name}", 16, reads(file, view, 16))
                    if not np.array_equal(view, source):
                        sys.exit(f"the last read into {name} differs from the file")
    finally:
        os.close(file)
        os.unlink(path)


if __name__ == "__main__":
    main()
