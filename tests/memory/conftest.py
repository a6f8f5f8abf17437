"""Fixtures for the memory tests: a real device (lavapipe here), checked for leaked handles,
device memory that the host cannot map as on a discrete GPU, and the validation net
(tests/vulkan_validation.py)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from gpulab.memory import Allocation
from gpulab.vk import Device, Instance, live_handles, shared_instance

from tests.vulkan_validation import vulkan_validation, vulkan_validation_log

__all__ = [
    "device",
    "process_instance",
    "unmappable_device_memory",
    "vulkan_validation",
    "vulkan_validation_log",
]


@pytest.fixture(scope="session")
def process_instance() -> Instance:
    created = shared_instance()
    created.physical_devices()
    return created


@pytest.fixture
def device(process_instance: Instance) -> Iterator[Device]:
    """Device 0; every Vulkan object made in the test must be gone at its end."""
    before = live_handles()
    with Device(process_instance.physical_device(0)) as created:
        yield created
        leaked = {k: v for k, v in live_handles().items() if k not in {"Device"}}
        assert leaked == {k: v for k, v in before.items() if k != "Device"}, "leaked handles"


@pytest.fixture
def unmappable_device_memory(monkeypatch: pytest.MonkeyPatch) -> None:
    """Allocations of kind "device" report memory that the host cannot map, as plain VRAM on a
    discrete GPU does (lavapipe's one memory type is mappable): their view() refuses, and the
    Stager must move them with the copy engine. The other kinds keep their own memory type."""
    mappable = Allocation.host_visible.fget
    assert mappable is not None
    monkeypatch.setattr(
        Allocation, "host_visible", property(lambda a: a.kind != "device" and mappable(a))
    )
