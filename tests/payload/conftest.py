"""Fixtures for the payload tests: a real lavapipe device, and a leak check around every test."""

from __future__ import annotations

import pytest
from gpulab.vk import Instance, shared_instance

from tests.vulkan_fixtures import device, no_leaked_handles, process_instance

__all__ = ["device", "instance", "no_leaked_handles", "process_instance"]


@pytest.fixture
def instance() -> Instance:
    return shared_instance()
