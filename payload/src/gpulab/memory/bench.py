"""Memory benchmarks: pooled allocation against raw vkAllocateMemory, and transfer rates
against the copy engine measured in the same run.

    python -m gpulab.memory.bench [--device N] [--sizes 64M 1G] [--sweep] [--json OUT]

- alloc: microseconds per allocate+free of a buffer, four ways: raw vkAllocateMemory +
  vkFreeMemory; the same plus a VkBuffer bound to it (what a buffer costs without this
  layer); MemoryManager (suballocated, a new VkBuffer each time); BufferPool (a cache hit).
- copy engine: vkCmdCopyBuffer host-visible -> device-local ("h2d") and device-local ->
  HOST_CACHED ("d2h"), timed on the GPU with timestamps, in chunks of up to 256 MiB recorded
  into one command buffer.
- upload / readback: Stager.upload of a numpy array into a device buffer, and
  Stager.download into a preallocated array, timed end to end on the host (best of
  `--repeat` after a warm-up), for the "device" kind and, where the device has
  device-local host-visible memory, for "device_mapped".
GB/s are 10^9 bytes moved one way per second. A benchmark, not a test: it asserts only that
the bytes arrived.
"""

from __future__ import annotations

import argparse
import functools
import json
import sys
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from gpulab.memory.manager import MemoryManager
from gpulab.memory.memory_types import candidate_types
from gpulab.memory.pool import BufferPool
from gpulab.memory.staging import Stager
from gpulab.vk import (
    Buffer,
    CommandPool,
    Device,
    DeviceMemory,
    Fence,
    TimestampQueryPool,
    shared_instance,
)
from gpulab.vk.buffer import STORAGE, TRANSFER_DST, TRANSFER_SRC
from gpulab.vk.memory import DEVICE_LOCAL, HOST_VISIBLE

MIB = 1 << 20
COPY_CHUNK = 256 * MIB
USAGE = STORAGE | TRANSFER_SRC | TRANSFER_DST


def parse_size(text: str) -> int:
    """'64M', '1G', '4096' -> bytes."""
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    suffix = text[-1:].upper()
    if suffix in units:
        return int(text[:-1]) * units[suffix]
    return int(text)


def best_s(run: Callable[[], object], repeat: int) -> float:
    run()  # warm-up: first touches, lazy rings, path measurement
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        run()
        best = min(best, time.perf_counter() - start)
    return best


def bench_alloc(device: Device, nbytes: int, count: int) -> dict[str, Any]:
    """Microseconds per allocate+free, four ways (see the module docstring)."""
    probe = Buffer(device, nbytes, USAGE)
    bits, required = probe.memory_type_bits, probe.required_size
    probe.close()

    def raw_memory() -> None:
        DeviceMemory(device, required, bits, DEVICE_LOCAL).close()

    def raw_buffer() -> None:
        buffer = Buffer(device, nbytes, USAGE)
        memory = DeviceMemory(device, buffer.required_size, bits, DEVICE_LOCAL)
        buffer.bind(memory)
        buffer.close()
        memory.close()

    with MemoryManager(device) as manager, BufferPool(manager, 64 * MIB) as pool:
        ways: dict[str, Callable[[], object]] = {
            "raw_memory": raw_memory,
            "raw_buffer": raw_buffer,
            "manager": lambda: manager.allocate(nbytes).free(),
            "pool": lambda: pool.acquire(nbytes).free(),
        }
        micros = {}
        for name, run in ways.items():
            run()
            start = time.perf_counter()
            for _ in range(count):
                run()
            micros[name] = round((time.perf_counter() - start) / count * 1e6, 2)
    return {
        "bench": "alloc",
        "bytes": nbytes,
        "count": count,
        "us": micros,
        "ratio_raw_memory_over_pool": round(micros["raw_memory"] / micros["pool"], 1),
        "ratio_raw_buffer_over_pool": round(micros["raw_buffer"] / micros["pool"], 1),
        "ratio_raw_buffer_over_manager": round(micros["raw_buffer"] / micros["manager"], 1),
    }


def copy_engine_gbps(
    device: Device, manager: MemoryManager, target: Any, nbytes: int, repeat: int
) -> dict[str, float]:
    """GPU-timed vkCmdCopyBuffer rates: host-visible -> target, target -> HOST_CACHED."""
    chunk = min(nbytes, COPY_CHUNK)
    upload = manager.allocate(chunk, "upload", label="bench h2d source")
    readback = manager.allocate(chunk, "readback", label="bench d2h target")
    upload.write(np.ones(chunk, dtype=np.uint8))
    rates = {}
    with CommandPool(device) as pool, Fence(device) as fence:
        queries = TimestampQueryPool(device, 2)
        for name, (source, destination, downstream) in {
            "h2d": (upload, target, True),
            "d2h": (target, readback, False),
        }.items():
            commands = pool.allocate()
            commands.begin()
            commands.reset_queries(queries)
            commands.write_timestamp(queries, 0)
            for start in range(0, nbytes, chunk):
                size = min(chunk, nbytes - start)
                offsets = (0, start) if downstream else (start, 0)
                commands.copy_buffer(source.buffer, destination.buffer, size, *offsets)
            commands.write_timestamp(queries, 1)
            commands.end()
            best = float("inf")
            for _ in range(repeat + 1):
                device.submit(commands, fence)
                fence.wait()
                fence.reset()
                best = min(best, queries.elapsed_ns(0, 1) * 1e-9)
            rates[name] = round(nbytes / best / 1e9, 2)
        queries.close()
    upload.free()
    readback.free()
    return rates


