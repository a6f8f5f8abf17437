"""Start the Vulkan driver early: `gpulab run` begins creating the Vulkan instance and
enumerating its devices on a second thread, while the first imports numpy and the backends
and loads the graph.

The driver's own work (vkCreateInstance and the device enumeration: about 0.1 s on the H200's
driver; vkCreateDevice: 55-70 ms on the H100's) runs with the GIL released, so it overlaps the
imports instead of following them. The thread reports nothing: what it made is the
process-wide instance the run would have made anyway (gpulab.vk.shared_instance, thread-safe)
and, when asked, the device the run will choose, held for its session; whatever failed fails
again, with its proper message, when the run asks for the device.

The `gpulab` command starts it before it even imports its parsers (start_for_command_line,
from gpulab.cli.entry), reading the run's backend and device from the command line ahead of
argparse; the run's own start_vulkan then takes that thread over. A command line read wrongly
costs only time: a device opened ahead for another index is closed when the session asks for
its own (gpulab.vk.ahead.open_device), one no run takes is released by finish_early.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Sequence

VULKAN_BACKENDS = ("auto", "vulkan")
"""The backends whose run opens a Vulkan device (auto: when one exists)."""
WORKER_ENV = "GPULAB_WORKER"
"""gpulab.cli.run.WORKER_ENV, read here before the command line is imported: set, `gpulab
run` hands its graph to a worker."""
_VALUED = ("--backend", "--device", "--worker")
_started: threading.Thread | None = None
"""The thread start_for_command_line started, until start_vulkan takes it over."""


def _open_driver(device: int | None, open_ahead: bool) -> None:
    # Any failure here, the run meets again and reports in its own words.
    try:
        with contextlib.suppress(Exception):
            from gpulab.vk.instance import shared_instance  # noqa: PLC0415 - numpy-free, see vk

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


def run_request(argv: Sequence[str]) -> tuple[str, int | None] | None:
    """The backend and --device of a `gpulab run` command line, read ahead of argparse in
    the spellings `--backend B`, `--backend=B` and the same for --device (None: not a run on
    this machine, or options this reading does not follow, such as abbreviations)."""
    if not argv or argv[0] != "run" or os.environ.get(WORKER_ENV):
        return None
    backend, device = "auto", None
    words = iter(argv[1:])
    for word in words:
        if word == "--":
            break
        name, equals, value = word.partition("=")
        if name in _VALUED:
            value = value if equals else next(words, "")
            if name == "--worker":
                return None
            if name == "--backend":
                backend = value
            elif value.isdigit():
                device = int(value)
            else:
                return None
        elif word.startswith("--") and any(full.startswith(name) for full in _VALUED):
            return None  # an abbreviation argparse would accept
    return backend, device


def start_for_command_line(argv: Sequence[str]) -> None:
    """Start the driver, and the device ahead, for the `gpulab run` that `argv` asks for
    (nothing for other commands); the run's start_vulkan takes the thread over."""
    global _started  # noqa: PLW0603 - one command line per process
    request = run_request(argv)
    if request is not None and _started is None:
        _started = start_vulkan(*request, open_ahead=True)


def start_vulkan(
    backend: str, device: int | None = None, *, open_ahead: bool = False
) -> threading.Thread | None:
    """Start opening the Vulkan driver for a run on `backend` (None for cpu and native); with
    `open_ahead`, also the device the run will choose (`device`: its --device), which the
    run's DeviceSession then takes (gpulab.vk.ahead.open_device); finish_early ends it.
    A thread start_for_command_line started is returned instead, for whatever backend (so
    that finish_early ends it)."""
    global _started
    if _started is not None:
        thread, _started = _started, None
        return thread
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
