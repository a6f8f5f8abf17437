"""Fixtures shared by the suites that run on a real Vulkan device (lavapipe here).

A suite's conftest imports them by name; pytest then treats them as the suite's own.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from gpulab.vk import Device, Instance, live_handles, shared_instance


@pytest.fixture(scope="session", autouse=True)
def process_instance() -> Instance:
    """The process-wide instance, made before the first test so that it is in every baseline."""
    created = shared_instance()
    created.physical_devices()
    return created


@pytest.fixture(autouse=True)
def no_leaked_handles(process_instance: Instance) -> Iterator[None]:
    """Every Vulkan object a test creates is gone when it ends.

    The baseline is the shared instance and its physical devices (alive for the whole process).
    Compared with the count at the start, so that one failing test (whose traceback keeps its
    objects alive) is reported once instead of failing every test after it.
    """
    before = live_handles()
    assert set(before) <= {"Instance", "PhysicalDevice"}
    yield
    assert live_handles() == before


@pytest.fixture
def device(process_instance: Instance) -> Iterator[Device]:
    """A logical device on the first physical device, closed after the test."""
    with Device(process_instance.physical_device(0)) as created:
        yield created