def bench_transfers(
    device: Device, nbytes: int, repeat: int, stager_options: dict[str, Any], fresh: bool = False
) -> list[dict[str, Any]]:
    """Upload and readback GB/s per target kind, with the copy engine rates beside them.

    `fresh` also times readbacks into a new array each time (its pages are first touched by
    the copy: the host's page faults are part of that figure).
    """
    rows = []
    kinds = ["device"]
    mapped_vram = DEVICE_LOCAL | HOST_VISIBLE
    types = device.info.memory_types
    has_mapped_vram = any(t.property_flags & mapped_vram == mapped_vram for t in types)
    best_device_type = candidate_types(types, "device", 0xFFFFFFFF)[0]
    if has_mapped_vram and not best_device_type.property_flags & HOST_VISIBLE:
        kinds.append("device_mapped")  # a distinct type only where plain VRAM exists too
    source = np.arange(nbytes // 4, dtype=np.float32)
    out = np.zeros_like(source)
    for kind in kinds:
        with MemoryManager(device) as manager, Stager(manager, **stager_options) as stager:
            target = manager.allocate(nbytes, kind, label="bench target")
            engine = copy_engine_gbps(device, manager, target, nbytes, repeat)
            upload_s = best_s(functools.partial(stager.upload, source, target), repeat)
            readback_s = best_s(
                functools.partial(stager.download, target, source.shape, out=out), repeat
            )
            if not np.array_equal(out, source):
                raise AssertionError(f"the {kind} round trip of {nbytes} bytes changed the data")
            upload_gbps = nbytes / upload_s / 1e9
            readback_gbps = nbytes / readback_s / 1e9
            extra = {}
            if fresh:
                fresh_s = best_s(functools.partial(stager.download, target, source.shape), repeat)
                extra["readback_fresh_array_gbps"] = round(nbytes / fresh_s / 1e9, 2)
            rows.append(
                {
                    "bench": "transfer",
                    "bytes": nbytes,
                    "kind": kind,
                    "memory_type": list(target.memory_type.properties),
                    "stager": {
                        "chunk_bytes": stager.chunk_bytes,
                        "slots": stager.slot_count,
                        "threads": stager.threads,
                        "paths": dict(stager.paths),
                    },
                    "upload_gbps": round(upload_gbps, 2),
                    "readback_gbps": round(readback_gbps, 2),
                    "copy_engine_h2d_gbps": engine["h2d"],
                    "copy_engine_d2h_gbps": engine["d2h"],
                    "upload_vs_engine": round(upload_gbps / engine["h2d"], 3),
                    "readback_vs_engine": round(readback_gbps / engine["d2h"], 3),
                    **extra,
                }
            )
            target.free()
    return rows


SWEEP = [
    {"threads": threads, "chunk_bytes": chunk * MIB}
    for threads in (1, 4, 8, 16)
    for chunk in (4, 16, 64)
]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m gpulab.memory.bench", description=__doc__)
    parser.add_argument("--device", type=int, default=0)
    parser.add_argument("--sizes", nargs="+", default=["64M", "1G"], type=parse_size)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--alloc-count", type=int, default=2000)
    parser.add_argument("--sweep", action="store_true", help="also try stager configurations")
    parser.add_argument("--json", metavar="OUT", help="write every row to this JSON file")
    args = parser.parse_args(argv)
    rows: list[dict[str, Any]] = []

    def emit(row: dict[str, Any]) -> None:
        rows.append(row)
        print(json.dumps(row), flush=True)

    with Device(shared_instance().physical_device(args.device)) as device:
        info = device.info
        emit({"bench": "device", "name": info.name, "driver": info.driver_info})
        emit(bench_alloc(device, 1 * MIB, args.alloc_count))
        emit(bench_alloc(device, 64 * 1024, args.alloc_count))
        for nbytes in args.sizes:
            for row in bench_transfers(device, nbytes, args.repeat, {}, fresh=True):
                emit(row)
            if args.sweep:
                for options in SWEEP:
                    for row in bench_transfers(device, nbytes, args.repeat, options):
                        emit(row)
    if args.json:
        with open(args.json, "w") as handle:
            json.dump(rows, handle, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
