"""Pipeline layouts with push constants, compute pipelines with specialization, pipeline caches."""

from __future__ import annotations

import functools
import struct
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from gpulab.vk._binding import vk
from gpulab.vk._handle import VkObject

if TYPE_CHECKING:
    from gpulab.vk.descriptors import DescriptorSetLayout
    from gpulab.vk.device import Device
    from gpulab.vk.shader import ShaderModule

_COMPUTE_STAGE = 0x20  # VK_SHADER_STAGE_COMPUTE_BIT


class PipelineLayout(VkObject):
    """A pipeline layout: descriptor set layouts plus `push_constant_bytes` of push constants."""

    def __init__(
        self,
        device: Device,
        set_layouts: Sequence[DescriptorSetLayout],
        push_constant_bytes: int = 0,
    ) -> None:
        limit = device.info.max_push_constants_size
        if push_constant_bytes % 4 or push_constant_bytes > limit:
            raise ValueError(
                f"push constants must be a multiple of 4 bytes and at most {limit}, "
                f"got {push_constant_bytes}"
            )
        ranges = (
            [vk.VkPushConstantRange(stageFlags=_COMPUTE_STAGE, offset=0, size=push_constant_bytes)]
            if push_constant_bytes
            else None
        )
        raw_layouts = [layout.raw for layout in set_layouts]
        info = vk.VkPipelineLayoutCreateInfo(
            setLayoutCount=len(raw_layouts),
            pSetLayouts=raw_layouts or None,
            pushConstantRangeCount=len(ranges or ()),
            pPushConstantRanges=ranges,
        )
        raw = vk.vkCreatePipelineLayout(device.raw, info, None)
        self._own(raw, functools.partial(vk.vkDestroyPipelineLayout, device.raw, raw, None), device)
        self.device = device
        self.set_layouts = tuple(set_layouts)
        self.push_constant_bytes = push_constant_bytes


class PipelineCache(VkObject):
    """A VkPipelineCache, optionally seeded with data from an earlier `data()`."""

    def __init__(self, device: Device, initial_data: bytes = b"") -> None:
        seed = vk.ffi.from_buffer(initial_data) if initial_data else None
        info = vk.VkPipelineCacheCreateInfo(initialDataSize=len(initial_data), pInitialData=seed)
        raw = vk.vkCreatePipelineCache(device.raw, info, None)
        self._own(raw, functools.partial(vk.vkDestroyPipelineCache, device.raw, raw, None), device)
        self.device = device

    def data(self) -> bytes:
        """The cache's contents, to save and seed a later cache with."""
        ffi = vk.ffi
        size = ffi.new("size_t*")
        lib = vk.lib
        lib.vkGetPipelineCacheData(self.device.raw, self.raw, size, ffi.NULL)
        out = ffi.new("char[]", size[0])
        lib.vkGetPipelineCacheData(self.device.raw, self.raw, size, out)
        return bytes(ffi.buffer(out, size[0]))


def _specialization_data(constants: Mapping[int, int | float | bool]) -> bytes:
    """Each constant as 4 bytes, in constant-id order: floats as float32, the rest as uint32."""
    packed = b""
    for _, value in sorted(constants.items()):
        packed += (
            struct.pack("<f", value)
            if isinstance(value, float)
            else struct.pack("<I", int(value) & 0xFFFFFFFF)
        )
    return packed


class ComputePipeline(VkObject):
    """A compute pipeline of one shader entry point, with specialization constants by id."""

    def __init__(
        self,
        device: Device,
        layout: PipelineLayout,
        shader: ShaderModule,
        *,
        entry_point: str = "main",
        specialization: Mapping[int, int | float | bool] | None = None,
        cache: PipelineCache | None = None,
    ) -> None:
        # Every nested struct below stays in a local until vkCreateComputePipelines returns.
        constants = dict(specialization or {})
        data = _specialization_data(constants)
        data_pointer = vk.ffi.from_buffer(data) if data else None
        entries = [
            vk.VkSpecializationMapEntry(constantID=constant_id, offset=4 * i, size=4)
            for i, constant_id in enumerate(sorted(constants))
        ]
        spec_info: Any = (
            vk.VkSpecializationInfo(
                mapEntryCount=len(entries),
                pMapEntries=entries,
                dataSize=len(data),
                pData=data_pointer,
            )
            if constants
            else None
        )
        stage = vk.VkPipelineShaderStageCreateInfo(
            stage=_COMPUTE_STAGE,
            module=shader.raw,
            pName=entry_point,
            pSpecializationInfo=spec_info,
        )
        info = vk.VkComputePipelineCreateInfo(stage=stage, layout=layout.raw)
        raw_cache = vk.VK_NULL_HANDLE if cache is None else cache.raw
        raw = vk.vkCreateComputePipelines(device.raw, raw_cache, 1, [info], None)[0]
        self._own(raw, functools.partial(vk.vkDestroyPipeline, device.raw, raw, None), device)
        self.device = device
        self.layout = layout
        self.specialization = constants
