"""Fixtures for the kernel tests: a real lavapipe device, and a leak check around every test."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from gpulab.kernels import Kernels
from gpulab.vk import Device, Instance, live_handles, shared_instance


@pytest.fixture(scope="session", autouse=True)
def process_instance() -> Instance:
    """The process-wide instance, made before the first test so that it is in every baseline."""
    created = shared_instance()
    created.physical_devices()
    return created


@pytest.fixture(autouse=True)
def no_leaked_handles(process_instance: Instance) -> Iterator[None]:
    """Every Vulkan object a test creates is gone when it ends (the instance stays)."""
    before = live_handles()
    assert set(before) <= {"Instance", "PhysicalDevice"}
    yield
    assert live_handles() == before


@pytest.fixture
def device(process_instance: Instance) -> Iterator[Device]:
    with Device(process_instance.physical_device(0)) as created:
        yield created


@pytest.fixture
def kernels(device: Device) -> Iterator[Kernels]:
    with Kernels(device) as created:
        yield created
