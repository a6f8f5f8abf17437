"""Fixtures for the kernel tests: a real lavapipe device, and a leak check around every test."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from gpulab.kernels import Kernels
from gpulab.vk import Device

from tests.vulkan_fixtures import device, no_leaked_handles, process_instance

__all__ = ["device", "kernels", "no_leaked_handles", "process_instance"]


@pytest.fixture
def kernels(device: Device) -> Iterator[Kernels]:
    with Kernels(device) as created:
        yield created
