"""The explicit layer used directly: copies, barriers, timestamps, caches, specialization."""

from __future__ import annotations

import numpy as np
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
    NotReady,
    ObjectClosedError,
    OutOfPoolMemory,
    PipelineCache,
    PipelineLayout,
    ShaderModule,
    TimestampQueryPool,
    pack_push_constants,
)
from gpulab.vk.buffer import STORAGE, TRANSFER_DST, TRANSFER_SRC
from gpulab.vk.commands import UPDATE_LIMIT


def _host_buffer(device: Device, size: int, usage: int) -> tuple[Buffer, DeviceMemory]:
    buffer = Buffer(device, size, usage)
    memory = DeviceMemory(device, buffer.required_size, buffer.memory_type_bits, required=0x6)
    buffer.bind(memory)
    return buffer, memory


def test_copy_with_barrier_and_timestamps(device: Device) -> None:
    source, source_memory = _host_buffer(device, 4096, TRANSFER_SRC)
    target, target_memory = _host_buffer(device, 4096, TRANSFER_DST)
    data = np.arange(1024, dtype=np.float32)
    source_memory.write(data)
    queries = TimestampQueryPool(device, 2)
    command = CommandPool(device).allocate()
    command.begin()
    command.reset_queries(queries)
    command.write_timestamp(queries, 0)
    command.copy_buffer(source, target, 4096)
    command.barrier("transfer", "host")
    command.write_timestamp(queries, 1)
    command.end()
    with Fence(device) as fence:
        for _ in range(2):  # one recording, submitted twice
            device.submit(command, fence)
            fence.wait()
            fence.reset()
    np.testing.assert_array_equal(target_memory.read(np.float32, 1024), data)
    assert queries.elapsed_ns(0, 1) >= 0
    device.close()


def test_update_buffer_writes_inline_and_refuses_what_vulkan_does(device: Device) -> None:
    target, target_memory = _host_buffer(device, 4096, TRANSFER_DST)
    data = np.arange(8, dtype=np.float32)
    command = CommandPool(device).allocate()
    command.begin()
    command.update_buffer(target, data.tobytes(), offset=16)
    for bad in (b"", b"abc", bytes(UPDATE_LIMIT + 4)):
        with pytest.raises(ValueError, match="vkCmdUpdateBuffer takes 4 to 65536 bytes"):
            command.update_buffer(target, bad)
    with pytest.raises(ValueError, match="at 2"):
        command.update_buffer(target, bytes(4), offset=2)
    command.barrier("transfer", "host")
    command.end()
    with Fence(device) as fence:
        device.submit(command, fence)
        fence.wait()
    np.testing.assert_array_equal(target_memory.read(np.float32, 12)[4:], data)
    device.close()


def test_specialization_constants_and_pipeline_cache(device: Device) -> None:
    layout = DescriptorSetLayout(device, 2)
    pipeline_layout = PipelineLayout(device, [layout], push_constant_bytes=4)
    shader = ShaderModule.packaged(device, "times_two")
    cache = PipelineCache(device)
    ComputePipeline(device, pipeline_layout, shader, specialization={0: 32}, cache=cache)
    data = cache.data()
    assert len(data) > 0
    seeded = PipelineCache(device, initial_data=data)
    pipeline = ComputePipeline(
        device, pipeline_layout, shader, specialization={0: 32}, cache=seeded
    )

    buffer_in, memory_in = _host_buffer(device, 400, STORAGE)
    buffer_out, memory_out = _host_buffer(device, 400, STORAGE)
    memory_in.write(np.arange(100, dtype=np.float32))
    descriptor_set = DescriptorPool(device, 1, 2).allocate(layout)
    descriptor_set.write_buffers([(buffer_in, 0, 400), (buffer_out, 0, 400)])
    command = CommandPool(device).allocate()
    command.begin()
    command.bind_pipeline(pipeline)
    command.bind_descriptor_sets(pipeline_layout, [descriptor_set])
    command.push_constants(pipeline_layout, pack_push_constants(100))
    command.dispatch(2)  # 64 invocations, a grid-stride loop over 100 values
    command.barrier("compute", "host")
    command.end()
    with Fence(device) as fence:
        device.submit(command, fence)
        fence.wait()
    np.testing.assert_array_equal(
        memory_out.read(np.float32, 100), 2 * np.arange(100, dtype=np.float32)
    )


def test_an_unsignaled_fence_times_out(device: Device) -> None:
    with Fence(device) as fence:
        assert not fence.signaled
        with pytest.raises(NotReady, match="vkWaitForFences"):
            fence.wait(timeout_ns=1000)
    with Fence(device, signaled=True) as fence:
        assert fence.signaled
        fence.wait()


def test_an_exhausted_descriptor_pool_raises(device: Device) -> None:
    layout = DescriptorSetLayout(device, 1)
    pool = DescriptorPool(device, 1, 1)
    first = pool.allocate(layout)
    with pytest.raises(OutOfPoolMemory, match="vkAllocateDescriptorSets"):
        pool.allocate(layout)
    first.close()
    assert not pool.allocate(layout).closed  # a freed set makes room again


def test_push_constants_beyond_the_limit_are_refused(device: Device) -> None:
    with pytest.raises(ValueError, match="push constants"):
        PipelineLayout(device, [], push_constant_bytes=device.info.max_push_constants_size + 4)


def test_submit_without_a_fence_then_wait_idle(device: Device) -> None:
    command = CommandPool(device).allocate()
    command.begin()
    command.end()
    device.submit(command)
    device.wait_idle()


def test_submitting_an_unrecorded_command_buffer_is_refused(device: Device) -> None:
    command = CommandPool(device).allocate()
    with pytest.raises(ValueError, match="no finished recording"):
        device.submit(command)


def test_a_closed_layout_or_pool_allocates_no_set(device: Device) -> None:
    """The pool builds its allocate info once per layout; a closed layout or pool is still
    refused."""
    layout = DescriptorSetLayout(device, 1)
    pool = DescriptorPool(device, 4, 4)
    assert not pool.allocate(layout).closed
    layout.close()
    with pytest.raises(ObjectClosedError):
        pool.allocate(layout)
    pool.close()
    with pytest.raises(ObjectClosedError):
        pool.allocate(DescriptorSetLayout(device, 1))
