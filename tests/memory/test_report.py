"""`gpulab memory`: the allocation pattern's statistics, as users run the command."""

from __future__ import annotations

import json
import subprocess
import sys

from gpulab.diagnostics.memory_report import exercise
from gpulab.kernels import DeviceSession
from gpulab.vk import Instance

STAT_KEYS = {
    "allocated_bytes",
    "in_use_bytes",
    "free_bytes",
    "largest_free_region",
    "fragmentation",
    "peak_in_use_bytes",
    "block_count",
    "dedicated_count",
    "allocation_count",
    "memory_types",
    "suballocator",
}


def test_the_pattern_reuses_pooled_buffers_and_frees_everything(process_instance: Instance) -> None:
    with DeviceSession(0, instance=process_instance) as session:
        result = exercise(session)
    live, after = result["live"], result["after"]
    assert set(live) >= STAT_KEYS and set(after) >= STAT_KEYS
    assert live["dedicated_count"] == 1
    assert live["pool"]["hit_rate"] == 0.75  # passes 2 to 4 reuse the first pass's buffers
    assert after["in_use_bytes"] == 0 and after["allocation_count"] == 0
    assert after["peak_in_use_bytes"] >= live["in_use_bytes"]
    assert live["transfers"]["pinned_arrays"] == 1
    assert live["transfers"]["transfers"]["upload"]["pinned"] == 4  # one per pass
    assert live["transfers"]["transfers"]["download"]["pinned"] == 4


def test_gpulab_memory_json(process_instance: Instance) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "gpulab", "memory", "--json"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    info = process_instance.physical_device(0).info  # what `gpulab memory` runs on by default
    assert result["device"] == info.name
    reported = result["live"]["memory_types"]
    for index, entry in reported.items():  # the device's own memory types, as it reports them
        memory_type = info.memory_types[int(index)]
        assert (entry["heap"], entry["flags"]) == (
            memory_type.heap_index,
            list(memory_type.properties),
        )
    assert any("device_local" in entry["flags"] for entry in reported.values())


def test_gpulab_memory_rejects_a_missing_device() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "gpulab", "memory", "--device", "7"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 3
    assert done.stderr.count("\n") == 1 and "device index 7 does not exist" in done.stderr
