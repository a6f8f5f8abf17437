"""The staging types' warm-up on a real device (lavapipe here): it allocates, maps and frees
one small block of each staging kind's best type, and leaves nothing behind."""

from __future__ import annotations

import pytest
from gpulab.memory.memory_types import STAGING_KINDS, candidate_types, warm_up_staging_types
from gpulab.vk import Device
from gpulab.vk import memory as vk_memory


def test_the_warm_up_allocates_each_staging_type_once_and_frees_it(
    device: Device, monkeypatch: pytest.MonkeyPatch
) -> None:
    made: list[vk_memory.DeviceMemory] = []
    real = vk_memory.DeviceMemory.map

    def mapped(memory: vk_memory.DeviceMemory) -> object:
        made.append(memory)
        return real(memory)

    monkeypatch.setattr(vk_memory.DeviceMemory, "map", mapped)
    warm_up_staging_types(device)
    best = {candidate_types(device.info.memory_types, k, ~0)[0].index for k in STAGING_KINDS}
    assert sorted(m.memory_type.index for m in made) == sorted(best)
    assert all(m.closed for m in made)  # the device fixture also checks for leaked handles
