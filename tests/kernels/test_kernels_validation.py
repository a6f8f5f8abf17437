"""The validation net (tests/vulkan_validation.py) catches what it is there for: a missing
barrier recorded on purpose, and a message from a process the test starts. Runs under
GPULAB_VK_VALIDATION=1, as `make test-payload` runs this suite."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest
from gpulab.kernels import Kernels, OwnedArray
from gpulab.kernels._recording import Recording
from gpulab.vk import CommandPool, Device, Fence
from gpulab.vk.instance import validation_requested

from tests.vulkan_validation import ValidationMessages

pytestmark = pytest.mark.skipif(
    not validation_requested(), reason="the validation net is on with GPULAB_VK_VALIDATION=1"
)


def test_a_dispatch_reading_without_a_barrier_is_a_reported_hazard(
    device: Device,
    kernels: Kernels,
    vulkan_validation: ValidationMessages,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """scale writes `middle`, the next scale reads it: without the compute->compute barrier
    that every op ends with, a GPU may run the second before the first's writes land."""
    monkeypatch.setattr(Recording, "barrier", lambda _self: None)
    arrays = [OwnedArray(device, (4096,)) for _ in range(3)]
    source, middle, out = (array.array for array in arrays)
    try:
        arrays[0].write(np.ones(4096, dtype=np.float32))
        with CommandPool(device) as pool, Fence(device) as fence:
            cmd = pool.allocate()
            cmd.begin()
            kernels.record(cmd, "scale", {"x": source, "a": 2.0}, middle)
            kernels.record(cmd, "scale", {"x": middle, "a": 3.0}, out)
            cmd.barrier("compute", "host")
            cmd.end()
            device.submit(cmd, fence)
            fence.wait()
    finally:
        for array in arrays:
            array.close()
    messages = vulkan_validation.take()
    assert any("SYNC-HAZARD-READ-AFTER-WRITE" in m for m in messages), messages


def test_a_message_of_a_process_the_test_started_is_reported(
    vulkan_validation: ValidationMessages,
) -> None:
    misuse = (
        "from gpulab.vk import Buffer, Device, shared_instance\n"
        "with Device(shared_instance().physical_device(0)) as device:\n"
        "    Buffer(device, 64, usage=0).close()\n"
    )
    child = subprocess.run(
        [sys.executable, "-c", misuse], env=os.environ, capture_output=True, check=True
    )
    messages = vulkan_validation.take()
    assert any("VUID-VkBufferCreateInfo-usage" in m for m in messages), (messages, child.stderr)
    assert all(f"pid {os.getpid()}:" not in m for m in messages)
