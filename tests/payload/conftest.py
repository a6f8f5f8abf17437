"""Fixtures for the payload tests: a real lavapipe device, and a leak check around every test."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from gpulab.vk import Device, Instance, live_handles


@pytest.fixture(autouse=True)
def no_leaked_handles() -> Iterator[None]:
    """Every Vulkan object a test creates is gone when it ends."""
    assert live_handles() == {}, "a previous test leaked Vulkan objects"
    yield
    assert live_handles() == {}


@pytest.fixture
def instance() -> Iterator[Instance]:
    with Instance() as created:
        yield created


@pytest.fixture
def device(instance: Instance) -> Iterator[Device]:
    with Device(instance.physical_device(0)) as created:
        yield created
