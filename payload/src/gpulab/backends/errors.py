"""The backends' errors, and which failures of the layers below map to which exit code.

This module imports no layer below: the CLI catches through it without loading Vulkan, the
memory layer or the kernels. An exception class of a module never imported cannot have been
raised, so the lists below name only the classes of modules already loaded.
"""

from __future__ import annotations

import sys


class BackendUnavailable(RuntimeError):
    """The requested backend or device cannot run here (exit 3)."""


class ExecutionFailed(RuntimeError):
    """A backend failed while running (device out of memory, device lost; exit 4)."""


ErrorTypes = tuple[type[BaseException], ...]


def _loaded(module: str, *names: str) -> ErrorTypes:
    loaded = sys.modules.get(module)
    return tuple(getattr(loaded, name) for name in names) if loaded is not None else ()


def unavailable_errors() -> ErrorTypes:
    """What means "cannot run here" (exit 3): check these before failed_errors()."""
    return (BackendUnavailable, *_loaded("gpulab.vk.errors", "NoVulkanDevice"))


def failed_errors() -> ErrorTypes:
    """What means "the run failed" (exit 4): device errors and exhausted memory."""
    return (ExecutionFailed, MemoryError, *_loaded("gpulab.vk.errors", "VulkanError"))
