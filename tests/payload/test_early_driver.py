"""`gpulab run` starts the Vulkan driver on a second thread: one shared instance, whichever
thread asks first (made through ctypes before the binding is imported, unless validation is
asked for), and nothing started for cpu or native runs."""

from __future__ import annotations

import os
import subprocess
import sys
import threading

from gpulab.running.early import start_vulkan
from gpulab.vk import shared_instance

from tests.payload.test_cli import gpulab, no_driver_env


def test_cpu_and_native_runs_start_no_driver() -> None:
    assert start_vulkan("cpu") is None
    assert start_vulkan("native") is None


def test_the_early_thread_makes_the_instance_the_run_then_uses() -> None:
    early = start_vulkan("vulkan")
    assert early is not None
    early.join()
    instance = shared_instance()
    assert shared_instance() is instance
    assert instance.physical_devices()[0] is instance.physical_devices()[0]


def test_threads_asking_at_once_share_one_instance_and_one_device_list() -> None:
    found: list[object] = []
    start = threading.Barrier(4)

    def ask() -> None:
        start.wait()
        instance = shared_instance()
        found.append((instance, instance.physical_devices()[0]))

    threads = [threading.Thread(target=ask) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(found) == 4
    assert len({id(instance) for instance, _ in found}) == 1
    assert len({id(device) for _, device in found}) == 1


def test_a_run_without_a_driver_still_says_why_in_one_line() -> None:
    # The early thread meets the missing driver first and keeps quiet; the run reports it.
    done = gpulab(
        "run", "payload/examples/saxpy_norm.json", "--backend", "vulkan", env=no_driver_env()
    )
    assert done.returncode == 3
    assert done.stderr.count("\n") == 1


def _python(code: str, env: dict[str, str] | None = None) -> str:
    """`code` run in a new interpreter (its own shared instance); its stdout."""
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    assert (done.returncode, done.stderr) == (0, "")
    return done.stdout.strip()


def test_the_bare_instance_becomes_the_shared_one_with_the_same_devices() -> None:
    out = _python(
        "from gpulab.vk.bare_instance import create_instance\n"
        "from gpulab.vk.instance import Instance, adopt_shared_instance, shared_instance\n"
        "raw = create_instance('gpulab')\n"
        "assert raw\n"
        "adopt_shared_instance(raw)\n"
        "shared = shared_instance()\n"
        "assert not shared.validation and shared_instance() is shared\n"
        "names = [p.info.name for p in shared.physical_devices()]\n"
        "made = Instance(validation=False)\n"
        "assert names == [p.info.name for p in made.physical_devices()], names\n"
        "made.close()\n"
        "shared.close()\n"
        "print(len(names))"
    )
    assert int(out) >= 1


def test_a_second_adopted_instance_is_destroyed_not_shared() -> None:
    out = _python(
        "from gpulab.vk._handle import live_handles\n"
        "from gpulab.vk.bare_instance import create_instance\n"
        "from gpulab.vk.instance import adopt_shared_instance, shared_instance\n"
        "first = shared_instance()\n"
        "adopt_shared_instance(create_instance('gpulab'))\n"
        "assert shared_instance() is first\n"
        "print(live_handles().get('Instance'))"
    )
    assert out == "1"


def test_without_a_driver_there_is_no_bare_instance() -> None:
    out = _python(
        "from gpulab.vk.bare_instance import create_instance\nprint(create_instance('gpulab'))",
        env=no_driver_env(),
    )
    assert out == "None"


def test_with_validation_asked_for_the_early_thread_makes_the_instance_as_before() -> None:
    # The bare instance has no layers: with GPULAB_VK_VALIDATION the thread leaves it be.
    out = _python(
        "from gpulab.running.early import start_vulkan\n"
        "from gpulab.vk.instance import VALIDATION_LAYER, available_layers, shared_instance\n"
        "start_vulkan('vulkan').join()\n"
        "print(shared_instance().validation == (VALIDATION_LAYER in available_layers()))",
        env={**os.environ, "GPULAB_VK_VALIDATION": "1"},
    )
    assert out == "True"
