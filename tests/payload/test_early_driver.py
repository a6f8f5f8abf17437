"""`gpulab run` starts the Vulkan driver on a second thread: one shared instance, whichever
thread asks first, and nothing started for cpu or native runs."""

from __future__ import annotations

import threading

from gpulab.running.early import start_vulkan
from gpulab.vk import shared_instance

from tests.payload.test_cli import gpulab, no_driver_env


def test_cpu_and_native_runs_start_no_driver() -> None:
    assert start_vulkan("cpu") is None
    assert start_vulkan("native") is None


def test_the_early_thread_makes_the_instance_the_run_then_uses() -> None:
    early = start_vulkan("vulkan")
    assert early is not None
    early.join()
    instance = shared_instance()
    assert shared_instance() is instance
    assert instance.physical_devices()[0] is instance.physical_devices()[0]


def test_threads_asking_at_once_share_one_instance_and_one_device_list() -> None:
    found: list[object] = []
    start = threading.Barrier(4)

    def ask() -> None:
        start.wait()
        instance = shared_instance()
        found.append((instance, instance.physical_devices()[0]))

    threads = [threading.Thread(target=ask) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(found) == 4
    assert len({id(instance) for instance, _ in found}) == 1
    assert len({id(device) for _, device in found}) == 1


def test_a_run_without_a_driver_still_says_why_in_one_line() -> None:
    # The early thread meets the missing driver first and keeps quiet; the run reports it.
    done = gpulab(
        "run", "payload/examples/saxpy_norm.json", "--backend", "vulkan", env=no_driver_env()
    )
    assert done.returncode == 3
    assert done.stderr.count("\n") == 1
