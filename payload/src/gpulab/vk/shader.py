"""Shader modules from SPIR-V, and the SPIR-V shipped with the package."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import TYPE_CHECKING

from gpulab.vk._binding import shader_code, vk
from gpulab.vk._handle import VkObject

if TYPE_CHECKING:
    from gpulab.vk.device import Device


SHADERS_DIR = Path(__file__).parent.parent / "shaders"
"""gpulab's shaders, their GLSL and committed SPIR-V: a folder beside the modules (gpulab is
never imported from a zip: its native libraries could not load), found without
importlib.resources, whose import brings tempfile and shutil to every run."""


def packaged_spirv(name: str) -> bytes:
    """The committed SPIR-V of a shader in gpulab/shaders, by name without extension."""
    return (SHADERS_DIR / f"{name}.spv").read_bytes()


class ShaderModule(VkObject):
    """A VkShaderModule."""

    def __init__(self, device: Device, spirv: bytes) -> None:
        code = shader_code(spirv)
        info = vk.VkShaderModuleCreateInfo(codeSize=len(code), pCode=code)
        raw = vk.vkCreateShaderModule(device.raw, info, None)
        self._own(raw, functools.partial(vk.vkDestroyShaderModule, device.raw, raw, None), device)
        self.device = device

    @classmethod
    def packaged(cls, device: Device, name: str) -> ShaderModule:
        """A module from the package's committed SPIR-V."""
        return cls(device, packaged_spirv(name))
