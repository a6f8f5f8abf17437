"""With the Khronos validation layer on, the layer's own use of Vulkan is clean; misuse and
synchronization hazards are reported, to logging and to GPULAB_VK_VALIDATION_LOG's file."""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from gpulab import GpuComputePipeline
from gpulab.vk import Buffer, CommandPool, Device, DeviceMemory, Fence, Instance
from gpulab.vk.bare_instance import VALIDATION_ENV
from gpulab.vk.buffer import TRANSFER_DST, TRANSFER_SRC
from gpulab.vk.instance import (
    VALIDATION_LAYER,
    VALIDATION_LOG_ENV,
    available_layers,
)

from tests.payload.test_cli import gpulab, no_driver_env

pytestmark = pytest.mark.skipif(
    VALIDATION_LAYER not in available_layers(),
    reason=f"{VALIDATION_LAYER} is not installed (apt install vulkan-validationlayers)",
)
VALIDATION_LOG = "gpulab.vk.validation"


@pytest.fixture
def validated() -> Iterator[Instance]:
    with Instance(validation=True) as instance:
        assert instance.validation
        yield instance


def _errors(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]


def test_the_compute_pipeline_raises_no_validation_message(
    validated: Instance, caplog: pytest.LogCaptureFixture
) -> None:
    with (
        caplog.at_level(logging.WARNING, logger=VALIDATION_LOG),
        GpuComputePipeline(instance=validated, max_binding_bytes=1024) as pipeline,
    ):
        for n in (1, 257, 5000, 300):
            values = np.arange(n, dtype=np.float32)
            assert np.array_equal(pipeline.execute(values), values * 2)
    assert [r.getMessage() for r in caplog.records] == []


def test_misuse_is_reported_through_logging(
    validated: Instance, caplog: pytest.LogCaptureFixture
) -> None:
    with (
        caplog.at_level(logging.WARNING, logger=VALIDATION_LOG),
        Device(validated.physical_device(0)) as device,
    ):
        Buffer(device, 64, usage=0).close()  # usage must not be 0
    assert any("VUID-VkBufferCreateInfo-usage" in message for message in _errors(caplog))


def test_messages_are_appended_to_the_log_file(
    validated: Instance, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log_file = tmp_path / "messages.txt"
    monkeypatch.setenv(VALIDATION_LOG_ENV, str(log_file))
    with Device(validated.physical_device(0)) as device:
        Buffer(device, 64, usage=0).close()
    lines = log_file.read_text().splitlines()
    assert lines
    assert all(line.startswith(f"ERROR pid {os.getpid()}: ") for line in lines)
    assert "VUID-VkBufferCreateInfo-usage" in lines[0]


def test_a_copy_reading_without_a_barrier_is_a_synchronization_hazard(
    validated: Instance, caplog: pytest.LogCaptureFixture
) -> None:
    """Synchronization validation is on: a -> b, then b -> c with no barrier between."""
    usage = TRANSFER_SRC | TRANSFER_DST
    with (
        caplog.at_level(logging.WARNING, logger=VALIDATION_LOG),
        Device(validated.physical_device(0)) as device,
    ):
        buffers = [Buffer(device, 256, usage) for _ in range(3)]
        memories = [DeviceMemory(device, b.required_size, b.memory_type_bits) for b in buffers]
        for buffer, memory in zip(buffers, memories, strict=True):
            buffer.bind(memory)
        with CommandPool(device) as pool, Fence(device) as fence:
            cmd = pool.allocate()
            cmd.begin()
            cmd.copy_buffer(buffers[0], buffers[1], 256)
            cmd.copy_buffer(buffers[1], buffers[2], 256)
            cmd.end()
            device.submit(cmd, fence)
            fence.wait()
        for buffer, memory in zip(buffers, memories, strict=True):
            buffer.close()
            memory.close()
    assert any("SYNC-HAZARD-READ-AFTER-WRITE" in message for message in _errors(caplog))


def test_a_run_without_a_driver_says_why_in_one_line_with_validation_on() -> None:
    # The messenger in vkCreateInstance's chain sees the loader's own lines about the missing
    # driver (once per attempt: the early thread's and the run's); the error says it once.
    env = {**no_driver_env(), VALIDATION_ENV: "1"}
    done = gpulab("run", "payload/examples/saxpy_norm.json", "--backend", "vulkan", env=env)
    assert done.returncode == 3
    assert done.stderr.count("\n") == 1, done.stderr
    assert "found no compatible driver" in done.stderr
