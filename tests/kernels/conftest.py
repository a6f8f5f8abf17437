"""Fixtures for the kernel tests: a real lavapipe device, a leak check around every test, and
the validation net (tests/vulkan_validation.py)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from gpulab.kernels import Kernels
from gpulab.vk import Device

from tests.vulkan_fixtures import device, no_leaked_handles, process_instance
from tests.vulkan_validation import vulkan_validation, vulkan_validation_log

__all__ = [
    "device",
    "kernels",
    "no_leaked_handles",
    "process_instance",
    "vulkan_validation",
    "vulkan_validation_log",
]


@pytest.fixture
def kernels(device: Device) -> Iterator[Kernels]:
    with Kernels(device) as created:
        yield created
