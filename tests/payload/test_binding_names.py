"""Every name gpulab takes from the PyPI `vulkan` binding exists in the installed binding.

pyproject.toml pins the binding to the releases that have them all: 1.3.275.0, for one, lacks
vkGetPhysicalDeviceProperties2 and vkGetPhysicalDeviceMemoryProperties2, and gpulab failed on its
first device query. Run this test against a candidate release before widening the pin."""

from __future__ import annotations

import re
from pathlib import Path

import gpulab
import pytest

SOURCE = Path(gpulab.__file__).resolve().parent
# `vk.vkCreateBuffer`, `vk.VkBufferCreateInfo`, `vk.VK_WHOLE_SIZE`: the binding through vk.
NAME = re.compile(r"\bvk\.((?:vk|Vk|VK_)\w+)")


def _names() -> set[str]:
    return {name for path in SOURCE.rglob("*.py") for name in NAME.findall(path.read_text())}


def test_every_binding_name_gpulab_uses_exists() -> None:
    try:
        import vulkan  # noqa: PLC0415 - dlopens the loader: only here
    except OSError as exc:
        pytest.skip(f"no Vulkan loader: {exc}")
    names = _names()
    assert len(names) > 50, "the scan finds too little"
    assert sorted(name for name in names if not hasattr(vulkan, name)) == []
