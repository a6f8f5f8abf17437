"""The Vulkan instance: application info, optional validation, physical device enumeration.

Validation (GPULAB_VK_VALIDATION=1) turns on the Khronos layer with its synchronization
validation (missing or too weak barriers: hazards lavapipe forgives and NVIDIA's and Jetson's
GPUs do not). Its messages go to the `gpulab.vk.validation` logger and, with
GPULAB_VK_VALIDATION_LOG=FILE, are appended to FILE as well, one line each: the net that the
test suites read, for this process and every `gpulab` process it starts.
"""

from __future__ import annotations

import functools
import os
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from gpulab.vk._binding import decode_version, instance_function, vk
from gpulab.vk._handle import VkObject
from gpulab.vk.bare_instance import API_VERSION, GPULAB_VERSION, validation_requested
from gpulab.vk.errors import InitializationFailed, NoVulkanDevice
from gpulab.vk.physical_device import PhysicalDevice

if TYPE_CHECKING:
    import logging

VALIDATION_LOG_ENV = "GPULAB_VK_VALIDATION_LOG"
VALIDATION_LAYER = "VK_LAYER_KHRONOS_validation"
DEBUG_UTILS = "VK_EXT_debug_utils"
VALIDATION_FEATURES = "VK_EXT_validation_features"

VALIDATION_LOGGER = "gpulab.vk.validation"


def available_layers() -> set[str]:
    """The names of the instance layers installed here."""
    return {layer.layerName for layer in vk.vkEnumerateInstanceLayerProperties()}


def _available_extensions(layer: str | None = None) -> set[str]:
    return {ext.extensionName for ext in vk.vkEnumerateInstanceExtensionProperties(layer)}


_creating = threading.local()
"""Per thread, while it is in vkCreateInstance: `held`, the messages of that call, reported
once it succeeds. When it fails, its exception says why in one line, and the loader's own
lines about the same failure ("Found no drivers!", once per attempt) are dropped."""


def _on_validation_message(severity: int, _types: int, data: Any, _user: Any) -> int:
    message = vk.ffi.string(data.pMessage).decode(errors="replace")
    error = severity >= vk.VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT
    held = getattr(_creating, "held", None)
    if held is not None:
        held.append((error, message))
    else:
        _report(error, message)
    return 0


def _logger() -> logging.Logger:
    """The validation messages' logger. logging is imported here, not with the module: every
    run imports this module on its way to the driver, and only a run with the layer asked for
    has anything to log."""
    import logging  # noqa: PLC0415

    return logging.getLogger(VALIDATION_LOGGER)


def _report(error: bool, message: str) -> None:
    logger = _logger()
    (logger.error if error else logger.warning)("%s", message)
    path = os.environ.get(VALIDATION_LOG_ENV)
    if path:
        line = message.replace("\\", "\\\\").replace("\n", "\\n")
        record = f"{'ERROR' if error else 'WARNING'} pid {os.getpid()}: {line}\n".encode()
        # One O_APPEND write per message: lines from several processes never interleave.
        out = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(out, record)
        finally:
            os.close(out)


def _messenger_info() -> Any:
    """Warnings and errors of every type, to _on_validation_message."""
    return vk.VkDebugUtilsMessengerCreateInfoEXT(
        messageSeverity=vk.VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT
        | vk.VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT,
        messageType=vk.VK_DEBUG_UTILS_MESSAGE_TYPE_GENERAL_BIT_EXT
        | vk.VK_DEBUG_UTILS_MESSAGE_TYPE_VALIDATION_BIT_EXT
        | vk.VK_DEBUG_UTILS_MESSAGE_TYPE_PERFORMANCE_BIT_EXT,
        pfnUserCallback=_on_validation_message,
    )


def _create_messenger(raw_instance: Any) -> Callable[[], object]:
    """Create a debug messenger forwarding validation messages to logging; returns its destroyer."""
    create = instance_function(raw_instance, "vkCreateDebugUtilsMessengerEXT")
    destroy = instance_function(raw_instance, "vkDestroyDebugUtilsMessengerEXT")
    info = _messenger_info()
    raw = create(raw_instance, info, None)
    return functools.partial(destroy, raw_instance, raw, None)


def _create_holding_messages(create_info: Any) -> Any:
    """vkCreateInstance; the messages of a messenger in its chain reported if it succeeds."""
    held: list[tuple[bool, str]] = []
    _creating.held = held
    try:
        raw = vk.vkCreateInstance(create_info, None)
    finally:
        _creating.held = None
    for error, message in held:
        _report(error, message)
    return raw


def _destroy_instance(raw: Any, destroy_messenger: Callable[[], object] | None) -> None:
    # The instance owns its messenger: it goes first, inside the instance's one release path.
    if destroy_messenger is not None:
        destroy_messenger()
    vk.vkDestroyInstance(raw, None)


