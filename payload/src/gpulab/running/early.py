"""Start the Vulkan driver early: `gpulab run` begins creating the Vulkan instance and
enumerating its devices on a second thread, while the first imports numpy and the backends
and loads the graph.

The driver's own work (vkCreateInstance and the device enumeration: about 0.1 s on the H200's
driver; vkCreateDevice: 55-70 ms on the H100's) runs with the GIL released, so it overlaps the
imports instead of following them. The thread reports nothing: what it made is the
process-wide instance the run would have made anyway (gpulab.vk.shared_instance, thread-safe)
and, when asked, the device the run will choose, held for its session; whatever failed fails
again, with its proper message, when the run asks for the device.
"""

from __future__ import annotations

import contextlib
import threading

VULKAN_BACKENDS = ("auto", "vulkan")
"""The backends whose run opens a Vulkan device (auto: when one exists)."""


def _open_driver(device: int | None, open_ahead: bool) -> None:
    # Any failure here, the run meets again and reports in its own words.
    try:
        with contextlib.suppress(Exception):
            from gpulab.vk.bare_instance import create_instance, validation_requested  # noqa: PLC0415

            # The driver first: the binding imports meanwhile (start_vulkan's import_first).
            raw = None if validation_requested() else create_instance("gpulab")
            from gpulab.vk.instance import adopt_shared_instance, shared_instance  # noqa: PLC0415

            if raw:
                adopt_shared_instance(raw)
            physical_devices = shared_instance().physical_devices()
            if open_ahead and physical_devices:
                from gpulab.placement.device_choice import choose_device  # noqa: PLC0415
                from gpulab.vk.ahead import open_ahead as open_device_ahead  # noqa: PLC0415

                choice = choose_device(device)
                if choice.name is not None:
                    open_device_ahead(physical_devices[choice.index])
    finally:
        if open_ahead:
            from gpulab.vk.ahead import ahead_settled  # noqa: PLC0415

            ahead_settled()


def start_vulkan(
    backend: str, device: int | None = None, *, open_ahead: bool = False, import_first: bool = False
) -> threading.Thread | None:
    """Start opening the Vulkan driver for a run on `backend` (None for cpu and native); with
    `open_ahead`, also the device the run will choose (`device`: its --device), which the
    run's DeviceSession then takes (gpulab.vk.ahead.open_device); finish_early ends it.
    `import_first`: import the thread's modules (the Vulkan binding, the device choice; no
    numpy) on this thread once it started, for a caller that has not begun its own imports
    yet: they load while the thread is in vkCreateInstance (made through ctypes,
    gpulab.vk.bare_instance, where validation is off), so the thread goes from the driver
    straight on to the device instead of sharing the GIL with the caller's imports
    (gpulab.cli.head_start)."""
    if backend not in VULKAN_BACKENDS:
        return None
    if open_ahead:
        from gpulab.vk.ahead import opening_ahead  # noqa: PLC0415

        opening_ahead()
    thread = threading.Thread(
        target=_open_driver,
        args=(device, open_ahead),
        name="gpulab-vulkan-early",
        daemon=True,
    )
    thread.start()
    if import_first:
        import gpulab.placement.device_choice  # noqa: PLC0415
        import gpulab.vk.device  # noqa: F401, PLC0415
    return thread


def finish_early(thread: threading.Thread | None, *, release: bool = True) -> None:
    """Wait for start_vulkan's thread; with `release`, close a device it opened that the run
    did not take (without: the process's end releases it)."""
    if thread is None:
        return
    thread.join()
    if release:
        from gpulab.vk.ahead import close_unused_ahead  # noqa: PLC0415

        close_unused_ahead()
