"""Fixtures for the memory tests: a real lavapipe device, checked for leaked handles, and the
validation net (tests/vulkan_validation.py)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from gpulab.vk import Device, Instance, live_handles, shared_instance

from tests.vulkan_validation import vulkan_validation, vulkan_validation_log

__all__ = ["device", "process_instance", "vulkan_validation", "vulkan_validation_log"]


@pytest.fixture(scope="session")
def process_instance() -> Instance:
    created = shared_instance()
    created.physical_devices()
    return created


@pytest.fixture
def device(process_instance: Instance) -> Iterator[Device]:
    """A lavapipe device; every Vulkan object made in the test must be gone at its end."""
    before = live_handles()
    with Device(process_instance.physical_device(0)) as created:
        yield created
        leaked = {k: v for k, v in live_handles().items() if k not in {"Device"}}
        assert leaked == {k: v for k, v in before.items() if k != "Device"}, "leaked handles"
