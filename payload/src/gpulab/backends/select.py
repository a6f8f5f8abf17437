"""Choosing and opening backends by name; `auto` is Vulkan when a device exists, else cpu."""

from __future__ import annotations

from gpulab.backends.base import BackendUnavailable, OperationExecutor
from gpulab.backends.eager import NativeExecutor, cpu_executor
from gpulab.backends.vulkan import VulkanExecutor
from gpulab.vk import VulkanError, shared_instance

BACKENDS = ("auto", "cpu", "native", "vulkan")


def vulkan_devices() -> list[str]:
    """The names of the Vulkan devices here (none when there is no loader or driver)."""
    try:
        return [device.info.name for device in shared_instance().physical_devices()]
    except (VulkanError, OSError):
        return []


def resolve(backend: str, device: int | None) -> tuple[str, str]:
    """The concrete backend for `backend`, and a sentence saying why."""
    if backend not in BACKENDS:
        raise ValueError(f"unknown backend {backend!r} (choose from {', '.join(BACKENDS)})")
    if backend != "auto":
        return backend, f"{backend} was requested"
    names = vulkan_devices()
    if not names:
        return "cpu", "auto chose cpu: no Vulkan device was found"
    index = device or 0
    if index >= len(names):
        return "cpu", f"auto chose cpu: there is no Vulkan device {index}"
    return "vulkan", f"auto chose vulkan: device {index} is {names[index]}"


def open_executor(
    backend: str, device: int | None = None, memory_budget: int | None = None
) -> OperationExecutor:
    """A ready executor for a concrete backend (BackendUnavailable if it cannot run here);
    `memory_budget` caps every Vulkan memory heap at that many bytes."""
    if backend == "cpu":
        return cpu_executor()
    if backend == "native":
        return NativeExecutor()
    if backend == "vulkan":
        return VulkanExecutor(device or 0, memory_budget)
    raise BackendUnavailable(f"unknown backend {backend!r} (choose from cpu, native, vulkan)")
