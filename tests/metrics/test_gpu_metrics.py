"""GPU metrics on the real device (lavapipe here): the health check, a short bandwidth
measurement through `gpulab bench`, and a device that is not there reported as failed."""

from __future__ import annotations

from gpulab.metrics import gpu as gpu_metrics
from gpulab.metrics import render
from gpulab.vk import shared_instance

from tests.metrics.promtext import labels, parse


def test_a_healthy_device_and_a_missing_one() -> None:
    found = len(shared_instance().physical_devices())
    samples, types = parse(render(gpu_metrics.collect(devices=found + 1, bench_elements=4096)))
    assert samples["gpulab_gpu_devices"] == {labels(): found}
    assert samples["gpulab_gpu_health_ok"][labels(device="0")] == 1
    assert samples["gpulab_gpu_health_ok"][labels(device=str(found))] == 0  # not there
    assert set(samples["gpulab_gpu_health_check_duration_seconds"]) == {
        labels(device=str(i)) for i in range(found + 1)
    }
    assert all(v > 0 for v in samples["gpulab_gpu_health_check_duration_seconds"].values())
    info = next(iter(samples["gpulab_gpu_info"]))
    assert dict(info)["name"] == shared_instance().physical_device(0).info.name
    for op in ("copy", "saxpy"):
        measured = samples[f"gpulab_gpu_{op}_bandwidth_bytes_per_second"]
        assert set(measured) == {labels(device=str(i)) for i in range(found)}
        assert all(v > 0 for v in measured.values())
    assert samples["gpulab_gpu_memory_size_bytes"][labels(device="0", heap="0")] > 0
    assert set(types.values()) == {"gauge"}


def test_no_measurement_when_bench_elements_is_0() -> None:
    samples, _ = parse(render(gpu_metrics.collect(devices=1, bench_elements=0)))
    assert "gpulab_gpu_copy_bandwidth_bytes_per_second" not in samples
    assert samples["gpulab_gpu_health_ok"] == {labels(device="0"): 1}


def test_memory_in_use_only_where_the_driver_reports_it() -> None:
    physical = shared_instance().physical_device(0)
    usage = gpu_metrics.heap_usage(physical)
    samples, _ = parse(render(gpu_metrics.collect(devices=1, bench_elements=0)))
    if usage is None:  # lavapipe: no VK_EXT_memory_budget
        assert "gpulab_gpu_memory_used_bytes" not in samples
    else:
        local = {labels(device="0", heap=str(u.index)) for u in usage if u.device_local}
        assert set(samples["gpulab_gpu_memory_used_bytes"]) == local
