"""Choosing and opening backends by name; `auto` is Vulkan when a device exists, else cpu."""

from __future__ import annotations

from collections.abc import Callable

from gpulab.backends.base import OperationExecutor
from gpulab.backends.eager import NativeExecutor, cpu_executor
from gpulab.backends.errors import BackendUnavailable
from gpulab.backends.names import BACKEND_NAMES, BACKENDS
from gpulab.placement.device_choice import DeviceChoice, choose_device, vulkan_infos


def vulkan_devices() -> list[str]:
    """The names of the Vulkan devices here (none when there is no loader or driver)."""
    return [info.name for info in vulkan_infos()]


def _no_gpu_given(choice: DeviceChoice) -> str:
    """Why a Slurm job sees no GPU when it asked for none (under ConstrainDevices it cannot
    open one); nothing outside Slurm or in a job that was given GPUs or shards."""
    if choice.slurm_job is None or choice.allocation is not None:
        return ""
    return (
        f" (Slurm job {choice.slurm_job} was given no GPU: ask with --gres=gpu:1 or "
        "gpulab submit --gpus 1)"
    )


def resolve(backend: str, choice: DeviceChoice | None = None) -> tuple[str, str]:
    """The concrete backend for `backend`, and a sentence saying why; `auto` looks at the
    device `choice` (by default the one choose_device makes)."""
    if backend not in BACKENDS:
        raise ValueError(f"unknown backend {backend!r} (choose from {', '.join(BACKENDS)})")
    if backend != "auto":
        return backend, f"{backend} was requested"
    choice = choice or choose_device(None)
    if choice.requested is not None and choice.name is None:
        # An explicit device is a request for Vulkan: running on cpu would hide the mistake.
        found = ", ".join(f"{i}: {info.name}" for i, info in enumerate(choice.infos)) or "none"
        raise BackendUnavailable(
            f"--device {choice.requested}: there is no such Vulkan device here (found: {found})"
        )
    if not choice.infos:
        return "cpu", f"auto chose cpu: no Vulkan device was found{_no_gpu_given(choice)}"
    if choice.name is None:
        return "cpu", f"auto chose cpu: there is no Vulkan device {choice.index}"
    reason = f"auto chose vulkan: device {choice.index} is {choice.name}"
    return "vulkan", reason if choice.allocation is None else f"{reason}; {choice.chosen_by}"


def auto_fallback(backend: str) -> str | None:
    """Where `auto` runs a graph that does not fit in the memory of the backend it chose:
    cpu for vulkan (None: nowhere, the error stands)."""
    return "cpu" if backend == "vulkan" else None


def open_executor(
    backend: str,
    device: int | None = None,
    memory_budget: int | None = None,
    fuse: bool = True,
    *,
    choice: Callable[[], DeviceChoice] | None = None,
) -> OperationExecutor:
    """A ready executor for a concrete backend (BackendUnavailable if it cannot run here);
    `memory_budget` caps every Vulkan memory heap at that many bytes; `fuse=False` runs every
    Vulkan node as its own dispatches. `choice` (asked only by a backend that runs on a
    Vulkan device) gives the device and what chose it, which the executor's `device` then
    reports as `chosen_by`; without it, device `device` (default 0)."""
    if backend == "cpu":
        return cpu_executor()
    if backend == "native":
        return NativeExecutor()
    if backend == "vulkan":
        # Imported here: a cpu or native run does not load the Vulkan binding and the kernels.
        from gpulab.backends.vulkan import VulkanExecutor  # noqa: PLC0415

        if choice is not None:
            chosen = choice()
            return VulkanExecutor(chosen.index, memory_budget, fuse, chosen_by=chosen.chosen_by)
        return VulkanExecutor(device or 0, memory_budget, fuse)
    raise BackendUnavailable(
        f"unknown backend {backend!r} (choose from {', '.join(BACKEND_NAMES)})"
    )
