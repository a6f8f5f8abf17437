"""vkCreateInstance through ctypes, before the Vulkan binding is imported.

The NVIDIA driver spends some 80 ms in vkCreateInstance (loading its libraries, starting
itself) and the binding takes 20-30 ms to import (cffi and the binding's declarations). A
`gpulab run` starts the driver on a second thread from the bare command line
(gpulab.running.early); through this module that thread enters vkCreateInstance at once, while
the main thread imports the binding beside it, instead of after that import. The instance is
the one Instance would create without validation (same application info, no layers, no
extensions); gpulab.vk.instance adopts its handle. Anything unexpected (no loader, a failing
driver) gives None and leaves the instance to Instance, which reports it in its own words.
"""

from __future__ import annotations

import ctypes
import os

from gpulab._version import __version__

VALIDATION_ENV = "GPULAB_VK_VALIDATION"


def make_version(major: int, minor: int, patch: int = 0) -> int:
    """A packed Vulkan version (defined here, where no binding is imported: the instance's
    versions are packed before it loads; gpulab.vk._binding.decode_version reads one)."""
    return (major << 22) | (minor << 12) | patch


API_VERSION = make_version(1, 2)
"""The version we ask for; 1.1 gives subgroup properties, 1.2 driver properties."""
GPULAB_VERSION = make_version(*map(int, __version__.split(".")[:3]))
"""gpulab's version, packed: the application's and the engine's."""
_SUCCESS = 0
_APPLICATION_INFO = 0  # VK_STRUCTURE_TYPE_APPLICATION_INFO
_INSTANCE_CREATE_INFO = 1  # VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO


def validation_requested() -> bool:
    """Whether GPULAB_VK_VALIDATION asks for the validation layer (gpulab.vk.instance)."""
    return os.environ.get(VALIDATION_ENV, "").strip().lower() in {"1", "true", "yes", "on"}


class _ApplicationInfo(ctypes.Structure):
    _fields_ = (
        ("sType", ctypes.c_uint32),
        ("pNext", ctypes.c_void_p),
        ("pApplicationName", ctypes.c_char_p),
        ("applicationVersion", ctypes.c_uint32),
        ("pEngineName", ctypes.c_char_p),
        ("engineVersion", ctypes.c_uint32),
        ("apiVersion", ctypes.c_uint32),
    )


class _InstanceCreateInfo(ctypes.Structure):
    _fields_ = (
        ("sType", ctypes.c_uint32),
        ("pNext", ctypes.c_void_p),
        ("flags", ctypes.c_uint32),
        ("pApplicationInfo", ctypes.POINTER(_ApplicationInfo)),
        ("enabledLayerCount", ctypes.c_uint32),
        ("ppEnabledLayerNames", ctypes.c_void_p),
        ("enabledExtensionCount", ctypes.c_uint32),
        ("ppEnabledExtensionNames", ctypes.c_void_p),
    )


def create_instance(app_name: str) -> int | None:
    """The handle of a new VkInstance, as Instance(app_name, validation=False) makes it, or
    None when the loader is missing or the call fails. The caller owns it."""
    try:
        loader = ctypes.CDLL("libvulkan.so.1")
    except OSError:
        return None
    create = loader.vkCreateInstance
    create.restype = ctypes.c_int32
    create.argtypes = (
        ctypes.POINTER(_InstanceCreateInfo),
        ctypes.c_void_p,
        ctypes.POINTER(ctypes.c_void_p),
    )
    app = _ApplicationInfo(
        sType=_APPLICATION_INFO,
        pApplicationName=app_name.encode(),
        applicationVersion=GPULAB_VERSION,
        pEngineName=b"gpulab",
        engineVersion=GPULAB_VERSION,
        apiVersion=API_VERSION,
    )
    info = _InstanceCreateInfo(sType=_INSTANCE_CREATE_INFO, pApplicationInfo=ctypes.pointer(app))
    handle = ctypes.c_void_p()
    if create(ctypes.byref(info), None, ctypes.byref(handle)) != _SUCCESS or not handle.value:
        return None
    return handle.value
