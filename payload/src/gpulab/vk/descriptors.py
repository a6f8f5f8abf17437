"""Descriptor set layouts, pools and sets (storage buffers: what compute kernels bind)."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import TYPE_CHECKING

from gpulab.vk._binding import vk
from gpulab.vk._handle import VkObject
from gpulab.vk.errors import OutOfPoolMemory

if TYPE_CHECKING:
    from gpulab.vk.buffer import Buffer
    from gpulab.vk.device import Device

STORAGE_BUFFER = 7  # VK_DESCRIPTOR_TYPE_STORAGE_BUFFER
_COMPUTE_STAGE = 0x20  # VK_SHADER_STAGE_COMPUTE_BIT
_FREE_DESCRIPTOR_SET = 0x1  # VK_DESCRIPTOR_POOL_CREATE_FREE_DESCRIPTOR_SET_BIT


class DescriptorSetLayout(VkObject):
    """A set layout of `binding_count` storage buffers at bindings 0..n-1, for compute."""

    def __init__(self, device: Device, binding_count: int) -> None:
        bindings = [
            vk.VkDescriptorSetLayoutBinding(
                binding=i,
                descriptorType=STORAGE_BUFFER,
                descriptorCount=1,
                stageFlags=_COMPUTE_STAGE,
            )
            for i in range(binding_count)
        ]
        info = vk.VkDescriptorSetLayoutCreateInfo(bindingCount=binding_count, pBindings=bindings)
        raw = vk.vkCreateDescriptorSetLayout(device.raw, info, None)
        destroy = functools.partial(vk.vkDestroyDescriptorSetLayout, device.raw, raw, None)
        self._own(raw, destroy, device)
        self.device = device
        self.binding_count = binding_count


class DescriptorPool(VkObject):
    """A pool for `max_sets` sets of storage buffers; its sets can be freed one by one."""

    def __init__(self, device: Device, max_sets: int, storage_buffers: int) -> None:
        sizes = [vk.VkDescriptorPoolSize(type=STORAGE_BUFFER, descriptorCount=storage_buffers)]
        info = vk.VkDescriptorPoolCreateInfo(
            flags=_FREE_DESCRIPTOR_SET, maxSets=max_sets, poolSizeCount=1, pPoolSizes=sizes
        )
        raw = vk.vkCreateDescriptorPool(device.raw, info, None)
        self._own(raw, functools.partial(vk.vkDestroyDescriptorPool, device.raw, raw, None), device)
        self.device = device
        self.max_sets = max_sets

    def allocate(self, layout: DescriptorSetLayout) -> DescriptorSet:
        """One set of `layout` from this pool; OutOfPoolMemory when `max_sets` are live.

        Checked here because drivers differ: lavapipe hands out sets beyond maxSets.
        """
        live = sum(1 for ref in self._children.values() if ref() is not None)
        if live >= self.max_sets:
            raise OutOfPoolMemory(
                "vkAllocateDescriptorSets", f"the pool's {self.max_sets} sets are all in use"
            )
        return DescriptorSet(self, layout)


class DescriptorSet(VkObject):
    """A descriptor set, owned by its pool."""

    def __init__(self, pool: DescriptorPool, layout: DescriptorSetLayout) -> None:
        device = pool.device
        info = vk.VkDescriptorSetAllocateInfo(
            descriptorPool=pool.raw, descriptorSetCount=1, pSetLayouts=[layout.raw]
        )
        raw = vk.vkAllocateDescriptorSets(device.raw, info)[0]
        destroy = functools.partial(vk.vkFreeDescriptorSets, device.raw, pool.raw, 1, [raw])
        self._own(raw, destroy, pool)
        self.device = device
        self.layout = layout
        self._buffers: dict[int, Buffer] = {}

    def write_buffers(self, buffers: Sequence[tuple[Buffer, int, int]]) -> None:
        """Point bindings 0..n-1 at (buffer, byte offset, byte range) each."""
        # The buffer infos must outlive the update call: keep them in this list.
        infos = [
            vk.VkDescriptorBufferInfo(buffer=buffer.raw, offset=offset, range=size)
            for buffer, offset, size in buffers
        ]
        writes = [
            vk.VkWriteDescriptorSet(
                dstSet=self.raw,
                dstBinding=binding,
                descriptorCount=1,
                descriptorType=STORAGE_BUFFER,
                pBufferInfo=[info],
            )
            for binding, info in enumerate(infos)
        ]
        vk.vkUpdateDescriptorSets(self.device.raw, len(writes), writes, 0, None)
        # The set refers to these buffers now: keep them alive as long as it.
        self._buffers = {i: buffer for i, (buffer, _, _) in enumerate(buffers)}
