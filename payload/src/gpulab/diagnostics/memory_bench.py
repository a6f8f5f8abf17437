"""Memory benchmarks: pooled allocation against raw vkAllocateMemory, and transfer rates
against the copy engine measured in the same run.

    python -m gpulab.diagnostics.memory_bench [--device N] [--sizes 64M 1G] [--sweep] [--json OUT]
        [--plot OUT.png]

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
- paths (bench "path"): the same transfers of a "device" buffer by each way the Stager
  has: "pageable" (a numpy array through the staging ring, the default), "pinned" (an array
  from Stager.pinned_empty: one device copy, no host copy), "imported" (the numpy array's
  pages imported per transfer with VK_EXT_external_memory_host, the import included),
  "registered" (both arrays imported once by Stager.register, the cudaHostRegister way;
  that one-off cost is reported beside it as register_ms_both_arrays), and
  with --sweep the ring's threads x chunk size x upload memory (write-combined or cached).
- host copy: numpy copies between a pageable array and mapped memory of each kind, split
  over 1..16 threads: the ceiling of the pageable path.
`--plot` draws GB/s against transfer size per path, upload and readback, beside the copy
engine (gpulab.diagnostics.bench_plot; `gpulab bench --from OUT.json --plot OUT.png` redraws
it from the JSON). GB/s are 10^9 bytes moved one way per second. A benchmark, not a test: it
asserts only that the bytes arrived.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from gpulab.diagnostics.bench_plot import plot_memory, require_matplotlib
from gpulab.kernels.session import DeviceSession
from gpulab.memory.errors import OutOfMemoryError
from gpulab.memory.host_import import HostImporter
from gpulab.memory.memory_types import candidate_types
from gpulab.memory.pool import BufferPool
from gpulab.memory.staging import Stager
from gpulab.vk import Buffer, DeviceMemory, TimestampQueryPool
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


def bench_alloc(session: DeviceSession, nbytes: int, count: int) -> dict[str, Any]:
    """Microseconds per allocate+free, four ways (see the module docstring)."""
    device, manager = session.device, session.manager
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

    with BufferPool(manager, 64 * MIB) as pool:
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
    session: DeviceSession, target: Any, nbytes: int, repeat: int
) -> dict[str, float]:
    """GPU-timed vkCmdCopyBuffer rates: upload memory -> target ("h2d"), HOST_CACHED ->
    target ("h2d_cached"), target -> HOST_CACHED ("d2h")."""
    manager, submitter = session.manager, session.submitter
    chunk = min(nbytes, COPY_CHUNK)
    upload = manager.allocate(chunk, "upload", label="bench h2d source")
    readback = manager.allocate(chunk, "readback", label="bench d2h target")
    upload.write(np.ones(chunk, dtype=np.uint8))
    readback.write(np.ones(chunk, dtype=np.uint8))
    rates = {}
    with TimestampQueryPool(session.device, 2) as queries:
        for name, (source, destination, downstream) in {
            "h2d": (upload, target, True),
            "h2d_cached": (readback, target, True),
            "d2h": (target, readback, False),
        }.items():
            commands = submitter.allocate()
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
                submitter.submit(commands)
                best = min(best, queries.elapsed_ns(0, 1) * 1e-9)
            commands.close()
            rates[name] = round(nbytes / best / 1e9, 2)
    upload.free()
    readback.free()
    return rates


def bench_transfers(
    session: DeviceSession,
    nbytes: int,
    repeat: int,
    stager_options: dict[str, Any],
    fresh: bool = False,
) -> list[dict[str, Any]]:
    """Upload and readback GB/s per target kind, with the copy engine rates beside them.

    `fresh` also times readbacks into a new array each time (its pages are first touched by
    the copy: the host's page faults are part of that figure).
    """
    rows = []
    kinds = ["device"]
    mapped_vram = DEVICE_LOCAL | HOST_VISIBLE
    types = session.info.memory_types
    has_mapped_vram = any(t.property_flags & mapped_vram == mapped_vram for t in types)
    best_device_type = candidate_types(types, "device", 0xFFFFFFFF)[0]
    if has_mapped_vram and not best_device_type.property_flags & HOST_VISIBLE:
        kinds.append("device_mapped")  # a distinct type only where plain VRAM exists too
    source = np.arange(nbytes // 4, dtype=np.float32)
    out = np.zeros_like(source)
    for kind in kinds:
        with session.open_stager(**stager_options) as stager:
            target = session.manager.allocate(nbytes, kind, label="bench target")
            engine = copy_engine_gbps(session, target, nbytes, repeat)
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
            session.manager.trim()
    return rows


SWEEP: list[dict[str, Any]] = [
    {"threads": threads, "chunk_bytes": chunk * MIB, "upload_memory": memory}
    for memory in ("write_combined", "cached")
    for threads in (8, 16)
    for chunk in (4, 16, 64)
]


def _path_row(
    nbytes: int, path: str, upload_s: float, readback_s: float, engine: dict[str, float]
) -> dict[str, Any]:
    upload_gbps = nbytes / upload_s / 1e9
    readback_gbps = nbytes / readback_s / 1e9
    return {
        "bench": "path",
        "bytes": nbytes,
        "path": path,
        "upload_gbps": round(upload_gbps, 2),
        "readback_gbps": round(readback_gbps, 2),
        "copy_engine_h2d_gbps": engine["h2d"],
        "copy_engine_h2d_cached_gbps": engine["h2d_cached"],
        "copy_engine_d2h_gbps": engine["d2h"],
        "upload_vs_engine": round(upload_gbps / engine["h2d"], 3),
        "readback_vs_engine": round(readback_gbps / engine["d2h"], 3),
    }


def bench_paths(
    session: DeviceSession, nbytes: int, repeat: int, sweep: bool
) -> list[dict[str, Any]]:
    """Each transfer path of the Stager into and out of one "device" buffer (see the module
    docstring), against the copy engine measured on that buffer first."""
    rows: list[dict[str, Any]] = []
    source = np.arange(nbytes // 4, dtype=np.float32)
    out = np.zeros_like(source)
    device, manager = session.device, session.manager
    target = manager.allocate(nbytes, "device", label="bench target")
    engine = copy_engine_gbps(session, target, nbytes, repeat)

    def measure(stager: Stager, up: Any, down: Any) -> tuple[float, float]:
        up_s = best_s(functools.partial(stager.upload, up, target), repeat)
        down_s = best_s(functools.partial(stager.download, target, up.shape, out=down), repeat)
        if not np.array_equal(down, source):
            raise AssertionError(f"a round trip of {nbytes} bytes changed the data")
        down[:1] = -1  # the next measurement must write it again
        return up_s, down_s

    with session.open_stager() as stager:
        rows.append(_path_row(nbytes, "pageable", *measure(stager, source, out), engine))
        try:
            pinned_in = stager.pinned_empty(source.shape, source.dtype)
            pinned_out = stager.pinned_empty(source.shape, source.dtype)
        except OutOfMemoryError as exc:  # small heaps (lavapipe: 2 GiB for everything)
            rows.append({"bench": "path", "bytes": nbytes, "path": "pinned", "skipped": str(exc)})
        else:
            pinned_in[:] = source
            up_s, down_s = measure(stager, pinned_in, pinned_out)
            rows.append(_path_row(nbytes, "pinned", up_s, down_s, engine))
            rows[-1]["upload_vs_engine_cached_source"] = round(
                rows[-1]["upload_gbps"] / engine["h2d_cached"], 3
            )
            pinned_in.free()
            pinned_out.free()
            del pinned_in, pinned_out
    with session.open_stager(import_above=0, paths={}) as stager:
        if HostImporter(device).usable:
            rows.append(_path_row(nbytes, "imported", *measure(stager, source, out), engine))
            rows[-1]["counts"] = stager.stats()["transfers"]
    with session.open_stager() as stager:
        if HostImporter(device).usable:
            start = time.perf_counter()
            stager.register(source)
            stager.register(out)
            register_s = time.perf_counter() - start
            rows.append(_path_row(nbytes, "registered", *measure(stager, source, out), engine))
            rows[-1]["register_ms_both_arrays"] = round(register_s * 1e3, 2)
    if sweep:
        for options in SWEEP:
            with session.open_stager(**options) as stager:
                row = _path_row(nbytes, "pageable", *measure(stager, source, out), engine)
                row["stager"] = {**options, "slots": stager.slot_count}
                rows.append(row)
    target.free()
    manager.trim()  # the blocks emptied go back now, not after the grace period
    return rows


def bench_host_copy(session: DeviceSession, nbytes: int, repeat: int) -> list[dict[str, Any]]:
    """GB/s of numpy copies pageable -> mapped memory of each kind and back, by thread count."""
    rows = []
    pageable = np.arange(nbytes, dtype=np.uint8)
    manager = session.manager
    for kind in ("upload", "readback"):
        mapped = manager.allocate(nbytes, kind, label="bench host copy")
        view = mapped.view(np.uint8, nbytes)
        for threads in (1, 4, 8, 16):
            with session.open_stager(threads=threads) as stager:
                into = best_s(functools.partial(stager.copy, view, pageable), repeat)
                out_of = best_s(functools.partial(stager.copy, pageable, view), repeat)
            rows.append(
                {
                    "bench": "host_copy",
                    "bytes": nbytes,
                    "memory_type": list(mapped.memory_type.properties),
                    "threads": threads,
                    "into_mapped_gbps": round(nbytes / into / 1e9, 2),
                    "out_of_mapped_gbps": round(nbytes / out_of / 1e9, 2),
                }
            )
        del view
        mapped.free()
    manager.trim()
    return rows


def bench_torch(nbytes: int, repeat: int) -> list[dict[str, Any]]:
    """The same transfers done by torch on CUDA, for reference: a pageable numpy array
    (torch.from_numpy(...).cuda(), .cpu() into a preallocated array) and pinned tensors
    (pin_memory(), copy_). Synchronized after each; rows only where torch has CUDA."""
    try:
        import torch  # type: ignore[import-not-found]  # noqa: PLC0415 (optional reference)
    except ImportError:
        return []
    if not torch.cuda.is_available():
        return []
    source = np.arange(nbytes // 4, dtype=np.float32)
    out = np.zeros_like(source)
    on_device = torch.empty(source.size, dtype=torch.float32, device="cuda")
    pinned_in = torch.from_numpy(source).pin_memory()
    pinned_out = torch.empty_like(pinned_in).pin_memory()
    out_tensor = torch.from_numpy(out)

    def timed(copy: Callable[[], object]) -> float:
        def run() -> None:
            copy()
            torch.cuda.synchronize()

        return nbytes / best_s(run, repeat) / 1e9

    rows = []
    for path, up, down in (
        (
            "pageable",
            lambda: on_device.copy_(torch.from_numpy(source)),
            lambda: out_tensor.copy_(on_device),
        ),
        ("pinned", lambda: on_device.copy_(pinned_in), lambda: pinned_out.copy_(on_device)),
    ):
        rows.append(
            {
                "bench": "torch",
                "bytes": nbytes,
                "path": path,
                "version": torch.__version__,
                "upload_gbps": round(timed(up), 2),
                "readback_gbps": round(timed(down), 2),
            }
        )
    return rows


def _host_facts() -> dict[str, str]:
    """Transparent huge pages and NUMA nodes: what shapes host copy rates."""
    facts = {}
    for name, path in {
        "thp": "/sys/kernel/mm/transparent_hugepage/enabled",
        "numa_nodes": "/sys/devices/system/node/online",
    }.items():
        try:
            with open(path) as handle:
                facts[name] = handle.read().strip()
        except OSError:
            facts[name] = "unknown"
    return facts


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m gpulab.diagnostics.memory_bench", description=__doc__
    )
    parser.add_argument("--device", type=int, default=0)
    parser.add_argument("--sizes", nargs="+", default=["64M", "1G"], type=parse_size)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--alloc-count", type=int, default=2000)
    parser.add_argument("--sweep", action="store_true", help="also try stager configurations")
    parser.add_argument("--no-alloc", action="store_true", help="skip the allocation bench")
    parser.add_argument("--torch", action="store_true", help="also time torch's CUDA copies")
    parser.add_argument("--json", metavar="OUT", help="write every row to this JSON file")
    parser.add_argument(
        "--plot", metavar="OUT.png", help="GB/s against transfer size per path (matplotlib)"
    )
    args = parser.parse_args(argv)
    if args.plot:
        require_matplotlib()  # before the run, not after minutes of it
    rows: list[dict[str, Any]] = []

    def emit(row: dict[str, Any]) -> None:
        rows.append(row)
        print(json.dumps(row), flush=True)

    with DeviceSession(args.device) as session:
        info = session.info
        emit(
            {
                "bench": "device",
                "name": info.name,
                "driver": info.driver_info,
                "extensions": list(session.device.extensions),
                "cpus": os.cpu_count(),
                **_host_facts(),
            }
        )
        if not args.no_alloc:
            emit(bench_alloc(session, 1 * MIB, args.alloc_count))
            emit(bench_alloc(session, 64 * 1024, args.alloc_count))
        for nbytes in args.sizes:
            for row in bench_transfers(session, nbytes, args.repeat, {}, fresh=True):
                emit(row)
            for row in bench_paths(session, nbytes, args.repeat, args.sweep):
                emit(row)
            if args.sweep:
                for row in bench_host_copy(session, nbytes, args.repeat):
                    emit(row)
            if args.torch:
                for row in bench_torch(nbytes, args.repeat):
                    emit(row)
    if args.json:
        with open(args.json, "w") as handle:
            json.dump(rows, handle, indent=1)
    if args.plot:
        plot_memory(rows, Path(args.plot))
    return 0


if __name__ == "__main__":
    sys.exit(main())
