"""`gpulab memory`: run an allocation pattern like a graph's on a device and print the stats.

The pattern: a few passes of pooled intermediates of mixed sizes (from 1 KiB to 8 MiB, the
later passes reusing the earlier passes' buffers), uploads and readbacks through the Stager
(a pageable array, then a pinned one), and one buffer large enough for a dedicated
allocation. It prints the manager's statistics
(allocator and pool) as a table, or as JSON with --json.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np

from gpulab.kernels.session import DeviceSession
from gpulab.memory.pool import BufferPool

MIB = 1 << 20
PASSES = 4
SIZES = (1024, 3000, 64 * 1024, 250_000, MIB, 3 * MIB, 8 * MIB)


def exercise(session: DeviceSession, budget_bytes: int = 64 * MIB) -> dict[str, Any]:
    """Run the pattern on `session`'s memory manager, with a pool and a stager of its own:
    the manager's statistics while the last pass is live, and once the pool and the stager
    are closed (empty blocks stay for the grace period)."""
    manager = session.manager
    with BufferPool(manager, budget_bytes) as pool, session.open_stager() as stager:
        rng = np.random.default_rng(0)
        live_stats: dict[str, Any] = {}
        pinned = stager.pinned_empty(SIZES[-1] // 4, np.float32)
        for step in range(PASSES):
            held = [pool.acquire(size, label=f"pass {step} #{i}") for i, size in enumerate(SIZES)]
            data = rng.standard_normal(SIZES[-1] // 4).astype(np.float32)
            stager.upload(data, held[-1])
            if not np.array_equal(stager.download(held[-1], data.shape), data):
                raise RuntimeError("the uploaded data did not come back unchanged")
            stager.download(held[-1], data.shape, out=pinned)
            pinned *= 2
            stager.upload(pinned, held[-1])
            if not np.array_equal(stager.download(held[-1], data.shape), data * 2):
                raise RuntimeError("the pinned round trip did not come back unchanged")
            if step == PASSES - 1:
                big = manager.allocate(manager.blocks.block_size(held[0].memory_type) // 2 + 1)
                live_stats = manager.stats()
                big.free()
            for allocation in reversed(held):
                allocation.free()
        pinned.free()
        del pinned
        paths = dict(stager.paths)
    return {"live": live_stats, "after": manager.stats(), "paths": paths}


def _mib(nbytes: int) -> str:
    return f"{nbytes / MIB:.1f} MiB"


def _table(stats: dict[str, Any]) -> str:
    lines = [
        f"suballocator: {stats['suballocator']}",
        f"allocated {_mib(stats['allocated_bytes'])}, in use {_mib(stats['in_use_bytes'])}, "
        f"free {_mib(stats['free_bytes'])}, largest free region "
        f"{_mib(stats['largest_free_region'])}, fragmentation {stats['fragmentation']:.2f}",
        f"peak in use {_mib(stats['peak_in_use_bytes'])}, blocks {stats['block_count']}, "
        f"dedicated {stats['dedicated_count']}, allocations {stats['allocation_count']}",
    ]
    pool = stats.get("pool")
    if pool:
        lines.append(
            f"pool: hit rate {pool['hit_rate']:.2f} ({pool['hits']} hits, {pool['misses']} "
            f"misses), {pool['evictions']} evictions, cached {_mib(pool['cached_bytes'])}"
        )
    transfers = stats.get("transfers")
    if transfers:
        counts = "; ".join(
            f"{direction} " + ", ".join(f"{path} {n}" for path, n in paths.items() if n)
            for direction, paths in transfers["transfers"].items()
        )
        lines.append(
            f"transfers: {counts}; pinned arrays {transfers['pinned_arrays']} "
            f"({_mib(transfers['pinned_bytes'])})"
        )
    for index, entry in stats["memory_types"].items():
        lines.append(
            f"  type {index} (heap {entry['heap']}, {'|'.join(entry['flags'])}): "
            f"allocated {_mib(entry['allocated_bytes'])}, in use {_mib(entry['in_use_bytes'])}, "
            f"peak {_mib(entry['peak_in_use_bytes'])}, blocks {entry['block_count']}"
        )
    return "\n".join(lines)


def describe(as_json: bool, device_index: int = 0) -> str:
    """`gpulab memory`: exercise device `device_index`; its statistics as JSON or tables."""
    with DeviceSession(device_index) as session:
        result = exercise(session)
        result["device"] = session.info.name
    if as_json:
        return json.dumps(result, indent=2)
    return "\n".join(
        [
            f"device: {result['device']}; transfer paths: {result['paths']}",
            "while the last pass is live:",
            _table(result["live"]),
            "after freeing everything:",
            _table(result["after"]),
        ]
    )
