"""The one place that imports the PyPI `vulkan` binding, with its pitfalls handled once.

Everything else reaches Vulkan through `vk` (functions whose failures become typed
`VulkanError`s naming the call, plus the binding's constants and struct constructors) and `ffi`.

Pitfalls of the binding handled here or by the helpers below:
- a missing loader makes `import vulkan` raise OSError: it becomes `NoVulkanDevice` on first use;
- `VK_WHOLE_SIZE` is -1 in the binding and overflows 64-bit fields: callers pass sizes;
- `pCode` must be bytes: `shader_code()` converts whatever buffer it is given;
- nested create-info structs must stay referenced until the create call returns: callers keep
  them in local variables (the binding keeps the inner pointers alive only through them);
- extension functions come from `vkGetInstanceProcAddr` and `vkGetDeviceProcAddr`:
  `instance_function()`, `device_function()`;
- the binding allocates a call's output struct itself when none is given, with sType 0: pass
  one whose sType is set (the validation layer reports VUID-...-sType-sType otherwise).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from gpulab.vk.errors import NoVulkanDevice, UnknownVulkanError, VulkanError, error_for_result

try:
    import vulkan as _vulkan
except OSError as exc:  # the binding dlopens libvulkan.so.1 at import time
    _vulkan = None
    _LOAD_ERROR = f"the Vulkan loader (libvulkan.so.1) could not be loaded ({exc})"
else:
    _LOAD_ERROR = ""


def _result_codes() -> dict[type, int]:
    if _vulkan is None:
        return {}
    return {cls: code for code, cls in _vulkan.exception_codes.items() if code is not None}


_RESULT_CODES = _result_codes()


def _checked(name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    """Wrap a binding function so that a failing VkResult raises our typed error naming it."""
    binding_errors = (_vulkan.VkError, _vulkan.VkException) if _vulkan else ()

    def call(*args: Any) -> Any:
        try:
            return fn(*args)
        except binding_errors as exc:
            cls = exc if isinstance(exc, type) else type(exc)
            code = _RESULT_CODES.get(cls)
            if code is None:
                raise UnknownVulkanError(name, cls.__name__) from None
            raise error_for_result(name, code) from None

    call.__name__ = name
    return call


class _Vulkan:
    """The binding's namespace: `vk*` functions come back checked, everything else as is.

    Looked-up names are cached as attributes, so each costs one lookup per process.
    """

    def __getattr__(self, name: str) -> Any:
        if _vulkan is None:
            raise NoVulkanDevice("vulkan import", _LOAD_ERROR)
        value = getattr(_vulkan, name)
        if name.startswith("vk") and callable(value):
            value = _checked(name, value)
        setattr(self, name, value)
        return value


vk: Any = _Vulkan()


def raw_lib() -> Any:
    """The loader library itself, for hot paths that skip the binding's per-call conversion."""
    return vk.lib


def check(call: str, result: int) -> None:
    """Raise the typed error for a failing `result` of a raw_lib call."""
    if result != 0:
        raise error_for_result(call, result)


def shader_code(spirv: bytes | bytearray | memoryview) -> bytes:
    """SPIR-V as the `bytes` that pCode needs, checked for size and magic number."""
    code = bytes(spirv)
    if len(code) % 4 or len(code) < 20 or code[:4] != b"\x03\x02\x23\x07":
        raise VulkanError("vkCreateShaderModule", "the code is not little-endian SPIR-V")
    return code


def instance_function(instance: Any, name: str) -> Callable[..., Any]:
    """An instance-level extension function, checked like the core ones."""
    try:
        fn = vk.vkGetInstanceProcAddr(instance, name)
    except (_vulkan.ProcedureNotFoundError, _vulkan.ExtensionNotSupportedError):
        raise VulkanError("vkGetInstanceProcAddr", f"{name} is not available") from None
    return _checked(name, fn)


def device_function(device: Any, name: str) -> Callable[..., Any]:
    """A device-level extension function, checked like the core ones."""
    try:
        fn = vk.vkGetDeviceProcAddr(device, name)
    except (_vulkan.ProcedureNotFoundError, _vulkan.ExtensionNotSupportedError):
        raise VulkanError("vkGetDeviceProcAddr", f"{name} is not available") from None
    return _checked(name, fn)


def decode_version(version: int) -> str:
    """A packed Vulkan version as 'major.minor.patch'."""
    return f"{(version >> 22) & 0x7F}.{(version >> 12) & 0x3FF}.{version & 0xFFF}"
