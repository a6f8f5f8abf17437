"""Start the Vulkan driver early: `gpulab run` begins creating the Vulkan instance and
enumerating its devices on a second thread, while the first imports numpy and the backends
and loads the graph.

The driver's own work (vkCreateInstance and the device enumeration: about 0.1 s on the H200's
driver) runs with the GIL released, so it overlaps the imports instead of following them. The
thread keeps nothing and reports nothing: whatever it made is the process-wide instance the
run would have made anyway (gpulab.vk.shared_instance, thread-safe), and whatever failed fails
again, with its proper message, when the run asks for the device.
"""

from __future__ import annotations

import contextlib
import threading

VULKAN_BACKENDS = ("auto", "vulkan")
"""The backends whose run opens a Vulkan device (auto: when one exists)."""


def _open_driver() -> None:
    # Any failure here, the run meets again and reports in its own words.
    with contextlib.suppress(Exception):
        from gpulab.vk.instance import shared_instance  # noqa: PLC0415 - numpy-free, see vk

        shared_instance().physical_devices()


def start_vulkan(backend: str) -> threading.Thread | None:
    """Start opening the Vulkan driver for a run on `backend` (None for cpu and native)."""
    if backend not in VULKAN_BACKENDS:
        return None
    thread = threading.Thread(target=_open_driver, name="gpulab-vulkan-early", daemon=True)
    thread.start()
    return thread
