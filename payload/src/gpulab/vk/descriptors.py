"""Descriptor set layouts, pools and sets (storage buffers: what compute kernels bind)."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from gpulab.vk._binding import check, raw_lib, vk
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
        # Per set layout, the allocate info (and the layout array it points at), built once.
        self._allocate_infos: dict[DescriptorSetLayout, tuple[Any, Any]] = {}

    @property
    def full(self) -> bool:
        """Whether `max_sets` sets of this pool are live (dead ones drop out of the children)."""
        return len(self._children) >= self.max_sets

    def allocate(self, layout: DescriptorSetLayout) -> DescriptorSet:
        """One set of `layout` from this pool; OutOfPoolMemory when `max_sets` are live.

        Checked here because drivers differ: lavapipe hands out sets beyond maxSets.
        """
        if self.full:
            raise OutOfPoolMemory(
                "vkAllocateDescriptorSets", f"the pool's {self.max_sets} sets are all in use"
            )
        return DescriptorSet(self, layout)

    def _allocate_info(self, layout: DescriptorSetLayout) -> Any:
        found = self._allocate_infos.get(layout)
        if found is None:
            layouts = vk.ffi.new("VkDescriptorSetLayout[1]", [layout.raw])
            info = vk.ffi.new(
                "VkDescriptorSetAllocateInfo*",
                {
                    "sType": vk.VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO,
                    "descriptorPool": self.raw,
                    "descriptorSetCount": 1,
                    "pSetLayouts": layouts,
                },
            )
            found = self._allocate_infos[layout] = (info, layouts)
        return found[0]


class DescriptorSet(VkObject):
    """A descriptor set, owned by its pool."""

    def __init__(self, pool: DescriptorPool, layout: DescriptorSetLayout) -> None:
        device = pool.device
        lib = raw_lib()
        array = vk.ffi.new("VkDescriptorSet[1]")
        # ObjectClosedError for a closed pool or layout (the cached info would not notice).
        raw_device, raw_pool, _ = device.raw, pool.raw, layout.raw
        info = pool._allocate_info(layout)
        check("vkAllocateDescriptorSets", lib.vkAllocateDescriptorSets(raw_device, info, array))
        # Freed through the loader directly, with the array the handle already sits in.
        destroy = functools.partial(lib.vkFreeDescriptorSets, raw_device, raw_pool, 1, array)
        self._own(array[0], destroy, pool)
        self._array = array
        self._lib = lib
        self.device = device
        self.layout = layout
        self._buffers: tuple[Buffer, ...] = ()

    @property
    def raw_array(self) -> Any:
        """The handle as a one-element VkDescriptorSet array (what binding calls take)."""
        _ = self.raw
        return self._array

    def write_buffers(self, buffers: Sequence[tuple[Buffer, int, int]]) -> None:
        """Point bindings 0..n-1 at (buffer, byte offset, byte range) each."""
        ffi = vk.ffi
        count = len(buffers)
        if count == 0:
            return
        infos = ffi.new(
            "VkDescriptorBufferInfo[]", [(b.raw, offset, size) for b, offset, size in buffers]
        )
        # One write for all: an update of more descriptors than binding 0 holds continues in
        # bindings 1, 2, ... (all alike here: one storage buffer each, for compute).
        write = ffi.new("VkWriteDescriptorSet*")
        write.sType = vk.VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET
        write.dstSet, write.descriptorCount, write.descriptorType = self.raw, count, STORAGE_BUFFER
        write.pBufferInfo = infos
        self._lib.vkUpdateDescriptorSets(self.device.raw, 1, write, 0, ffi.NULL)
        # The set refers to these buffers now: keep them alive as long as it.
        self._buffers = tuple(buffer for buffer, _, _ in buffers)