def _create(
    app_name: str, validation: bool | None
) -> tuple[Any, Callable[[], object] | None, bool]:
    """A new VkInstance (see Instance), its messenger's destroyer (None without one), and
    whether validation is on."""
    want_validation = validation_requested() if validation is None else validation
    layers: list[str] = []
    extensions: list[str] = []
    if want_validation:
        if VALIDATION_LAYER in available_layers():
            layers.append(VALIDATION_LAYER)
            offered = _available_extensions() | _available_extensions(VALIDATION_LAYER)
            extensions.extend(e for e in (DEBUG_UTILS, VALIDATION_FEATURES) if e in offered)
        else:
            _logger().warning("%s is not installed; running without validation", VALIDATION_LAYER)
    app_info = vk.VkApplicationInfo(
        pApplicationName=app_name,
        applicationVersion=GPULAB_VERSION,
        pEngineName="gpulab",
        engineVersion=GPULAB_VERSION,
        apiVersion=API_VERSION,
    )
    # The chain's structs stay in variables until vkCreateInstance returns.
    messenger_info = _messenger_info() if DEBUG_UTILS in extensions else None
    enabled_features = vk.ffi.new(
        "VkValidationFeatureEnableEXT[1]",
        [vk.VK_VALIDATION_FEATURE_ENABLE_SYNCHRONIZATION_VALIDATION_EXT],
    )
    features = (
        vk.VkValidationFeaturesEXT(
            pNext=messenger_info or vk.ffi.NULL,
            enabledValidationFeatureCount=1,
            pEnabledValidationFeatures=enabled_features,
        )
        if VALIDATION_FEATURES in extensions
        else None
    )
    create_info = vk.VkInstanceCreateInfo(
        pNext=features or messenger_info or vk.ffi.NULL,
        pApplicationInfo=app_info,
        ppEnabledLayerNames=layers or None,
        ppEnabledExtensionNames=extensions or None,
    )
    raw = _create_holding_messages(create_info)
    try:
        destroy_messenger = _create_messenger(raw) if messenger_info else None
    except BaseException:
        vk.vkDestroyInstance(raw, None)
        raise
    return raw, destroy_messenger, bool(layers)


class Instance(VkObject):
    """A VkInstance. Validation is off unless `validation=True` or GPULAB_VK_VALIDATION=1.

    Validation is the Khronos layer with synchronization validation on (where the layer offers
    VK_EXT_validation_features) and a debug messenger, which also sees the messages of
    vkCreateInstance and vkDestroyInstance. When validation is asked for but the layer is not
    installed, a warning is logged and the instance is created without it.
    """

    def __init__(
        self, app_name: str = "gpulab", validation: bool | None = None, *, adopt: int = 0
    ) -> None:
        """`adopt`: the handle of an instance gpulab.vk.bare_instance made (no validation),
        which this object then owns, instead of creating one."""
        if adopt:
            raw, destroy_messenger, self.validation = vk.ffi.cast("VkInstance", adopt), None, False
        else:
            raw, destroy_messenger, self.validation = _create(app_name, validation)
        self._own(raw, functools.partial(_destroy_instance, raw, destroy_messenger), None)
        self._physical_devices: list[PhysicalDevice] | None = None
        self._enumerating = threading.Lock()

    @property
    def api_version(self) -> str:
        """The version of the loader's instance-level API."""
        return decode_version(vk.vkEnumerateInstanceVersion())

    def physical_devices(self) -> list[PhysicalDevice]:
        """Every physical device, in the loader's order (index = position); enumerated once
        (one thread at a time), so every caller gets the same objects."""
        with self._enumerating:
            if self._physical_devices is None:
                try:
                    raws = vk.vkEnumeratePhysicalDevices(self.raw)
                except InitializationFailed:
                    # What the loader says when its drivers (e.g. Mesa's for absent hardware)
                    # all fail to start: no usable device, the contract's "unavailable".
                    raise NoVulkanDevice(
                        "vkEnumeratePhysicalDevices",
                        "no Vulkan driver could be initialized (VK_ERROR_INITIALIZATION_FAILED)",
                    ) from None
                self._physical_devices = [
                    PhysicalDevice(self, raw, i) for i, raw in enumerate(raws)
                ]
            return list(self._physical_devices)

    def physical_device(self, index: int = 0) -> PhysicalDevice:
        """The device with this index; NoVulkanDevice when there is none."""
        devices = self.physical_devices()
        if not devices:
            raise NoVulkanDevice("vkEnumeratePhysicalDevices", "no Vulkan device was found")
        if not 0 <= index < len(devices):
            raise NoVulkanDevice(
                "vkEnumeratePhysicalDevices",
                f"device index {index} does not exist",
                f"devices: 0..{len(devices) - 1} (see gpulab devices)",
            )
        return devices[index]

    def close(self) -> None:
        """Destroy the instance after every device and messenger created from it."""
        self._physical_devices = None
        super().close()


_shared: Instance | None = None
_shared_lock = threading.Lock()


def shared_instance() -> Instance:
    """The process-wide instance, created on first use and owned by this module.

    Long-lived code shares it instead of making its own: NVIDIA's driver (580 in a container)
    refuses vkCreateInstance after about 30 instances in one process, even destroyed ones.
    It is destroyed at exit (after the devices made from it), or by an explicit close(), after
    which the next call makes a new one. Thread-safe: `gpulab run` may start making it on a
    second thread while the first imports the rest (see gpulab.running.early).
    """
    global _shared  # noqa: PLW0603 - the one process-wide instance
    with _shared_lock:
        if _shared is None or _shared.closed:
            _shared = Instance()
        return _shared


def adopt_shared_instance(raw: int) -> None:
    """Make the instance `raw` (gpulab.vk.bare_instance's, made without validation) the
    process-wide one; destroyed at once if there is one already."""
    global _shared  # noqa: PLW0603
    with _shared_lock:
        if _shared is None or _shared.closed:
            _shared = Instance(adopt=raw)
            return
    vk.vkDestroyInstance(vk.ffi.cast("VkInstance", raw), None)
