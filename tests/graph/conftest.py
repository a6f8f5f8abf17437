"""The graph tests' fixtures: the validation net (tests/vulkan_validation.py), which also reads
the messages of the `gpulab` processes the tests start; and `compiler_calls`."""

from __future__ import annotations

import subprocess
from typing import Any

import pytest

from tests.vulkan_validation import vulkan_validation, vulkan_validation_log

__all__ = ["compiler_calls", "vulkan_validation", "vulkan_validation_log"]


@pytest.fixture
def compiler_calls(monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    """The argv of every process this test starts through subprocess.run (the GLSL
    compiler's, in the tests that use it), in order; the processes still run."""
    calls: list[list[str]] = []
    real = subprocess.run

    def counting(argv: list[str], **kwargs: Any) -> Any:
        calls.append(argv)
        return real(argv, **kwargs)

    monkeypatch.setattr(subprocess, "run", counting)
    return calls
