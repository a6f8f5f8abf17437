"""Timestamp query pools: GPU-side timing of command buffer regions."""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING

from gpulab.vk._binding import vk
from gpulab.vk._handle import VkObject

if TYPE_CHECKING:
    from gpulab.vk.device import Device

_TIMESTAMP = 2  # VK_QUERY_TYPE_TIMESTAMP
_RESULT_64_WAIT = 0x1 | 0x2  # VK_QUERY_RESULT_64_BIT | VK_QUERY_RESULT_WAIT_BIT


class TimestampQueryPool(VkObject):
    """`count` timestamp queries; write them with CommandBuffer.write_timestamp()."""

    def __init__(self, device: Device, count: int) -> None:
        if device.info.timestamp_valid_bits == 0:
            raise ValueError(f"{device.info.name} does not support timestamps on its compute queue")
        info = vk.VkQueryPoolCreateInfo(queryType=_TIMESTAMP, queryCount=count)
        raw = vk.vkCreateQueryPool(device.raw, info, None)
        self._own(raw, functools.partial(vk.vkDestroyQueryPool, device.raw, raw, None), device)
        self.device = device
        self.count = count

    def results(self, first: int = 0, count: int | None = None) -> list[int]:
        """The raw tick values (waits for them), masked to the valid bits."""
        count = self.count - first if count is None else count
        data = vk.ffi.new("uint64_t[]", count)
        vk.vkGetQueryPoolResults(
            self.device.raw, self.raw, first, count, 8 * count, data, 8, _RESULT_64_WAIT
        )
        mask = (1 << self.device.info.timestamp_valid_bits) - 1
        return [int(value) & mask for value in data]

    def elapsed_ns(self, start: int, end: int) -> float:
        """Nanoseconds between two written timestamps."""
        ticks = self.results()
        return (ticks[end] - ticks[start]) * self.device.info.timestamp_period_ns
