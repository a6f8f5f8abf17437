"""Ownership: children close before parents, use after close raises, double close is a no-op."""

from __future__ import annotations

import gc
import subprocess
import sys

import pytest
from gpulab.vk import (
    Buffer,
    CommandPool,
    ComputePipeline,
    DescriptorPool,
    DescriptorSetLayout,
    Device,
    DeviceMemory,
    Fence,
    Instance,
    ObjectClosedError,
    PipelineLayout,
    ShaderModule,
    State,
    live_handles,
)


def test_live_handle_counter_counts_by_type(device: Device) -> None:
    buffers = [Buffer(device, 64) for _ in range(3)]
    assert live_handles()["Buffer"] == 3
    for buffer in buffers:
        buffer.close()
    assert "Buffer" not in live_handles()


def test_closing_the_device_closes_its_children_first(instance: Instance) -> None:
    device = Device(instance.physical_device(0))
    buffer = Buffer(device, 256)
    host_visible = 0x2
    memory = DeviceMemory(device, buffer.required_size, buffer.memory_type_bits, host_visible)
    buffer.bind(memory)
    memory.map()
    layout = DescriptorSetLayout(device, 2)
    pipeline_layout = PipelineLayout(device, [layout], push_constant_bytes=4)
    with ShaderModule.packaged(device, "times_two") as shader:
        pipeline = ComputePipeline(device, pipeline_layout, shader, specialization={0: 64})
    pool = DescriptorPool(device, 1, 2)
    descriptor_set = pool.allocate(layout)
    command_buffer = CommandPool(device).allocate()
    fence = Fence(device)

    device.close()

    children = [buffer, memory, layout, pipeline_layout, pipeline, pool, descriptor_set]
    children += [command_buffer, fence]
    assert all(child.state is State.CLOSED for child in children)
    assert not memory.mapped
    assert set(live_handles()) == {"Instance", "PhysicalDevice"}  # the shared instance


def test_closing_the_instance_closes_everything() -> None:
    before = live_handles()
    instance = Instance()
    device = Device(instance.physical_device(0))
    Buffer(device, 64)  # held only by its owner: the device closes it
    instance.close()
    assert device.closed
    assert live_handles() == before


def test_use_after_close_raises_naming_the_object(device: Device) -> None:
    buffer = Buffer(device, 64)
    buffer.close()
    with pytest.raises(ObjectClosedError, match="Buffer closed"):
        _ = buffer.raw
    memory = DeviceMemory(device, 64)
    memory.close()
    with pytest.raises(ObjectClosedError, match="DeviceMemory"):
        memory.map()


def test_children_cannot_be_made_on_a_closed_device(instance: Instance) -> None:
    device = Device(instance.physical_device(0))
    device.close()
    with pytest.raises(ObjectClosedError, match="Device"):
        Buffer(device, 64)


def test_double_close_is_a_no_op(device: Device) -> None:
    buffer = Buffer(device, 64)
    buffer.close()
    buffer.close()
    with Fence(device) as fence:
        fence.close()
    assert fence.closed


def test_dropped_objects_are_released_by_the_finalizer(device: Device) -> None:
    Buffer(device, 64)
    gc.collect()
    assert "Buffer" not in live_handles()


def test_a_closed_child_leaves_its_parent_usable(device: Device) -> None:
    with Buffer(device, 64):
        pass
    with Buffer(device, 128) as buffer:
        assert buffer.state is State.OPEN


def test_objects_left_open_at_exit_are_released_cleanly() -> None:
    # Nothing closed: the finalizers release device objects, then the shared instance, at exit.
    script = (
        "import numpy as np; from gpulab import GpuComputePipeline; "
        "p = GpuComputePipeline(); print(p.execute(np.ones(3, np.float32)).sum())"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=False
    )
    assert (done.returncode, done.stdout.strip(), done.stderr) == (0, "6.0", "")
