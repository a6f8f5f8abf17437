"""Each GPU's health, bandwidth and memory in use, as metrics.

Per Vulkan device: the result and duration of the health check (gpulab.diagnostics.health, what
Slurm's HealthCheckProgram runs), the copy and saxpy bandwidth of a short `gpulab bench`, and
the device-local memory in use where the driver has VK_EXT_memory_budget.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from gpulab.diagnostics import health
from gpulab.metrics.exposition import Family
from gpulab.vk import DeviceInfo, NoVulkanDevice, VulkanError, shared_instance
from gpulab.vk.memory_budget import HeapUsage, heap_usage

BENCH_TIMEOUT_S = 120
# Bytes per gigabyte in `gpulab bench`'s rows (GB/s, decimal).
_GB = 1e9


@dataclass(frozen=True)
class DeviceFacts:
    """What the loader says about one device, with its heaps' usage (None: not reported)."""

    info: DeviceInfo
    heaps: tuple[HeapUsage, ...] | None


def _devices() -> list[DeviceFacts]:
    """Every Vulkan device here; empty without a loader, driver or device."""
    try:
        physicals = shared_instance().physical_devices()
    except (NoVulkanDevice, VulkanError, OSError):
        return []
    return [DeviceFacts(p.info, heap_usage(p)) for p in physicals]


def measure_bandwidth(device: int, elements: int) -> dict[str, float]:
    """Bytes per second of copy and saxpy on `elements` floats, by `gpulab bench` (its JSON
    rows are the contract's); empty when the benchmark fails or takes over BENCH_TIMEOUT_S.
    A child process, not gpulab.diagnostics.bench in this one: a device that hangs a kernel
    costs this collector the timeout, not its life."""
    with tempfile.TemporaryDirectory(prefix="gpulab-metrics-") as folder:
        rows_file = Path(folder) / "bench.json"
        argv = [
            sys.executable, "-m", "gpulab", "bench", "--ops", "saxpy", "--sizes", str(elements),
            "--device", str(device), "--no-overhead", "--json", str(rows_file),
        ]  # fmt: skip
        try:
            done = subprocess.run(argv, capture_output=True, timeout=BENCH_TIMEOUT_S, check=False)
        except subprocess.TimeoutExpired:
            return {}
        if done.returncode != 0 or not rows_file.exists():
            return {}
        rows = json.loads(rows_file.read_text())
    return {row["op"]: row["gbps"] * _GB for row in rows if row.get("gbps")}


def collect(devices: int | None = None, bench_elements: int = 0) -> list[Family]:
    """The GPU metrics of devices 0..devices-1 (None: every device found, else device 0, so
    a node that lost its driver reports a failed check); bench_elements 0 skips bandwidth."""
    found = _devices()
    count = devices if devices is not None else max(len(found), 1)
    families = {
        "devices": Family("gpulab_gpu_devices", "Vulkan devices the loader lists"),
        "info": Family("gpulab_gpu_info", "1 per Vulkan device, its name, type and driver"),
        "ok": Family("gpulab_gpu_health_ok", "1 when the device passed gpulab's health check"),
        "duration": Family(
            "gpulab_gpu_health_check_duration_seconds", "How long the health check took"
        ),
        "copy": Family(
            "gpulab_gpu_copy_bandwidth_bytes_per_second",
            "Bytes read and written per second by a copy kernel, last measurement",
        ),
        "saxpy": Family(
            "gpulab_gpu_saxpy_bandwidth_bytes_per_second",
            "Bytes read and written per second by saxpy, last measurement",
        ),
        "size": Family("gpulab_gpu_memory_size_bytes", "Size of each device-local memory heap"),
        "used": Family(
            "gpulab_gpu_memory_used_bytes",
            "Bytes in use in each device-local heap by every process (VK_EXT_memory_budget)",
        ),
    }
    families["devices"].add(len(found))
    for index in range(count):
        device = str(index)
        report = health.check(index)
        families["ok"].add(1 if report.ok else 0, device=device)
        families["duration"].add(round(report.elapsed_ms / 1000, 6), device=device)
        if index >= len(found):
            continue
        facts = found[index]
        info = facts.info
        families["info"].add(1, device=device, name=info.name, type=info.type, driver=info.driver)
        for heap in (h for h in info.memory_heaps if h.device_local):
            families["size"].add(heap.size, device=device, heap=str(heap.index))
        for usage in (u for u in facts.heaps or () if u.device_local):
            families["used"].add(usage.used, device=device, heap=str(usage.index))
        if report.ok and bench_elements > 0:
            measured = measure_bandwidth(index, bench_elements)
            for op in ("copy", "saxpy"):
                if op in measured:
                    families[op].add(round(measured[op]), device=device)
    return list(families.values())
