"""The graph tests' fixtures: the validation net (tests/vulkan_validation.py), which also reads
the messages of the `gpulab` processes the tests start."""

from __future__ import annotations

from tests.vulkan_validation import vulkan_validation, vulkan_validation_log

__all__ = ["vulkan_validation", "vulkan_validation_log"]
